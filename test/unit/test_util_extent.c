// SPDX-License-Identifier: MIT
/*
 * Unit tests for src/util/extent.c: coalescing cases written out by hand,
 * the queries, and a long run of random operations checked against a
 * one-byte-per-byte bitmap model.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hoardfs/extent.h"

/* expect_extents - assert that @s holds exactly the @n pairs in @pairs. */
static void expect_extents(const struct extent_set *s, const uint64_t *pairs,
			   size_t n)
{
	assert_int_equal(s->n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(s->v[i].off, pairs[2 * i]);
		assert_int_equal(s->v[i].end, pairs[2 * i + 1]);
	}
}

static void test_empty(void **state)
{
	struct extent_set s;

	(void)state;
	extent_set_init(&s);
	assert_int_equal(s.n, 0);
	assert_int_equal(extent_set_bytes(&s), 0);
	assert_true(extent_set_contains(&s, 5, 5));
	assert_false(extent_set_contains(&s, 0, 1));
	assert_int_equal(extent_set_first_gap(&s, 3, 9), 3);
	assert_int_equal(extent_set_first_gap(&s, 9, 3), 3);
	/* Empty ranges are no-ops and allocate nothing. */
	assert_int_equal(extent_set_add(&s, 10, 10), 0);
	assert_int_equal(extent_set_add(&s, 10, 5), 0);
	assert_int_equal(s.n, 0);
	assert_null(s.v);
	extent_set_clear(&s);
	extent_set_clear(&s); /* twice is fine */
}

static void test_touching(void **state)
{
	struct extent_set s;

	(void)state;
	extent_set_init(&s);
	assert_int_equal(extent_set_add(&s, 0, 10), 0);
	assert_int_equal(extent_set_add(&s, 10, 20), 0);
	expect_extents(&s, (const uint64_t[]){0, 20}, 1);
	/* Touching on the left. */
	assert_int_equal(extent_set_add(&s, 30, 40), 0);
	assert_int_equal(extent_set_add(&s, 25, 30), 0);
	expect_extents(&s, (const uint64_t[]){0, 20, 25, 40}, 2);
	/* Filling the hole exactly joins both neighbours. */
	assert_int_equal(extent_set_add(&s, 20, 25), 0);
	expect_extents(&s, (const uint64_t[]){0, 40}, 1);
	/* A one-byte gap keeps extents apart. */
	assert_int_equal(extent_set_add(&s, 41, 50), 0);
	expect_extents(&s, (const uint64_t[]){0, 40, 41, 50}, 2);
	extent_set_clear(&s);
}

static void test_overlap_contained_spanning(void **state)
{
	struct extent_set s;

	(void)state;
	extent_set_init(&s);
	assert_int_equal(extent_set_add(&s, 100, 200), 0);
	/* Overlap on each side. */
	assert_int_equal(extent_set_add(&s, 50, 150), 0);
	assert_int_equal(extent_set_add(&s, 180, 220), 0);
	expect_extents(&s, (const uint64_t[]){50, 220}, 1);
	/* Contained: no change. */
	assert_int_equal(extent_set_add(&s, 60, 70), 0);
	assert_int_equal(extent_set_add(&s, 50, 220), 0);
	expect_extents(&s, (const uint64_t[]){50, 220}, 1);
	/* Insert before, after and between. */
	assert_int_equal(extent_set_add(&s, 0, 10), 0);
	assert_int_equal(extent_set_add(&s, 300, 310), 0);
	assert_int_equal(extent_set_add(&s, 240, 250), 0);
	expect_extents(
		&s, (const uint64_t[]){0, 10, 50, 220, 240, 250, 300, 310}, 4);
	/* Spanning many: one range swallows the three last extents. */
	assert_int_equal(extent_set_add(&s, 45, 305), 0);
	expect_extents(&s, (const uint64_t[]){0, 10, 45, 310}, 2);
	/* Spanning all, strictly larger on both sides. */
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(
			extent_set_add(&s, 1000 + 3 * i, 1000 + 3 * i + 1), 0);
	assert_int_equal(s.n, 102);
	assert_int_equal(extent_set_add(&s, 5, 2000), 0);
	expect_extents(&s, (const uint64_t[]){0, 2000}, 1);
	extent_set_clear(&s);
}

