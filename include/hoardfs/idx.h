/* SPDX-License-Identifier: MIT */
/*
 * The cache index: a SQLite database (WAL) in the cache dir that records,
 * for every object version held in the store, its bucket, key, ETag, size,
 * mtime and last access, and the coalesced byte extents of it that are on
 * disk.  An extent is written here only after its bytes were made durable
 * (the caller fdatasync()s first), so after any crash the index never
 * claims bytes the data file lacks.  The schema version lives in
 * PRAGMA user_version.
 *
 * Thread safety: every function may be called from any thread; one
 * internal mutex serializes them on a single connection.  All block on
 * disk I/O.
 *
 * Errors: SQLite failures are logged with SQLite's message and returned as
 * -EIO (also for a corrupt database), except -ENOSPC (disk full), -ENOMEM,
 * and -EBUSY (another process held the lock past the busy timeout).
 */
#ifndef HOARDFS_IDX_H
#define HOARDFS_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "hoardfs/extent.h"

#define IDX_ETAG_MAX 128 /* bytes for an ETag with its quotes, plus NUL */

struct idx;

/* One object version as the index records it. */
struct idx_object {
	int64_t id;		 /* row id, stable for this (bucket, key) */
	char etag[IDX_ETAG_MAX]; /* as the server sent it, quotes included */
	uint64_t size;		 /* object size in bytes */
	int64_t mtime_sec;	 /* Last-Modified, seconds since the epoch */
	int64_t atime_sec; /* last access, seconds since the epoch (LRU) */
};

/* One extent to record: bytes [off, end) of object @object_id. */
struct idx_extent_rec {
	int64_t object_id; /* idx_object.id of the object */
	uint64_t off;	   /* first byte */
	uint64_t end;	   /* one past the last byte; <= INT64_MAX */
};

/*
 * idx_open - open or create the database at @db_path (mode 0600), set WAL
 * and synchronous=NORMAL, and create or migrate the schema.
 * Returns 0 with *@out owning the index, -EIO for a database SQLite cannot
 * open or that is corrupt, -EPROTO for a schema newer than this build,
 * -ENOMEM, -EBUSY, or -errno from open(2)/chmod(2) of the file (-EACCES,
 * -EISDIR, ...).
 */
int idx_open(const char *db_path, struct idx **out)
	__attribute__((warn_unused_result));

/* idx_close - close and free @x (NULL is a no-op). */
void idx_close(struct idx *x);

/*
 * idx_object_lookup - the recorded version of (@bucket, @key).
 * Returns 0 and fills *@out, -ENOENT when none is recorded, -EIO.
 */
int idx_object_lookup(struct idx *x, const char *bucket, const char *key,
		      struct idx_object *out)
	__attribute__((warn_unused_result));

/*
 * idx_object_set_version - make (@etag, @size_bytes, @mtime_sec) the
 * recorded version of (@bucket, @key), creating the row if needed.  If a
 * different ETag or size was recorded, its extents are deleted in the same
 * transaction and its ETag is copied to @old_etag (IDX_ETAG_MAX bytes) so
 * the caller can remove the old data file; otherwise @old_etag is "".
 * The row's last access is set to now.  Fills *@out with the new row.
 * @out and @old_etag may be NULL.
 * Returns 0, -EINVAL for an ETag longer than IDX_ETAG_MAX - 1 or a size
 * over INT64_MAX, -EIO.
 */
int idx_object_set_version(struct idx *x, const char *bucket, const char *key,
			   const char *etag, uint64_t size_bytes,
			   int64_t mtime_sec, struct idx_object *out,
			   char *old_etag) __attribute__((warn_unused_result));

/*
 * idx_extents_load - add every recorded extent of @object_id to @set.
 * Returns 0, -ENOMEM or -EIO.
 */
int idx_extents_load(struct idx *x, int64_t object_id, struct extent_set *set)
	__attribute__((warn_unused_result));

/*
 * idx_extents_commit - group commit: in one transaction, record the @n
 * extents in @v (each merged with the touching or overlapping extents of
 * its object, so the table stays coalesced) and set the last access of
 * every object named to @atime_sec.  Extents of objects no longer in the
 * index are ignored.  An empty record (off == end) records no bytes: it
 * only touches its object, which is how opens update the LRU order.
 * Returns 0, or -EINVAL (a record with off > end or end > INT64_MAX),
 * -ENOMEM or -EIO, and then nothing is recorded.
 */
int idx_extents_commit(struct idx *x, const struct idx_extent_rec *v, size_t n,
		       int64_t atime_sec) __attribute__((warn_unused_result));

/*
 * idx_object_remove - delete @object_id and its extents.
 * Returns 0 (also when absent) or -EIO.
 */
int idx_object_remove(struct idx *x, int64_t object_id);

/*
 * idx_extents_drop - forget every extent of @object_id (its data file was
 * found missing or damaged).  Returns 0 or -EIO.
 */
int idx_extents_drop(struct idx *x, int64_t object_id)
	__attribute__((warn_unused_result));

/* One object row with its cached bytes, as the page functions return it. */
struct idx_entry {
	int64_t id;		 /* row id */
	char *bucket;		 /* owned */
	char *key;		 /* owned */
	char etag[IDX_ETAG_MAX]; /* quoted, as sent */
	uint64_t size;		 /* object size in bytes */
	int64_t atime_sec;	 /* last access */
	uint64_t cached_bytes;	 /* sum of its extents */
};

/*
 * idx_page_lru - up to @max objects in least-recently-used order, strictly
 * after the cursor (@after_atime, @after_id) (start with INT64_MIN, 0),
 * into @out; *@n gets how many.  Each call is its own short read, so
 * paging does not hold the index for long.  Free the strings with
 * idx_entries_clear().  Returns 0, -ENOMEM or -EIO.
 */
int idx_page_lru(struct idx *x, int64_t after_atime, int64_t after_id,
		 size_t max, struct idx_entry *out, size_t *n)
	__attribute__((warn_unused_result));

/* idx_page_by_id - the same in id order, after @after_id (start with 0). */
int idx_page_by_id(struct idx *x, int64_t after_id, size_t max,
		   struct idx_entry *out, size_t *n)
	__attribute__((warn_unused_result));

/* idx_entries_clear - free the strings of @n entries. */
void idx_entries_clear(struct idx_entry *v, size_t n);

/*
 * idx_listing_put - store the serialized listing @body (@len bytes) of
 * directory @prefix of @bucket, fetched at @fetched_sec (wall clock),
 * replacing an older one.  The body's format is the caller's.
 * Returns 0, -EFBIG for a body over 2 GiB, -ENOSPC or -EIO.
 */
int idx_listing_put(struct idx *x, const char *bucket, const char *prefix,
		    int64_t fetched_sec, const void *body, size_t len)
	__attribute__((warn_unused_result));

/*
 * idx_listing_get - the stored listing of @prefix in @bucket: its fetch
 * time into *@fetched_sec and a malloc'd copy of its body into *@body
 * (*@len bytes), which the caller frees.  Returns 0, -ENOENT when none is
 * stored, -ENOMEM or -EIO.
 */
int idx_listing_get(struct idx *x, const char *bucket, const char *prefix,
		    int64_t *fetched_sec, void **body, size_t *len)
	__attribute__((warn_unused_result));

/*
 * idx_stats - the number of objects recorded and the sum of their extent
 * bytes.  Returns 0 or -EIO.
 */
int idx_stats(struct idx *x, uint64_t *objects, uint64_t *cached_bytes)
	__attribute__((warn_unused_result));

#endif
