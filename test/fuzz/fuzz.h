/* SPDX-License-Identifier: MIT */
/*
 * Shared by the libFuzzer targets in this directory: the two entry points
 * libFuzzer calls (declared, since -Wmissing-prototypes is on) and a check
 * that aborts, so that a broken invariant is a crash the fuzzer reports
 * with its input, in release builds too (assert() may be compiled out).
 */
#ifndef HOARDFS_FUZZ_H
#define HOARDFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			abort();                                               \
		}                                                              \
	} while (0)

#endif
