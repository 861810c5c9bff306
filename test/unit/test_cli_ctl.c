// SPDX-License-Identifier: MIT
/* Unit tests for src/cli/ctl.c: the commands' argument parsing (each
 * usage error names its option), shard selection and byte formatting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/ctl.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static char err[512];

static void test_commands(void **state)
{
	(void)state;
	assert_true(ctl_is_command("warm"));
	assert_true(ctl_is_command("status"));
	assert_true(ctl_is_command("evict"));
	assert_false(ctl_is_command("obs://bkt"));
	assert_false(ctl_is_command("-f"));
	assert_false(ctl_is_command("warmer"));
}

static void test_warm_args(void **state)
{
	char *a1[] = {"warm",	"/mnt/a",      "--jobs",      "4",
		      "/mnt/b", "--shard=2/5", "--background"};
	char *a2[] = {"warm", "-j", "1", "--", "--odd-name"};
	char *a3[] = {"warm", "/mnt"};
	struct ctl_args a;

	(void)state;
	assert_int_equal(ctl_parse(ARGC(a1), a1, &a, err, sizeof(err)), 0);
	assert_int_equal(a.cmd, CTL_CMD_WARM);
	assert_int_equal(a.npaths, 2);
	assert_string_equal(a.paths[0], "/mnt/a");
	assert_string_equal(a.paths[1], "/mnt/b");
	assert_int_equal(a.jobs, 4);
	assert_int_equal(a.shard_k, 2);
	assert_int_equal(a.shard_n, 5);
	assert_true(a.background);
	ctl_args_free(&a);
	assert_int_equal(ctl_parse(ARGC(a2), a2, &a, err, sizeof(err)), 0);
	assert_int_equal(a.jobs, 1);
	assert_int_equal(a.npaths, 1);
	assert_string_equal(a.paths[0], "--odd-name");
	ctl_args_free(&a);
	assert_int_equal(ctl_parse(ARGC(a3), a3, &a, err, sizeof(err)), 0);
	assert_int_equal(a.jobs, CTL_DEFAULT_JOBS);
	assert_int_equal(a.shard_n, 0);
	assert_false(a.background);
	ctl_args_free(&a);
}

/* Each bad command line fails with -EINVAL and a message naming @named. */
static void expect_usage_error(int argc, char **argv, const char *named)
{
	struct ctl_args a;

	assert_int_equal(ctl_parse(argc, argv, &a, err, sizeof(err)), -EINVAL);
	if (!strstr(err, named))
		fail_msg("'%s' does not name '%s'", err, named);
	ctl_args_free(&a);
}

static void test_usage_errors(void **state)
{
	char *b1[] = {"warm"};
	char *b2[] = {"warm", "/m", "--jobs", "0"};
	char *b3[] = {"warm", "/m", "--jobs", "33"};
	char *b4[] = {"warm", "/m", "--jobs"};
	char *b5[] = {"warm", "/m", "--shard", "4/4"};
	char *b6[] = {"warm", "/m", "--shard", "1"};
	char *b7[] = {"warm", "/m", "--shard=-1/3"};
	char *b8[] = {"warm", "/m", "--json"};
	char *b9[] = {"warm", "/m", "--background=yes"};
	char *b10[] = {"status"};
	char *b11[] = {"status", "/a", "/b"};
	char *b12[] = {"status", "/m", "--all"};
	char *b13[] = {"evict"};
	char *b14[] = {"evict", "--all"};
	char *b15[] = {"evict", "--all", "/a", "/b"};
	char *b16[] = {"evict", "/m", "-x"};
	char *b17[] = {"warm", "/m", "--jobs", "4x"};

	(void)state;
	expect_usage_error(ARGC(b1), b1, "PATH");
	expect_usage_error(ARGC(b2), b2, "--jobs");
	expect_usage_error(ARGC(b3), b3, "--jobs");
	expect_usage_error(ARGC(b4), b4, "--jobs");
	expect_usage_error(ARGC(b5), b5, "--shard");
	expect_usage_error(ARGC(b6), b6, "--shard");
	expect_usage_error(ARGC(b7), b7, "--shard");
	expect_usage_error(ARGC(b8), b8, "--json");
	expect_usage_error(ARGC(b9), b9, "--background");
	expect_usage_error(ARGC(b10), b10, "MOUNTPOINT");
	expect_usage_error(ARGC(b11), b11, "MOUNTPOINT");
	expect_usage_error(ARGC(b12), b12, "--all");
	expect_usage_error(ARGC(b13), b13, "PATH");
	expect_usage_error(ARGC(b14), b14, "--all");
	expect_usage_error(ARGC(b15), b15, "--all");
	expect_usage_error(ARGC(b16), b16, "-x");
	expect_usage_error(ARGC(b17), b17, "--jobs");
}