static void test_queries(void **state)
{
	struct extent_set s;

	(void)state;
	extent_set_init(&s);
	assert_int_equal(extent_set_add(&s, 10, 20), 0);
	assert_int_equal(extent_set_add(&s, 30, 40), 0);
	assert_int_equal(extent_set_bytes(&s), 20);

	assert_true(extent_set_contains(&s, 10, 20));
	assert_true(extent_set_contains(&s, 12, 18));
	assert_true(extent_set_contains(&s, 39, 40));
	assert_false(extent_set_contains(&s, 9, 20));
	assert_false(extent_set_contains(&s, 10, 21));
	assert_false(extent_set_contains(&s, 15, 35));
	assert_false(extent_set_contains(&s, 20, 21));
	assert_false(extent_set_contains(&s, 40, 41));

	assert_int_equal(extent_set_first_gap(&s, 0, 100), 0);
	assert_int_equal(extent_set_first_gap(&s, 10, 100), 20);
	assert_int_equal(extent_set_first_gap(&s, 15, 18), 18);
	assert_int_equal(extent_set_first_gap(&s, 15, 20), 20);
	assert_int_equal(extent_set_first_gap(&s, 20, 100), 20);
	assert_int_equal(extent_set_first_gap(&s, 35, 100), 40);
	assert_int_equal(extent_set_first_gap(&s, 40, 100), 40);
	assert_int_equal(extent_set_first_gap(&s, 50, 100), 50);

	/* Offsets near the top of the 64-bit range. */
	assert_int_equal(extent_set_add(&s, UINT64_MAX - 10, UINT64_MAX), 0);
	assert_true(extent_set_contains(&s, UINT64_MAX - 1, UINT64_MAX));
	assert_int_equal(extent_set_first_gap(&s, UINT64_MAX - 5, UINT64_MAX),
			 UINT64_MAX);
	assert_int_equal(extent_set_first_gap(&s, UINT64_MAX - 11, UINT64_MAX),
			 UINT64_MAX - 11);
	assert_int_equal(extent_set_bytes(&s), 30);
	extent_set_clear(&s);
}

/* Size of the modelled object: small, so random ranges collide often. */
#define MODEL_BYTES 1024
/* Random operations in the model run; each is checked in full. */
#define MODEL_OPS 20000

/* xorshift64 so the sequence is the same under every libc. */
static uint64_t model_rand(uint64_t *seed)
{
	uint64_t x = *seed;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*seed = x;
	return x;
}

/* model_check - the set equals the bitmap, byte for byte, and is valid. */
static void model_check(const struct extent_set *s, const unsigned char *bits)
{
	uint64_t pos = 0, total = 0;

	for (size_t i = 0; i < s->n; i++) {
		assert_true(s->v[i].off < s->v[i].end);
		assert_true(s->v[i].end <= MODEL_BYTES);
		if (i > 0)
			assert_true(s->v[i - 1].end < s->v[i].off);
		for (; pos < s->v[i].off; pos++)
			assert_int_equal(bits[pos], 0);
		for (; pos < s->v[i].end; pos++)
			assert_int_equal(bits[pos], 1);
		total += s->v[i].end - s->v[i].off;
	}
	for (; pos < MODEL_BYTES; pos++)
		assert_int_equal(bits[pos], 0);
	assert_int_equal(extent_set_bytes(s), total);
}

static void test_random_vs_bitmap(void **state)
{
	static unsigned char bits[MODEL_BYTES];
	struct extent_set s;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	(void)state;
	memset(bits, 0, sizeof(bits));
	extent_set_init(&s);
	for (int op = 0; op < MODEL_OPS; op++) {
		uint64_t a = model_rand(&seed) % (MODEL_BYTES + 1);
		/* Mostly short ranges, so the set stays fragmented. */
		uint64_t len = model_rand(&seed) % (op % 50 == 0 ? 400 : 12);
		uint64_t b = a + len > MODEL_BYTES ? MODEL_BYTES : a + len;
		uint64_t want_gap = b;
		int want_in = 1;

		switch (model_rand(&seed) % 4) {
		case 0:
		case 1:
			assert_int_equal(extent_set_add(&s, a, b), 0);
			for (uint64_t i = a; i < b; i++)
				bits[i] = 1;
			break;
		case 2:
			for (uint64_t i = a; i < b; i++)
				want_in &= bits[i];
			assert_int_equal(!!extent_set_contains(&s, a, b),
					 want_in);
			break;
		default:
			for (uint64_t i = a; i < b; i++) {
				if (!bits[i]) {
					want_gap = i;
					break;
				}
			}
			assert_int_equal(extent_set_first_gap(&s, a, b),
					 want_gap);
			break;
		}
		model_check(&s, bits);
		/* Start over now and then so both sparse and dense sets. */
		if (op % 3000 == 2999) {
			extent_set_clear(&s);
			memset(bits, 0, sizeof(bits));
		}
	}
	extent_set_clear(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_touching),
		cmocka_unit_test(test_overlap_contained_spanning),
		cmocka_unit_test(test_queries),
		cmocka_unit_test(test_random_vs_bitmap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
