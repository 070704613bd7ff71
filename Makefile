# amqplock. `make` builds ./amqplock; `make check` installs what is missing,
# starts a private RabbitMQ and runs every test; `make demo` shows it at work.

VERSION := 0.1.0

CC ?= cc
PKG_CONFIG ?= pkg-config
PKGS := librabbitmq libcjson

# CI builds with -Werror; WERROR=1 asks for the same anywhere.
ifeq ($(CI),true)
WERROR ?= 1
endif
WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wcast-qual -Wundef -Wvla
ifeq ($(WERROR),1)
WARN += -Werror
endif
OPT := -O2 -g
ifeq ($(SANITIZE),1)
OPT := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lm
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -DAMQPLOCK_VERSION='"$(VERSION)"' \
	$(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(OPT) $(LDFLAGS)

# The sources that do not need the broker libraries at link time: names and
# numbers, tested on their own by tests/unit.
PURE_SRCS := src/names.c src/parse.c src/status.c
SRCS := $(PURE_SRCS) src/clock.c src/conn.c src/probe.c src/sem.c src/out.c src/cmd_admin.c src/cmd_client.c src/hold.c src/main.c
OBJS := $(SRCS:src/%.c=build/%.o)
UNIT_TESTS := $(patsubst tests/unit/%.c,build/unit/%,$(wildcard tests/unit/test_*.c))

.PHONY: all deps check unit demo mutants fmt fmt-check clean
all: amqplock

amqplock: $(OBJS)
	$(CC) $(ALL_LDFLAGS) -o $@ $(OBJS) $(PKG_LIBS)

# Objects depend on the flags too: a SANITIZE=1 build never mixes with a
# plain one.
build/flags: FORCE
	@mkdir -p build
	@echo '$(CC) $(ALL_CFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALL_CFLAGS)' >$@
FORCE:

build/%.o: src/%.c build/flags
	@mkdir -p build
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

build/unit/%: tests/unit/%.c $(PURE_SRCS:src/%.c=build/%.o) build/flags
	@mkdir -p build/unit
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(PURE_SRCS:src/%.c=build/%.o) $(ALL_LDFLAGS)

-include $(OBJS:.o=.d)

# Installs, with apt-get, whatever of the build and test dependencies is
# missing. Does nothing when all are there.
DEB_PKGS := gcc make pkg-config openssl librabbitmq-dev libcjson-dev rabbitmq-server jq clang-format bats \
	bats-support bats-assert valgrind
deps:
	@tests/install-deps.sh $(DEB_PKGS)

unit: $(UNIT_TESTS)

check: deps
	$(MAKE) amqplock unit
	tests/run.sh

demo: deps
	$(MAKE) amqplock
	tests/demo.sh

# Deliberately broken builds, each of which some test must catch.
mutants: deps
	tests/mutants.sh

FMT_FILES := $(wildcard src/*.c src/*.h tests/unit/*.c tests/unit/*.h fuzz/*.c fuzz/*.h)
fmt:
	clang-format -i $(FMT_FILES)
fmt-check:
	clang-format --dry-run --Werror $(FMT_FILES)

# libFuzzer targets: make fuzz (see fuzz/fuzz.mk).
-include fuzz/fuzz.mk
# Benchmarks against the AMQP floor, flock and etcd: make bench.
-include bench/bench.mk

clean:
	rm -rf build amqplock
