/* SPDX-License-Identifier: MIT */
/*
 * The fetch scheduler: turns "this object version is open" into parallel
 * ranged GETs that fill its cache data file, and lets readers wait for just
 * the bytes they need.  Objects are split into parts of part_size bytes;
 * each part is fetched at most once at a time however many readers want it
 * (single flight), parts a reader waits for go before read-ahead parts, and
 * a part is recorded in the index only after its bytes are durable.
 *
 * Thread safety: every function may be called from any thread.  Blocking
 * is noted per function.
 */
#ifndef HOARDFS_SCHED_H
#define HOARDFS_SCHED_H

#include <stdint.h>
#include <sys/types.h>

#include "hoardfs/client.h"
#include "hoardfs/idx.h"
#include "hoardfs/store.h"

struct sched_config {
	uint64_t part_size;	    /* bytes per ranged GET, > 0 */
	unsigned workers;	    /* GETs in flight at once, >= 1 */
	uint64_t cache_limit_bytes; /* the cache's own bytes at most; 0 for
				     * no limit but the free space below */
	uint64_t min_free_bytes; /* free space kept on the cache filesystem */
	int verify_md5; /* after a full fetch, check objects whose ETag is a
			 * plain MD5 (single-part uploads) against it */
};

/* Counters since start, for status output and tests. */
struct sched_stats {
	uint64_t parts_fetched; /* ranged GETs that completed */
	uint64_t bytes_fetched; /* bytes written from the store */
	uint64_t
		fetch_errors; /* parts that failed after the client's retries */
	uint64_t bytes_served_cached;  /* read bytes whose parts were cached
					* when the read arrived */
	uint64_t bytes_served_fetched; /* read bytes that waited for a GET */
	uint64_t bytes_served_direct;  /* read bytes the cache could not hold,
					* fetched for the read alone */
	uint64_t evictions;	       /* objects evicted */
	uint64_t bytes_evicted;	       /* their cached bytes */
	uint64_t verify_failures; /* objects whose bytes did not match their
				   * MD5 ETag */
	uint64_t cached_bytes;	  /* bytes in the cache now */
};

struct sched;
struct sched_obj;

/*
 * sched_new - start the worker and commit threads.  @client, @store and
 * @idx are borrowed and must outlive the scheduler; @bucket is copied.
 * Returns 0 with *@out owning the scheduler, -EINVAL for a zero part size
 * or worker count, -ENOMEM, or -EAGAIN when a thread cannot start.
 */
int sched_new(const struct sched_config *cfg, const char *bucket,
	      struct client *client, struct store *store, struct idx *idx,
	      struct sched **out) __attribute__((warn_unused_result));

/*
 * sched_free - stop: transfers under way are cancelled, parts already on
 * disk are committed to the index, threads are joined.  Every sched_obj
 * must have been put.  NULL is a no-op.  Blocks until the threads end.
 */
void sched_free(struct sched *s);

/*
 * sched_obj_open - get the cache state of object @key at version @etag
 * (@size_bytes, @mtime_sec as listed).  The first open of a version
 * records it in the index (dropping the extents of an older version and
 * its data file), opens its data file, and queues a fetch of every part
 * not yet on disk.  Later opens share the same state.
 * When the cache disk is full or failing, the object is opened in bypass
 * mode instead of failing: every wait answers -ENOSPC and reads go to the
 * store.  A data file that disagrees with the index (missing, or of
 * another size) has its extents dropped and is fetched again.
 * Returns 0 with *@out holding one reference (drop with sched_obj_put()),
 * or -ENOMEM.  Blocks on the index and the local filesystem, never on the
 * network.
 */
int sched_obj_open(struct sched *s, const char *key, const char *etag,
		   uint64_t size_bytes, int64_t mtime_sec,
		   struct sched_obj **out) __attribute__((warn_unused_result));

/* sched_obj_put - drop a reference; NULL is a no-op.  Parts still queued
 * keep being fetched after the last reference is gone. */
