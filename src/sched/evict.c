// SPDX-License-Identifier: MIT
/*
 * Capacity: keeps the cache under --cache-size and the cache filesystem's
 * free space above --cache-min-free by evicting whole objects in least
 * recently used order (the index's access times, so the order survives
 * restarts).  Objects open or being fetched are never evicted.
 *
 * Watermarks: a pass starts when the cache passes EVICT_HIGH_PERMILLE of
 * its limit (or free space drops under the minimum) and evicts until it is
 * under EVICT_LOW_PERMILLE (and free space is back above the minimum plus
 * a margin), so eviction runs in batches rather than once per part.  A
 * worker about to fetch a part that would not fit kicks a pass and waits
 * for it; if the pass frees nothing usable, the part is not cached
 * (sched.c then serves the reader from the store).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "hoardfs/log.h"
#include "sched/sched_int.h"

#define EVICT_HIGH_PERMILLE 950	 /* start a pass above 95% of the limit */
#define EVICT_LOW_PERMILLE  850	 /* and stop it at 85% */
#define EVICT_PAGE	    64	 /* index rows read per query */
#define EVICT_IDLE_MS	    1000 /* how often an idle evictor looks */
#define EVICT_WAIT_MS	    5000 /* how long a worker waits for a pass */

/* Free bytes on the cache filesystem for unprivileged use; UINT64_MAX
 * when it cannot be read (then only the size limit applies). */
static uint64_t free_bytes(struct sched *s)
{
	struct statvfs st;

	if (statvfs(store_dir(s->store), &st) != 0)
		return UINT64_MAX;
	return (uint64_t)st.f_bavail * st.f_frsize;
}

static uint64_t used_locked(const struct sched *s)
{
	return s->cached_bytes + s->inflight_bytes;
}

/* Whether a pass should start (s->lock held). */
static int over_high_locked(const struct sched *s, uint64_t free)
{
	uint64_t limit = s->cfg.cache_limit_bytes;

	return (limit && used_locked(s) > limit / 1000 * EVICT_HIGH_PERMILLE) ||
	       free < s->cfg.min_free_bytes;
}

/* Whether a pass may stop (s->lock held).  The free-space margin is an
 * eighth of the minimum, at least one part. */
static int under_low_locked(const struct sched *s, uint64_t free)
{
	uint64_t limit = s->cfg.cache_limit_bytes;
	uint64_t margin = s->cfg.min_free_bytes / 8;

	if (margin < s->cfg.part_size)
		margin = s->cfg.part_size;
	if (limit && used_locked(s) > limit / 1000 * EVICT_LOW_PERMILLE)
		return 0;
	return !s->cfg.min_free_bytes || free >= s->cfg.min_free_bytes + margin;
}

/* Evict one object unless it is open or in flight.  Returns 1 when it
 * was evicted. */
static int evict_one(struct sched *s, const struct idx_entry *e)
{
	char name[STORE_NAME_LEN + 1];
	int pinned, rc;

	pthread_mutex_lock(&s->version_lock);
	pthread_mutex_lock(&s->lock);
	pinned = strcmp(e->bucket, s->bucket) == 0 &&
		 sched_table_find_locked(s, e->key) != NULL;
	pthread_mutex_unlock(&s->lock);
	if (pinned) {
		pthread_mutex_unlock(&s->version_lock);
		return 0;
	}
	rc = idx_object_remove(s->idx, e->id);
	if (rc == 0 && store_name(e->bucket, e->key, e->etag, name) == 0)
		(void)store_file_remove(s->store, name);
	pthread_mutex_unlock(&s->version_lock);
	if (rc != 0)
		return 0;
	pthread_mutex_lock(&s->lock);
	s->cached_bytes -= e->cached_bytes < s->cached_bytes ? e->cached_bytes
							     : s->cached_bytes;
	s->stats.evictions++;
	s->stats.bytes_evicted += e->cached_bytes;
	pthread_mutex_unlock(&s->lock);
	log_debug("evicted s3://%s/%s (%llu bytes)", e->bucket, e->key,
		  (unsigned long long)e->cached_bytes);
	return 1;
}

