/* SPDX-License-Identifier: MIT */
/*
 * A set of byte ranges of one object, kept sorted and coalesced: adding
 * [0,10) and [10,20) leaves the single extent [0,20).  Used in memory by
 * the scheduler (what is on disk now) and to load and store the extents
 * recorded in the index.  Not thread-safe: the owner locks.
 */
#ifndef HOARDFS_EXTENT_H
#define HOARDFS_EXTENT_H

#include <stddef.h>
#include <stdint.h>

/* One half-open byte range [off, end) of an object. */
struct extent {
	uint64_t off; /* first byte */
	uint64_t end; /* one past the last byte; end > off */
};

/*
 * Invariant: v[0..n) sorted by off, pairwise disjoint and not touching
 * (v[i].end < v[i+1].off), every extent non-empty.
 */
struct extent_set {
	struct extent *v; /* owned array of n extents, capacity cap */
	size_t n;	  /* extents in use */
	size_t cap;	  /* allocated slots */
};

/* extent_set_init - an empty set; allocates nothing. */
void extent_set_init(struct extent_set *s);

/* extent_set_clear - free the array and leave an empty set. */
void extent_set_clear(struct extent_set *s);

/*
 * extent_set_add - add [off, end), merging with touching or overlapping
 * extents.  An empty range (end <= off) is a no-op.
 * Returns 0, or -ENOMEM (the set is unchanged).
 */
int extent_set_add(struct extent_set *s, uint64_t off, uint64_t end)
	__attribute__((warn_unused_result));

/* extent_set_contains - nonzero when every byte of [off, end) is in @s.
 * An empty range is always contained. */
int extent_set_contains(const struct extent_set *s, uint64_t off, uint64_t end);

/*
 * extent_set_first_gap - the first byte at or after @off, and before @end,
 * that is not in @s; returns @end when [off, end) is fully contained.
 */
uint64_t extent_set_first_gap(const struct extent_set *s, uint64_t off,
			      uint64_t end);

/* extent_set_bytes - the total number of bytes covered. */
uint64_t extent_set_bytes(const struct extent_set *s);

#endif
