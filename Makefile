# SPDX-License-Identifier: MIT
# hoardfs build.  `make` builds build/hoardfs; `make test` installs what is
# missing, builds, and runs the unit and integration suites; `make demo`
# runs the Fashion-MNIST training demo through a real mount.
#
# SANITIZE=address,undefined (or thread) builds into its own directory.

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

.PHONY: all deps unit integration check test demo lint format clean

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
	HOARDFS_BIN=$(CURDIR)/$(BUILD)/hoardfs $(PYTHON) -m pytest -q test/integration

# What CI and a newcomer run: dependencies first, so that pkg-config flags
# are read by a fresh make that can see the installed packages.
check: unit integration

test: deps
	@$(MAKE) --no-print-directory check

demo: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh $(BUILD)/hoardfs

LINT_SRC = $(wildcard src/*/*.c src/*/*.h include/hoardfs/*.h test/unit/*.c)

lint: deps
	clang-format --dry-run --Werror $(LINT_SRC)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--std=c11 --inline-suppr -Iinclude -Isrc \
		--suppress=missingIncludeSystem src test/unit

format:
	clang-format -i $(LINT_SRC)

clean:
	rm -rf build build-*

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
