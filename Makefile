# amqplock. `make` builds ./amqplock; `make check` installs what is missing,
# starts a private RabbitMQ and runs every test; `make demo` shows it at work.

VERSION := 0.4.0

CC ?= cc
PKG_CONFIG ?= pkg-config
PKGS := librabbitmq libcjson
# libcurl: its headers only; mgmt.c loads it when asked (dlopen).
HEADER_PKGS := libcurl

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

PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) $(HEADER_PKGS) 2>/dev/null)
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -DAMQPLOCK_VERSION='"$(VERSION)"' \
	$(PKG_CFLAGS) $(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(OPT) $(LDFLAGS)

# The pure sources (no I/O): names, numbers, time arithmetic, broker
# URLs, the list of semaphores, a held slot's decisions and the rules of
# the lease made of messages, tested on their own by tests/unit. url.c
# needs librabbitmq's amqp_parse_url and list.c cJSON, hence $(PKG_LIBS)
# on the unit tests' link line. Every other src/*.c is amqplock's too.
PURE_SRCS := src/names.c src/parse.c src/status.c src/clock.c src/url.c src/list.c src/rules.c src/metrics.c \
	src/mlease.c
SRCS := $(PURE_SRCS) $(filter-out $(PURE_SRCS),$(sort $(wildcard src/*.c)))
OBJS := $(SRCS:src/%.c=build/%.o)
UNIT_TESTS := $(patsubst tests/unit/%.c,build/unit/%,$(wildcard tests/unit/test_*.c))

.PHONY: all deps check check-brokers unit demo mutants fmt fmt-check clean layers model
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
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(PURE_SRCS:src/%.c=build/%.o) $(ALL_LDFLAGS) $(PKG_LIBS)

-include $(OBJS:.o=.d)

# Installs, with apt-get, whatever of the build and test dependencies is
# missing. Does nothing when all are there. (libc6-dev: gcc only recommends
# it, and install-deps.sh installs no recommends.)
DEB_PKGS := gcc libc6-dev make pkg-config openssl librabbitmq-dev libcjson-dev libcurl4-openssl-dev rabbitmq-server jq clang-format bats \
	bats-support bats-assert valgrind groff-base zsh fish bash-completion python3 python3-prometheus-client psmisc spin
deps:
	@tests/lib/install-deps.sh $(DEB_PKGS)

unit: $(UNIT_TESTS)

# The sources' shape, counted on the calls between their objects
# (tests/lib/layers.sh): circles, layers, long files. make check runs it
# (tests/layers.bats).
layers: amqplock
	tests/lib/layers.sh build

# The holder's protocol and the N-slot line under SPIN (model/run.sh): the
# configurations that fit in full, each known-bad variant, each point a
# run must reach, and the one searched by bitstate. make check runs those
# with an adversary, the variants and three of the points
# (tests/model.bats, tests/mlease.bats).
model: deps
	MODEL_ALL=1 model/run.sh

check: deps
	$(MAKE) amqplock unit
	tests/run.sh

# The same suites, and the cluster suite, against RabbitMQ 4.0 (Debian trixie)
# and 4.3 (Debian sid), each in a minimal root (debootstrap) its nodes run
# from through chroot; and a build inside the sid root (tests/lib/brokers.sh).
# BROKER_RUNS="4.0 4.0-cluster" names some of its runs (default: all).
# Without the layer check and the model: no broker changes what they read.
check-brokers: deps
	$(MAKE) amqplock unit
	AMQPLOCK_TEST_SKIP="$(strip layers model $(AMQPLOCK_TEST_SKIP))" tests/lib/brokers.sh $(BROKER_RUNS)

demo: deps
	$(MAKE) amqplock
	demo/demo.sh

# make install [PREFIX=/usr/local] [DESTDIR=...] [BINDIR=...] [MANDIR=...]
# installs the binary, the man page and the bash, zsh and fish completions,
# each where a new shell on Debian finds it by itself (tests/docs.bats
# asks each shell):
# - bash: the directory bash-completion.pc names when it lies under PREFIX
#   (PREFIX=/usr), else PREFIX/share/bash-completion/completions, which
#   bash-completion reads for PREFIX=/usr/local (XDG_DATA_DIRS' default).
# - zsh: PREFIX/share/zsh/vendor-completions or .../site-functions,
#   whichever zsh's built-in $fpath lists (Debian's lists vendor-completions
#   under /usr, site-functions under /usr/local); without zsh, Debian's.
# - fish: the directory fish.pc names when it lies under PREFIX (PREFIX=/usr);
#   for PREFIX=/usr/local, /etc/fish/completions, outside PREFIX: a new fish
#   reads no directory under /usr/local (XDG_DATA_DIRS would add one, but it
#   is unset outside desktop sessions); for another PREFIX,
#   PREFIX/share/fish/vendor_completions.d.
# Any of the *DIR variables can be given to override that.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
pc_dir_under_prefix = $(filter $(PREFIX)/%,$(shell $(PKG_CONFIG) --variable=completionsdir $(1) 2>/dev/null))
zsh_fpath = $(shell env -u FPATH zsh -f -c 'print -r -- $$fpath' 2>/dev/null)
BASH_COMPLETION_DIR ?= $(or $(call pc_dir_under_prefix,bash-completion),$(PREFIX)/share/bash-completion/completions)
FISH_COMPLETION_DIR ?= $(or $(call pc_dir_under_prefix,fish),$(if $(filter /usr/local,$(PREFIX)),/etc/fish/completions,$(PREFIX)/share/fish/vendor_completions.d))
ZSH_COMPLETION_DIR ?= $(or $(firstword $(filter $(PREFIX)/share/zsh/vendor-completions $(PREFIX)/share/zsh/site-functions,$(zsh_fpath))),$(if $(filter /usr,$(PREFIX)),/usr/share/zsh/vendor-completions,$(PREFIX)/share/zsh/site-functions))
INSTALLED = $(BINDIR)/amqplock $(MANDIR)/man1/amqplock.1 $(BASH_COMPLETION_DIR)/amqplock \
	$(ZSH_COMPLETION_DIR)/_amqplock $(FISH_COMPLETION_DIR)/amqplock.fish

.PHONY: install uninstall
install: amqplock
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(MANDIR)/man1' '$(DESTDIR)$(BASH_COMPLETION_DIR)' \
		'$(DESTDIR)$(ZSH_COMPLETION_DIR)' '$(DESTDIR)$(FISH_COMPLETION_DIR)'
	install -m 755 amqplock '$(DESTDIR)$(BINDIR)/amqplock'
	install -m 644 man/amqplock.1 '$(DESTDIR)$(MANDIR)/man1/amqplock.1'
	install -m 644 completions/amqplock.bash '$(DESTDIR)$(BASH_COMPLETION_DIR)/amqplock'
	install -m 644 completions/_amqplock '$(DESTDIR)$(ZSH_COMPLETION_DIR)/_amqplock'
	install -m 644 completions/amqplock.fish '$(DESTDIR)$(FISH_COMPLETION_DIR)/amqplock.fish'

uninstall:
	rm -f $(INSTALLED:%='$(DESTDIR)%')

# make deb: the Debian package (debian/), built with dpkg-buildpackage from
# a copy of the tree in build/deb/ (debian/ gets no build files), installs
# what debian/control's Build-Depends name when missing; prints the .deb's
# path. debian/changelog's version must be VERSION. make check-deb: lintian,
# and the package installed and tried in a clean Debian root
# (tests/lib/deb-check.sh).
DEB_DIR := build/deb
.PHONY: deb check-deb
deb:
	@tests/lib/install-deps.sh --build-deps .
	@v=$$(dpkg-parsechangelog -S Version) && [ "$$v" = '$(VERSION)' ] || { \
		echo "make deb: debian/changelog's version is $$v, the Makefile's VERSION $(VERSION):" \
			"add a debian/changelog entry for $(VERSION)" >&2; exit 1; }
	rm -rf $(DEB_DIR)
	tests/lib/copy-tree.sh $(DEB_DIR)/amqplock-$(VERSION)
	@# (the package is built as a clean clone would be, without this make's
	@# flags and variables)
	cd $(DEB_DIR)/amqplock-$(VERSION) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		dpkg-buildpackage -b -us -uc -Jauto
	rm -rf $(DEB_DIR)/amqplock-$(VERSION)
	@echo "$(DEB_DIR)/amqplock_$(VERSION)_$$(dpkg --print-architecture).deb"

check-deb:
	tests/lib/deb-check.sh

# Deliberately broken builds, each of which some test must catch.
mutants: deps
	tests/mutants.sh

FMT_FILES := $(wildcard src/*.c src/*.h tests/unit/*.c tests/unit/*.h tests/tools/*.c fuzz/*.c fuzz/*.h bench/*.c)
fmt:
	clang-format -i $(FMT_FILES)
fmt-check:
	clang-format --dry-run --Werror $(FMT_FILES)

# libFuzzer targets: make fuzz (see fuzz/fuzz.mk).
-include fuzz/fuzz.mk
# Benchmarks against the AMQP floor, flock and etcd: make bench.
-include bench/bench.mk
# A three-node RabbitMQ cluster on loopback and its suite: make check-cluster.
-include tests/cluster/cluster.mk
# Network partitions of a three-node cluster: make check-partitions, make partitions.
-include tests/partition/partition.mk

clean:
	rm -rf build amqplock