/* One pass: evict in LRU order until under the low watermark or out of
 * candidates.  Runs without s->lock. */
static void evict_pass(struct sched *s)
{
	struct idx_entry v[EVICT_PAGE];
	int64_t at = INT64_MIN, id = 0;
	unsigned evicted = 0;
	uint64_t bytes = 0;
	int done = 0;

	while (!done && !atomic_load(&s->stopping)) {
		size_t n = 0;

		if (idx_page_lru(s->idx, at, id, EVICT_PAGE, v, &n) != 0 ||
		    n == 0)
			break;
		at = v[n - 1].atime_sec;
		id = v[n - 1].id;
		for (size_t i = 0; i < n && !done; i++) {
			uint64_t free = free_bytes(s);

			pthread_mutex_lock(&s->lock);
			done = under_low_locked(s, free);
			pthread_mutex_unlock(&s->lock);
			if (!done && evict_one(s, &v[i])) {
				evicted++;
				bytes += v[i].cached_bytes;
			}
		}
		idx_entries_clear(v, n);
	}
	if (evicted)
		log_info("eviction: %u objects, %llu bytes", evicted,
			 (unsigned long long)bytes);
}

void *sched_evict_main(void *arg)
{
	struct sched *s = arg;
	struct timespec ts;

	if (!s->cfg.cache_limit_bytes && !s->cfg.min_free_bytes)
		return NULL; /* nothing to keep: never evict */
	pthread_mutex_lock(&s->lock);
	while (!atomic_load(&s->stopping)) {
		uint64_t free;
		int go;

		if (!s->evict_wanted) {
			sched_deadline_after(&ts, EVICT_IDLE_MS);
			pthread_cond_timedwait(&s->evict_cond, &s->lock, &ts);
		}
		if (atomic_load(&s->stopping))
			break;
		pthread_mutex_unlock(&s->lock);
		free = free_bytes(s);
		pthread_mutex_lock(&s->lock);
		go = s->evict_wanted || over_high_locked(s, free);
		s->evict_wanted = 0;
		if (!go)
			continue;
		pthread_mutex_unlock(&s->lock);
		evict_pass(s);
		pthread_mutex_lock(&s->lock);
		s->evict_passes++;
		pthread_cond_broadcast(&s->space_cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

void sched_evict_kick_locked(struct sched *s)
{
	s->evict_wanted = 1;
	pthread_cond_signal(&s->evict_cond);
}

/* Whether @bytes more would break a limit (s->lock held).  The statvfs
 * comes first, with the lock dropped, so that the size check and the
 * caller's reservation happen under one hold of the lock: two workers
 * cannot both see the same room. */
static int too_full_locked(struct sched *s, uint64_t bytes)
{
	uint64_t limit = s->cfg.cache_limit_bytes, free = UINT64_MAX;

	if (s->cfg.min_free_bytes) {
		pthread_mutex_unlock(&s->lock);
		free = free_bytes(s);
		pthread_mutex_lock(&s->lock);
	}
	if (limit && used_locked(s) + bytes > limit)
		return 1;
	return s->cfg.min_free_bytes && free < s->cfg.min_free_bytes + bytes;
}

int sched_space_reserve_locked(struct sched *s, uint64_t bytes)
{
	struct timespec ts;
	unsigned pass;

	if (too_full_locked(s, bytes)) {
		if (!s->evictor_started || atomic_load(&s->stopping))
			return -ENOSPC;
		pass = s->evict_passes;
		sched_evict_kick_locked(s);
		sched_deadline_after(&ts, EVICT_WAIT_MS);
		while (s->evict_passes == pass && !atomic_load(&s->stopping))
			if (pthread_cond_timedwait(&s->space_cond, &s->lock,
						   &ts) == ETIMEDOUT)
				break;
		if (too_full_locked(s, bytes))
			return -ENOSPC;
	}
	s->inflight_bytes += bytes;
	return 0;
}

/*
 * Eviction on request (sched_evict_key, sched_evict_all).  An object in the
 * table that no one uses (no open file, no warm) and that has no part
 * queued or being fetched is only held by internal references (commit
 * records, the verify queue): it is retired like a replaced version (its
 * parts forgotten, so pending commit records are void, and taken out of
 * the table, so the next open starts afresh) before its row and data file
 * go.  Called with version_lock held, so no open can attach the key
 * meanwhile.
 */
static int evict_key_locked_version(struct sched *s, const char *key,
				    uint64_t *bytes)
{
	char name[STORE_NAME_LEN + 1];
	struct extent_set set;
	struct idx_object row;
	struct sched_obj *o;
	int retired = 0, rc;

	*bytes = 0;
	pthread_mutex_lock(&s->lock);
	o = sched_table_find_locked(s, key);
	if (o) {
		if (o->users > 0) {
			pthread_mutex_unlock(&s->lock);
			return -EBUSY;
		}
		for (uint32_t p = 0; p < o->nparts; p++) {
			if (o->part[p] == PART_QUEUED ||
			    o->part[p] == PART_DEMANDED ||
			    o->part[p] == PART_FETCHING) {
				pthread_mutex_unlock(&s->lock);
				return -EBUSY;
			}
			if (o->part[p] == PART_PRESENT)
				*bytes += sched_part_bytes(o, p);
		}
		/* Takes the present parts off s->cached_bytes. */
		sched_obj_drop_parts_locked(o, 0);
		o->stale = 1;
		sched_table_remove_locked(s, o);
		retired = 1;
	}
	pthread_mutex_unlock(&s->lock);

	rc = idx_object_lookup(s->idx, s->bucket, key, &row);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	if (!retired) {
		extent_set_init(&set);
		rc = idx_extents_load(s->idx, row.id, &set);
		if (rc == 0)
			*bytes = extent_set_bytes(&set);
		extent_set_clear(&set);
		if (rc != 0)
			return rc;
	}
	rc = idx_object_remove(s->idx, row.id);
	if (rc != 0)
		return rc;
	if (store_name(s->bucket, key, row.etag, name) == 0)
		(void)store_file_remove(s->store, name);
	pthread_mutex_lock(&s->lock);
	if (!retired)
		s->cached_bytes -=
			*bytes < s->cached_bytes ? *bytes : s->cached_bytes;
	if (*bytes) {
		s->stats.evictions++;
		s->stats.bytes_evicted += *bytes;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int sched_evict_key(struct sched *s, const char *key, uint64_t *bytes)
{
	int rc;

	pthread_mutex_lock(&s->version_lock);
	rc = evict_key_locked_version(s, key, bytes);
	pthread_mutex_unlock(&s->version_lock);
	if (rc == 0 && *bytes)
		log_debug("evicted s3://%s/%s on request (%llu bytes)",
			  s->bucket, key, (unsigned long long)*bytes);
	return rc;
}

int sched_evict_all(struct sched *s, uint64_t *bytes, uint64_t *objects,
		    uint64_t *busy)
{
	struct idx_entry v[EVICT_PAGE];
	int64_t after = 0;
	int rc = 0;

	*bytes = *objects = *busy = 0;
	while (rc == 0) {
		size_t n = 0;

		rc = idx_page_by_id(s->idx, after, EVICT_PAGE, v, &n);
		if (rc != 0 || n == 0)
			break;
		after = v[n - 1].id;
		for (size_t i = 0; i < n && rc == 0; i++) {
			uint64_t b = 0;

			if (strcmp(v[i].bucket, s->bucket) != 0)
				continue;
			pthread_mutex_lock(&s->version_lock);
			rc = evict_key_locked_version(s, v[i].key, &b);
			pthread_mutex_unlock(&s->version_lock);
			if (rc == -EBUSY) {
				(*busy)++;
				rc = 0;
			} else if (rc == 0 && b) {
				(*objects)++;
				*bytes += b;
			}
		}
		idx_entries_clear(v, n);
	}
	log_info("evicted %llu objects (%llu bytes) of s3://%s on request; "
		 "%llu in use",
		 (unsigned long long)*objects, (unsigned long long)*bytes,
		 s->bucket, (unsigned long long)*busy);
	return rc;
}
