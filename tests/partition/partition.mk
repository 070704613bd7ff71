# make check-partitions: the partition suite's short run (CI); make
# partitions: its long run. A three-node RabbitMQ cluster and six clients,
# each in a network namespace of its own, cut and healed by a nemesis
# (tests/partition/run.sh, tests/lib/netns-cluster.sh). Needs root (ip
# netns), nftables and iproute2, installed here if missing. Included by the
# top-level Makefile.
.PHONY: check-partitions partitions

# The recorder the jobs run (tests/tools/stamp.c).
build/stamp: tests/tools/stamp.c build/flags
	@mkdir -p build
	$(CC) $(ALL_CFLAGS) -o $@ $<

check-partitions: deps amqplock build/stamp
	@tests/lib/install-deps.sh nftables iproute2
	tests/partition/run.sh short

partitions: deps amqplock build/stamp
	@tests/lib/install-deps.sh nftables iproute2
	tests/partition/run.sh long