static void test_help(void **state)
{
	char *h1[] = {"warm", "--help"};
	char *h2[] = {"evict", "-h"};
	struct ctl_args a;

	(void)state;
	/* --help wins even without the required operands. */
	assert_int_equal(ctl_parse(ARGC(h1), h1, &a, err, sizeof(err)), 0);
	assert_true(a.help);
	ctl_args_free(&a);
	assert_int_equal(ctl_parse(ARGC(h2), h2, &a, err, sizeof(err)), 0);
	assert_true(a.help);
	ctl_args_free(&a);
	assert_non_null(strstr(ctl_usage(CTL_CMD_WARM), "--shard K/N"));
	assert_non_null(strstr(ctl_usage(CTL_CMD_STATUS), "--json"));
	assert_non_null(strstr(ctl_usage(CTL_CMD_EVICT), "--all"));
}

static void test_shard_parse(void **state)
{
	unsigned k, n;

	(void)state;
	assert_int_equal(ctl_shard_parse("0/1", &k, &n), 0);
	assert_int_equal(k, 0);
	assert_int_equal(n, 1);
	assert_int_equal(ctl_shard_parse("7/8", &k, &n), 0);
	assert_int_equal(k, 7);
	assert_int_equal(n, 8);
	assert_int_equal(ctl_shard_parse("8/8", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("0/0", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("1", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("/3", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("1/", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("+1/3", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("1/3/4", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse("1/2000000", &k, &n), -EINVAL);
	assert_int_equal(ctl_shard_parse(" 1/3", &k, &n), -EINVAL);
}

static void test_key_hash_is_fnv1a64(void **state)
{
	(void)state;
	/* Published FNV-1a 64 test vectors: the hash is part of the
	 * interface (documented), so nodes of different builds agree. */
	assert_true(ctl_key_hash("") == 0xcbf29ce484222325ull);
	assert_true(ctl_key_hash("a") == 0xaf63dc4c8601ec8cull);
	assert_true(ctl_key_hash("foobar") == 0x85944171f73967e8ull);
}

/* Every key in exactly one shard, for several N, and shards of about
 * equal size. */
static void test_shards_partition(void **state)
{
	static const unsigned ns[] = {1, 2, 3, 7, 16};
	char key[64];

	(void)state;
	for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		unsigned n = ns[t], count[16] = {0};

		for (int i = 0; i < 5000; i++) {
			unsigned hits = 0;

			snprintf(key, sizeof(key), "train/c%03d/img_%05d.jpg",
				 i % 100, i);
			for (unsigned k = 0; k < n; k++) {
				if (ctl_shard_pick(key, k, n)) {
					hits++;
					count[k]++;
				}
			}
			assert_int_equal(hits, 1);
		}
		for (unsigned k = 0; k < n; k++) {
			/* 5000 / n each, within 20% */
			assert_true(count[k] * n * 10 > 5000 * 8);
			assert_true(count[k] * n * 10 < 5000 * 12);
		}
	}
	/* No sharding: every key. */
	assert_true(ctl_shard_pick("x", 0, 0));
}

static void test_format_bytes(void **state)
{
	char b[32];

	(void)state;
	ctl_format_bytes(0, b, sizeof(b));
	assert_string_equal(b, "0 B");
	ctl_format_bytes(1023, b, sizeof(b));
	assert_string_equal(b, "1023 B");
	ctl_format_bytes(1536, b, sizeof(b));
	assert_string_equal(b, "1.5 KiB");
	ctl_format_bytes(40ull << 20, b, sizeof(b));
	assert_string_equal(b, "40.0 MiB");
	ctl_format_bytes(3ull << 40, b, sizeof(b));
	assert_string_equal(b, "3.0 TiB");
	ctl_format_bytes(UINT64_MAX, b, sizeof(b));
	assert_string_equal(b, "16384.0 PiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_warm_args),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_shard_parse),
		cmocka_unit_test(test_key_hash_is_fnv1a64),
		cmocka_unit_test(test_shards_partition),
		cmocka_unit_test(test_format_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