void sched_obj_put(struct sched_obj *o);

/*
 * sched_obj_wait - block until bytes [@off, @off + @len) of the object are
 * in its data file (clamped to the object size), moving their parts ahead
 * of read-ahead.  Returns 0, or the errno of a failed fetch of one of them
 * (-EIO, -ESTALE when the object changed on the server, -ENOENT, -EACCES,
 * -ECANCELED at shutdown).  -ENOSPC means the cache cannot hold these
 * bytes now (full disk, or every cached object is in use): read them with
 * sched_obj_read_direct().  A failed part is tried again by the next wait
 * that needs it.  Never blocks when the range is cached.
 */
int sched_obj_wait(struct sched_obj *o, uint64_t off, uint64_t len)
	__attribute__((warn_unused_result));

/*
 * sched_obj_read_direct - read [@off, @off + @len) of the object straight
 * from the store into @buf, bypassing the cache, for when
 * sched_obj_wait() returned -ENOSPC.  Returns the bytes read (short at the
 * end of the object), or -errno as client_get() does.  Blocks on the
 * network.
 */
ssize_t sched_obj_read_direct(struct sched_obj *o, uint64_t off, size_t len,
			      void *buf) __attribute__((warn_unused_result));

/*
 * sched_obj_wait_complete - block until every part of the object is in its
 * data file (hoardfs warm).  Parts not yet on disk are left to read-ahead,
 * which runs after every part a reader waits for, so warming never
 * delays a reader; only parts that read-ahead skipped or that failed
 * before are demanded.  Single flight with readers: a part being fetched
 * for anyone is waited for, not fetched again.  Returns 0 (at once when
 * the object is complete), the errno of a failed part as sched_obj_wait()
 * does (-EIO, -ESTALE, -ENOENT, -EACCES, -ECANCELED at shutdown), or
 * -ENOSPC when the cache cannot hold the object now.  Blocks on the
 * network; does not count as bytes served.
 */
int sched_obj_wait_complete(struct sched_obj *o)
	__attribute__((warn_unused_result));

/* sched_obj_fd - the data file's fd, valid while a reference is held. */
int sched_obj_fd(const struct sched_obj *o);

/*
 * sched_cached_bytes - how many bytes of @key at version @etag are on disk,
 * whether the object is open or not, into *@bytes (0 when that version is
 * not cached), and whether a fetch of it is under way into *@fetching.
 * Returns 0, or -EIO from the index.  Blocks on the index.
 */
int sched_cached_bytes(struct sched *s, const char *key, const char *etag,
		       uint64_t *bytes, int *fetching)
	__attribute__((warn_unused_result));

/*
 * sched_evict_key - drop the cached bytes of @key (the version the index
 * holds): its index row and its data file.  Refused while the object is
 * open, warmed, or has parts queued or being fetched.  Returns 0 with the
 * bytes dropped in *@bytes (0 when nothing was cached), -EBUSY, or -EIO
 * from the index.  Blocks on the index and the local filesystem.
 */
int sched_evict_key(struct sched *s, const char *key, uint64_t *bytes)
	__attribute__((warn_unused_result));

/*
 * sched_evict_all - sched_evict_key() for every object of the scheduler's
 * bucket in the index.  *@bytes and *@objects get what was dropped (objects
 * with cached bytes only), *@busy how many were in use and kept.
 * Returns 0 or -EIO.  Blocks; holds no lock between objects.
 */
int sched_evict_all(struct sched *s, uint64_t *bytes, uint64_t *objects,
		    uint64_t *busy) __attribute__((warn_unused_result));

/* sched_index_objects - object versions the cache index records (every
 * bucket of the cache dir).  Returns 0 or -EIO.  Blocks on the index. */
int sched_index_objects(struct sched *s, uint64_t *objects)
	__attribute__((warn_unused_result));

/* sched_stats_get - a consistent copy of the counters. */
void sched_stats_get(struct sched *s, struct sched_stats *out);

#endif
