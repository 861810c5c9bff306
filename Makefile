# SPDX-License-Identifier: MIT
# hoardfs build.  `make` builds build/hoardfs; `make test` installs what is
# missing, then runs every quality gate (scripts/gates.sh): lint, the unit
# and integration suites, both again under ASan+UBSan, and the fuzzers;
# `make demo` runs the Fashion-MNIST training demo through a real mount.
#
# SANITIZE=address,undefined (or thread) builds into its own directory.
#
# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, the man pages and
# the mount(8) helper.  The helper goes to SBINDIR (/sbin), not under
# PREFIX, because /sbin is where mount(8) looks for mount.TYPE helpers.

SANITIZE ?=
comma := ,
ifeq ($(SANITIZE),)
BUILD ?= build
SANFLAGS :=
else
BUILD ?= build-$(subst $(comma),-,$(SANITIZE))
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
endif

CC ?= cc
PKGS := fuse3 libcurl openssl sqlite3 libxml-2.0 jansson
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.1.0)

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
	-Wmissing-prototypes -Wno-unused-parameter
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=gnu11 -D_FILE_OFFSET_BITS=64 -DFUSE_USE_VERSION=314 \
	-D_GNU_SOURCE -DHOARDFS_VERSION='"$(VERSION)"' $(WARN) -Iinclude -Isrc \
	$(PKG_CFLAGS) $(SANFLAGS) $(CFLAGS) -pthread -MMD -MP
LDLIBS := $(PKG_LIBS) -pthread -lm

