// SPDX-License-Identifier: MIT
/* Unit tests for src/util: size and duration parsing, hex and SHA-256. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hoardfs/util.h"

static void test_parse_bytes(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(util_parse_bytes("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(util_parse_bytes("8M", &v), 0);
	assert_int_equal(v, 8u << 20);
	assert_int_equal(util_parse_bytes("8MiB", &v), 0);
	assert_int_equal(v, 8u << 20);
	assert_int_equal(util_parse_bytes("1g", &v), 0);
	assert_int_equal(v, 1u << 30);
	assert_int_equal(util_parse_bytes("", &v), -EINVAL);
	assert_int_equal(util_parse_bytes("-1", &v), -EINVAL);
	assert_int_equal(util_parse_bytes("12Q", &v), -EINVAL);
	assert_int_equal(util_parse_bytes("99999999999999999999", &v), -ERANGE);
	assert_int_equal(util_parse_bytes("17179869184T", &v), -ERANGE);
}

static void test_parse_seconds(void **state)
{
	int64_t v = 0;

	(void)state;
	assert_int_equal(util_parse_seconds("60", &v), 0);
	assert_int_equal(v, 60);
	assert_int_equal(util_parse_seconds("forever", &v), 0);
	assert_int_equal(v, -1);
	assert_int_equal(util_parse_seconds("6O", &v), -EINVAL);
	assert_int_equal(util_parse_seconds("", &v), -EINVAL);
}

static void test_sha256(void **state)
{
	char hex[UTIL_SHA256_HEX_LEN + 1];

	(void)state;
	/* FIPS 180-2 example: SHA-256("abc"). */
	assert_int_equal(util_sha256_hex("abc", 3, hex), 0);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223"
				 "b00361a396177a9cb410ff61f20015ad");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_bytes),
		cmocka_unit_test(test_parse_seconds),
		cmocka_unit_test(test_sha256),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
