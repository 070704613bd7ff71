# make bench: amqplock against the AMQP floor, flock(1) and etcd's lock, on
# a private RabbitMQ and a private etcd (bench/run.sh). Prints a table and
# writes bench/RESULTS.md. Included by the top-level Makefile.

BENCH_DEB_PKGS := gcc make pkg-config openssl librabbitmq-dev libcjson-dev rabbitmq-server \
	etcd-server etcd-client time perl util-linux coreutils procps
BENCH_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(shell $(PKG_CONFIG) --cflags librabbitmq 2>/dev/null) \
	$(CFLAGS)
BENCH_LIBS = $(shell $(PKG_CONFIG) --libs librabbitmq 2>/dev/null)

.PHONY: bench bench-brokers bench-phases bench-tools bench-clean
bench:
	@tests/lib/install-deps.sh $(BENCH_DEB_PKGS)
	$(MAKE) amqplock bench-tools
	bench/run.sh

# The same against RabbitMQ 4.0 and 4.3, from the Debian roots of make
# check-brokers (tests/lib/brokers.sh): bench/RESULTS-4.0.md and -4.3.md.
bench-brokers:
	@tests/lib/install-deps.sh $(BENCH_DEB_PKGS) debootstrap
	$(MAKE) amqplock bench-tools
	tests/lib/brokers.sh 4.0-bench 4.3-bench

# Where one clean hand-off's time goes, step by step (bench/phases.pl), on
# a private broker of its own: BENCH_PHASES_ROUNDS rounds (default 15).
bench-phases:
	@tests/lib/install-deps.sh $(BENCH_DEB_PKGS)
	$(MAKE) amqplock bench-tools
	@dir=$$(mktemp -d /tmp/amqplock-phases.XXXXXX); \
	tests/lib/broker.sh start $$dir >/dev/null && \
	( . $$dir/env && ./amqplock create bench-phases 1 && \
	  bench/phases.pl ./amqplock bench-phases $(BENCH_PHASES_ROUNDS) ); \
	rc=$$?; tests/lib/broker.sh stop $$dir >/dev/null; rm -rf $$dir; exit $$rc

bench-tools: bench/floor bench/timeit bench/stamp

# The AMQP floor: same library, same flags, same header compatibility.
bench/floor: bench/floor.c src/amqp_compat.h build/flags
	$(CC) $(BENCH_CFLAGS) -o $@ bench/floor.c $(ALL_LDFLAGS) $(BENCH_LIBS)

bench/timeit: bench/timeit.c build/flags
	$(CC) $(BENCH_CFLAGS) -o $@ bench/timeit.c $(ALL_LDFLAGS) -lm

bench-clean:
	rm -f bench/floor bench/timeit bench/stamp

bench/stamp: bench/stamp.c build/flags
	$(CC) $(BENCH_CFLAGS) -o $@ bench/stamp.c $(ALL_LDFLAGS)