LIB_SRC := $(sort $(filter-out src/cli/main.c,$(wildcard src/*/*.c)))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
MAIN_OBJ := $(BUILD)/src/cli/main.o
UNIT_SRC := $(sort $(wildcard test/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:test/unit/%.c=$(BUILD)/test/%)
PYTHON := /usr/bin/python3

.PHONY: all deps unit integration check test demo bench lint format clean \
	install uninstall check-sanitize fuzz fuzz-build

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
SBINDIR ?= /sbin

all: $(BUILD)/hoardfs

deps:
	@sh scripts/install-deps.sh

$(BUILD)/hoardfs: $(MAIN_OBJ) $(BUILD)/libhoardfs.a
	$(CC) $(SANFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libhoardfs.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# A unit test test_<module>[_<topic>].c links only its module and the
# modules below it, so one module's tests build while another is broken.
LAYERS_util := util
LAYERS_client := client util
LAYERS_idx := idx util
LAYERS_store := store util
LAYERS_sched := sched client store idx util
LAYERS_fs := fs sched client store idx util
LAYERS_cli := cli fs sched client store idx util
layer_objs = $(patsubst %.c,$(BUILD)/%.o,$(sort $(filter-out src/cli/main.c,\
	$(foreach l,$(LAYERS_$(1)),$(wildcard src/$(l)/*.c)))))
test_module = $(word 2,$(subst _, ,$(1)))

.SECONDARY:
.SECONDEXPANSION:
$(BUILD)/test/%: $(BUILD)/test/unit/%.o $$(call layer_objs,$$(call test_module,%))
	@mkdir -p $(dir $@)
	$(CC) $(SANFLAGS) -o $@ $^ -lcmocka $(LDLIBS)

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

integration: $(BUILD)/hoardfs
	HOARDFS_BIN=$(CURDIR)/$(BUILD)/hoardfs HOARDFS_SANITIZE=$(SANITIZE) \
		$(PYTHON) -m pytest -q test/integration

# What CI and a newcomer run: dependencies first, so that pkg-config flags
# are read by a fresh make that can see the installed packages.
check: unit integration

test: deps
	@sh scripts/gates.sh $(MAKE)

# The unit and integration suites again, built with ASan and UBSan.  Any
# report fails the gate: UBSan halts on its first error, and every report
# also goes to a log file, so that one from a daemonized hoardfs (whose
# stderr is /dev/null) or from LeakSanitizer at its exit is seen too.
SAN_DIR := build-address-undefined
SAN_LOG := $(CURDIR)/$(SAN_DIR)/sanitizer-report
# test/lsan.supp lists the leaks at exit known to be benign.
SAN_ENV := \
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:log_path=$(SAN_LOG) \
	LSAN_OPTIONS=suppressions=$(CURDIR)/test/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(SAN_LOG)

check-sanitize:
	@mkdir -p $(SAN_DIR) && rm -f $(SAN_LOG).*
	@rc=0; $(SAN_ENV) $(MAKE) --no-print-directory SANITIZE=address,undefined \
		check || rc=$$?; \
	for f in $(SAN_LOG).*; do \
		[ -e "$$f" ] || continue; \
		echo "== sanitizer report $$f"; cat "$$f"; rc=1; \
	done; exit $$rc

# libFuzzer targets (test/fuzz/fuzz_<target>.c), built with clang into
# build-fuzz/ with the modules they reach, and run FUZZ_SECONDS each from
# the committed seeds in test/fuzz/<target>/.  New inputs go to
# build-fuzz/corpus/, a crashing input to build-fuzz/crash/.
FUZZ_BUILD := build-fuzz
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 20
FUZZ_TARGETS := listxml cli_parse passwd
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -D_FILE_OFFSET_BITS=64 -DFUSE_USE_VERSION=314 \
	-D_GNU_SOURCE -DHOARDFS_VERSION='"$(VERSION)"' $(WARN) -Iinclude -Isrc \
	$(PKG_CFLAGS) -O1 -g -pthread -MMD -MP $(FUZZ_SAN)
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(sort \
	src/cli/options.c src/cli/creds.c $(wildcard src/client/*.c) \
	$(wildcard src/util/*.c)))
FUZZ_BIN := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_BUILD)/libfuzz.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/test/fuzz/fuzz_%.o $(FUZZ_BUILD)/libfuzz.a
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: $(FUZZ_BIN)
	@set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crash; \
		log=$(FUZZ_BUILD)/fuzz_$$t.log; \
		if $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
			-timeout=10 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_BUILD)/crash/$$t- \
			$(FUZZ_BUILD)/corpus/$$t test/fuzz/$$t >$$log 2>&1; then \
			echo "== fuzz $$t: $$(sed -n 's/^stat::number_of_executed_units: *//p' $$log) runs in $(FUZZ_SECONDS)s, no crash"; \
		else \
			tail -60 $$log; echo "== fuzz $$t: FAILED, input in $(FUZZ_BUILD)/crash/"; \
			exit 1; \
		fi; \
	done

demo: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh $(BUILD)/hoardfs

# hoardfs against s3fs, rclone mount and local disk (docs/BENCHMARKS.md);
# not part of make test.  make bench BENCH_ARGS=--quick for a short run.
bench: deps
	@$(MAKE) --no-print-directory all
	@scripts/bench $(BENCH_ARGS)

LINT_SRC = $(wildcard src/*/*.c src/*/*.h include/hoardfs/*.h test/unit/*.c \
	test/fuzz/*.c test/fuzz/*.h)
LINT_SH = scripts/install-deps.sh scripts/demo.sh scripts/gates.sh \
	scripts/mount.fuse.hoardfs scripts/modelarts/hoardfs-run.sh

lint: deps
	clang-format --dry-run --Werror $(LINT_SRC)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--std=c11 --inline-suppr -Iinclude -Isrc \
		--suppress=missingIncludeSystem src test/unit test/fuzz
	shellcheck -s sh $(LINT_SH)

format:
	clang-format -i $(LINT_SRC)

# The helper runs hoardfs by absolute path: mount(8) gives helpers no PATH.
install: $(BUILD)/hoardfs
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BUILD)/hoardfs $(DESTDIR)$(BINDIR)/hoardfs
	sed 's|@BINDIR@|$(BINDIR)|g' scripts/mount.fuse.hoardfs \
		>$(DESTDIR)$(SBINDIR)/mount.fuse.hoardfs.tmp
	chmod 0755 $(DESTDIR)$(SBINDIR)/mount.fuse.hoardfs.tmp
	mv -f $(DESTDIR)$(SBINDIR)/mount.fuse.hoardfs.tmp \
		$(DESTDIR)$(SBINDIR)/mount.fuse.hoardfs
	install -m 0644 man/hoardfs.1 $(DESTDIR)$(MANDIR)/man1/hoardfs.1
	install -m 0644 man/mount.fuse.hoardfs.8 \
		$(DESTDIR)$(MANDIR)/man8/mount.fuse.hoardfs.8

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/hoardfs \
		$(DESTDIR)$(SBINDIR)/mount.fuse.hoardfs \
		$(DESTDIR)$(MANDIR)/man1/hoardfs.1 \
		$(DESTDIR)$(MANDIR)/man8/mount.fuse.hoardfs.8

clean:
	rm -rf build build-*

-include $(shell find $(BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
