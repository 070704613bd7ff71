# make check-cluster: builds amqplock, starts a private three-node RabbitMQ
# cluster on loopback (tests/lib/cluster.sh), runs tests/cluster/cluster.bats
# against it and stops it. Included by the top-level Makefile.
.PHONY: check-cluster
check-cluster: deps
	$(MAKE) amqplock
	tests/cluster/run.sh
