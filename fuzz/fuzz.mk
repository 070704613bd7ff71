# libFuzzer targets for the parts of amqplock that read untrusted text:
# semaphore names and queue names (fuzz_names), numbers, signals and quoted
# arguments (fuzz_numbers), the broker URL and the password file
# (fuzz_url), the management API's lists (fuzz_list). Included by the top
# Makefile, whose variables it uses.
#
#   make fuzz         installs clang and its fuzzer runtime if missing, builds
#                     every target and runs each for FUZZ_SECONDS (default 60)
#   make fuzz-smoke   the same, FUZZ_SMOKE_SECONDS (10) per target (CI: 5)
#   make fuzz-build   only builds build/fuzz/fuzz_*
#
# Each run starts from the committed seeds in fuzz/corpus/<target>/ and
# keeps what it finds in build/fuzz/corpus/<target>/; a crash is saved as
# build/fuzz/artifacts/<target>-crash-*. fuzz/run.sh prints one TAP line per
# target and "N passed, N failed", and fails on any crash, leak or broken
# invariant. Reproduce one with: build/fuzz/<target> <artifact file>.
#
# Everything is compiled with clang, -fsanitize=fuzzer,address,undefined, into
# build/fuzz/: never mixed with the gcc objects in build/.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := fuzz_names fuzz_numbers fuzz_url fuzz_list
FUZZ_DEB_PKGS := clang libclang-rt-14-dev

FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	$(filter-out -Werror,$(WARN)) -DAMQPLOCK_VERSION='"$(VERSION)"' $(PKG_CFLAGS) -Isrc

# The project sources each target needs, and its libraries.
FUZZ_SRCS_fuzz_names := names.c
FUZZ_SRCS_fuzz_numbers := parse.c
FUZZ_SRCS_fuzz_url := conn_opts.c url.c clock.c parse.c status.c
FUZZ_LIBS_fuzz_url = $(PKG_LIBS)
FUZZ_SRCS_fuzz_list := list.c names.c parse.c status.c
FUZZ_LIBS_fuzz_list = $(PKG_LIBS)

FUZZ_BINS := $(FUZZ_TARGETS:%=build/fuzz/%)
FUZZ_OBJS := $(sort $(foreach t,$(FUZZ_TARGETS),$(FUZZ_SRCS_$(t):%.c=build/fuzz/obj/%.o)))

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-deps

fuzz: fuzz-deps
	$(MAKE) --no-print-directory fuzz-build
	fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

FUZZ_SMOKE_SECONDS ?= 10
fuzz-smoke:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS)

fuzz-build: $(FUZZ_BINS)

# Nothing to do when clang can already link a fuzzer; else apt-get what is
# missing (Debian 12: clang-14 and its runtime, which holds libFuzzer).
fuzz-deps:
	@mkdir -p build/fuzz
	@printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' \
		>build/fuzz/probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o build/fuzz/probe build/fuzz/probe.c \
		>/dev/null 2>&1 || tests/lib/install-deps.sh $(FUZZ_DEB_PKGS)
	@rm -f build/fuzz/probe build/fuzz/probe.c

# As build/flags does for the main build: new flags rebuild everything.
build/fuzz/flags: FORCE
	@mkdir -p build/fuzz
	@echo '$(FUZZ_CC) $(FUZZ_CFLAGS)' | cmp -s - $@ || echo '$(FUZZ_CC) $(FUZZ_CFLAGS)' >$@

$(FUZZ_OBJS): build/fuzz/obj/%.o: src/%.c build/fuzz/flags
	@mkdir -p build/fuzz/obj
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

define FUZZ_TARGET_RULE
build/fuzz/$(1): fuzz/$(1).c $$(FUZZ_SRCS_$(1):%.c=build/fuzz/obj/%.o) build/fuzz/flags
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -MMD -MP -o $$@ $$< $$(FUZZ_SRCS_$(1):%.c=build/fuzz/obj/%.o) \
		$$(FUZZ_LIBS_$(1))
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_TARGET_RULE,$(t))))

-include $(FUZZ_OBJS:.o=.d) $(FUZZ_BINS:=.d)
