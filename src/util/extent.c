// SPDX-License-Identifier: MIT
/*
 * Sorted, coalesced sets of byte ranges (see extent.h).  Lookups are binary
 * searches; adding a range replaces every extent it overlaps or touches
 * with one merged extent, so the array never holds two extents that could
 * be one.  The set does no locking and no I/O.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoardfs/extent.h"

/* First capacity: enough for a typical object read in a few pieces. */
#define EXTENT_SET_MIN_CAP 8

#ifndef NDEBUG
/*
 * extent_set_ok - nonzero when @s keeps the invariant written above
 * struct extent_set.  O(n); called only inside assert().
 */
static int extent_set_ok(const struct extent_set *s)
{
	if (s->n > s->cap || (s->cap && !s->v) || (!s->cap && s->v))
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].end <= s->v[i].off)
			return 0;
		if (i + 1 < s->n && s->v[i].end >= s->v[i + 1].off)
			return 0;
	}
	return 1;
}
#endif

/*
 * extent_set_first_end_ge - the index of the first extent whose end is
 * >= @pos, or s->n.  Because the extents are disjoint and sorted by off,
 * they are sorted by end too, so a binary search works.
 */
static size_t extent_set_first_end_ge(const struct extent_set *s, uint64_t pos)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].end >= pos)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * extent_set_first_off_gt - the index of the first extent whose off is
 * > @pos, or s->n.
 */
static size_t extent_set_first_off_gt(const struct extent_set *s, uint64_t pos)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].off > pos)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * extent_set_first_end_gt - the index of the first extent whose end is
 * > @pos (the only extent that can hold byte @pos), or s->n.
 */
static size_t extent_set_first_end_gt(const struct extent_set *s, uint64_t pos)
{
	if (pos == UINT64_MAX)
		return s->n; /* no end can exceed it */
	return extent_set_first_end_ge(s, pos + 1);
}

/* extent_set_grow - make room for one more extent; -ENOMEM leaves @s as is */
static int extent_set_grow(struct extent_set *s)
{
	size_t cap;
	struct extent *v;

	if (s->n < s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : EXTENT_SET_MIN_CAP;
	if (cap < s->cap || cap > SIZE_MAX / sizeof(*v))
		return -ENOMEM;
	v = realloc(s->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->v = v;
	s->cap = cap;
	return 0;
}

void extent_set_init(struct extent_set *s)
{
	s->v = NULL;
	s->n = 0;
	s->cap = 0;
}

void extent_set_clear(struct extent_set *s)
{
	free(s->v);
	extent_set_init(s);
}

int extent_set_add(struct extent_set *s, uint64_t off, uint64_t end)
{
	size_t lo, hi;
	int rc;

	assert(extent_set_ok(s));
	if (end <= off)
		return 0;
	/* [lo, hi) are the extents that overlap or touch [off, end). */
	lo = extent_set_first_end_ge(s, off);
	hi = extent_set_first_off_gt(s, end);
	assert(lo <= hi);
	if (lo == hi) {
		rc = extent_set_grow(s);
		if (rc)
			return rc;
		memmove(&s->v[lo + 1], &s->v[lo],
			(s->n - lo) * sizeof(s->v[0]));
		s->v[lo].off = off;
		s->v[lo].end = end;
		s->n++;
	} else {
		if (s->v[lo].off < off)
			off = s->v[lo].off;
		if (s->v[hi - 1].end > end)
			end = s->v[hi - 1].end;
		s->v[lo].off = off;
		s->v[lo].end = end;
		memmove(&s->v[lo + 1], &s->v[hi],
			(s->n - hi) * sizeof(s->v[0]));
		s->n -= hi - lo - 1;
	}
	assert(extent_set_ok(s));
	return 0;
}

int extent_set_contains(const struct extent_set *s, uint64_t off, uint64_t end)
{
	size_t i;

	if (end <= off)
		return 1;
	i = extent_set_first_end_gt(s, off);
	return i < s->n && s->v[i].off <= off && s->v[i].end >= end;
}

uint64_t extent_set_first_gap(const struct extent_set *s, uint64_t off,
			      uint64_t end)
{
	size_t i;

	if (off >= end)
		return end;
	i = extent_set_first_end_gt(s, off);
	if (i == s->n || s->v[i].off > off)
		return off;
	/* v[i] holds off; the byte at v[i].end is a gap (no touching). */
	return s->v[i].end < end ? s->v[i].end : end;
}

uint64_t extent_set_bytes(const struct extent_set *s)
{
	uint64_t total = 0;

	for (size_t i = 0; i < s->n; i++)
		total += s->v[i].end - s->v[i].off;
	return total;
}
