// SPDX-License-Identifier: MIT
/*
 * The fetch scheduler: parts of open objects become ranged GETs whose
 * bodies stream into the cache data files; readers wait only for the bytes
 * under their range.
 *
 * DESIGN
 *
 * Threads.  `workers` fetch threads each run one ranged GET at a time; one
 * commit thread makes finished parts durable and records them in the
 * index; one eviction thread keeps the cache under its limits (evict.c);
 * one verify thread checks whole objects against MD5 ETags (verify.c).
 * Callers (FUSE threads) open objects and wait for ranges.
 *
 * Locks.  One mutex, s->lock, guards every object's part states, the
 * object table, the queues, the commit list and the byte counters.  It is
 * never held across network or disk I/O: a worker marks a part FETCHING,
 * drops the lock for the GET, and takes it again to publish the result.
 * Readers of an object whose parts are all present skip the lock
 * (o->complete is atomic), so cached reads of one file never serialize.
 * s->version_lock serializes the three things that decide which bytes the
 * index may claim for a key: opening a version (record it, load its
 * extents, open its file), committing extents, and evicting an object.
 * Lock order: version_lock before lock.
 *
 * Ordering.  Two queues feed the workers: the demand queue holds parts a
 * reader is blocked on, the pending list holds objects with parts left to
 * read ahead.  Workers always drain the demand queue first.  Within an
 * object, read-ahead walks parts from a cursor that jumps to just after
 * the last demanded part, so it follows the reader.  A part being fetched
 * publishes how far it is written (part_fill, every SCHED_FILL_STEP
 * bytes), and a reader whose range is below that mark goes on at once.
 *
 * Durability.  A part is readable as soon as its bytes are written (they
 * are in the page cache, and reads go through the same file), but it is
 * recorded in the index only after it is durable: the commit thread takes
 * every finished part at once, syncs each file once (and the directory of
 * a new file) or, for a batch of SCHED_SYNCFS_MIN files or more, the
 * whole cache filesystem with one syncfs(), and commits them in one
 * transaction (group commit).  After a crash the index may miss parts
 * that were on disk, never the reverse.  Dropping an object's parts bumps
 * its generation, so commit records made before the drop are not recorded
 * after it.  The same transaction records the access times of objects
 * opened since the last one (touches), so opening a cached object writes
 * nothing to the index itself.
 *
 * Backpressure.  Workers wait while the commit backlog or the verify
 * queue is full (SCHED_COMMIT_MAX), so finished objects cannot pile up
 * open data files.
 * A worker reserves a part's bytes against the cache limit
 * before fetching it (evict.c).  When eviction cannot make room, a
 * read-ahead part is skipped and a demanded part fails with -ENOSPC, which
 * sends the reader to sched_obj_read_direct(): a full cache slows reads,
 * it never fails them.
 *
 * Lifetime.  An object is reference counted: each open handle, each queue
 * entry, each part in flight and each commit record holds one.  The last
 * reference closes the data file.  So read-ahead finishes after the last
 * close, and a replaced version lives until its handles are released.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoardfs/log.h"
#include "hoardfs/util.h"
#include "sched/sched_int.h"

void sched_deadline_after(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

static uint32_t key_hash(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a offset basis */

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 16777619u; /* FNV-1a prime */
	return h % SCHED_TABLE_SIZE;
}

uint64_t sched_part_off(const struct sched_obj *o, uint32_t p)
{
	return (uint64_t)p * o->s->cfg.part_size;
}

uint64_t sched_part_end(const struct sched_obj *o, uint32_t p)
{
	uint64_t end = sched_part_off(o, p) + o->s->cfg.part_size;

	return end < o->size ? end : o->size;
}

uint64_t sched_part_bytes(const struct sched_obj *o, uint32_t p)
{
	return sched_part_end(o, p) - sched_part_off(o, p);
}

void sched_table_remove_locked(struct sched *s, struct sched_obj *o)
{
	struct sched_obj **pp = &s->table[key_hash(o->key)];

	if (!o->in_table)
		return;
	while (*pp && *pp != o)
		pp = &(*pp)->table_next;
	if (*pp)
		*pp = o->table_next;
	o->in_table = 0;
}

struct sched_obj *sched_table_find_locked(struct sched *s, const char *key)
{
	struct sched_obj *o = s->table[key_hash(key)];

	while (o && strcmp(o->key, key) != 0)
		o = o->table_next;
	return o;
}

void sched_obj_destroy(struct sched_obj *o)
{
	if (o->fd >= 0)
		close(o->fd);
	pthread_cond_destroy(&o->cond);
	free(o->part);
	free(o->part_err);
	free(o->part_fill);
	free(o->key);
	free(o);
}

struct sched_obj *sched_obj_unref_locked(struct sched_obj *o)
{
	if (--o->refs > 0)
		return NULL;
	sched_table_remove_locked(o->s, o);
	return o;
}

void sched_pending_push_locked(struct sched *s, struct sched_obj *o)
{
	if (o->on_pending)
		return;
	o->on_pending = 1;
	o->refs++;
	o->pending_next = NULL;
	if (s->pending_tail)
		s->pending_tail->pending_next = o;
	else
		s->pending_head = o;
	s->pending_tail = o;
	pthread_cond_signal(&s->work_cond);
}

void sched_obj_drop_parts_locked(struct sched_obj *o, int requeue)
{
	for (uint32_t p = 0; p < o->nparts; p++) {
		if (o->part[p] == PART_PRESENT)
			o->s->cached_bytes -= sched_part_bytes(o, p);
		if (o->part[p] == PART_PRESENT || o->part[p] == PART_FAILED)
			o->part[p] = requeue ? PART_QUEUED : PART_ABSENT;
	}
	o->present = 0;
	o->verified = 0;
	o->generation++;
	atomic_store(&o->complete, 0);
	if (requeue && !o->bypass)
		sched_pending_push_locked(o->s, o);
}

/* Remove the head of the pending list; returns it for unref. */
static struct sched_obj *pending_pop_locked(struct sched *s)
{
	struct sched_obj *o = s->pending_head;

	s->pending_head = o->pending_next;
	if (!s->pending_head)
		s->pending_tail = NULL;
	o->on_pending = 0;
	o->pending_next = NULL;
	return sched_obj_unref_locked(o);
}

int sched_demand_push_locked(struct sched *s, struct sched_obj *o, uint32_t p)
{
	struct demand *d = malloc(sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->o = o;
	d->part = p;
	d->next = NULL;
	o->refs++;
	o->part[p] = PART_DEMANDED;
	if (s->demand_tail)
		s->demand_tail->next = d;
	else
		s->demand_head = d;
	s->demand_tail = d;
	pthread_cond_signal(&s->work_cond);
	return 0;
}

void sched_unref_into(struct sched_obj *o, struct sched_obj **dead)
{
	if (sched_obj_unref_locked(o)) {
		o->pending_next = *dead;
		*dead = o;
	}
}

void sched_destroy_chain(struct sched_obj *dead)
{
	while (dead) {
		struct sched_obj *next = dead->pending_next;

		sched_obj_destroy(dead);
		dead = next;
	}
}

/*
 * Pick the next part to fetch: demanded parts first, then read-ahead.
 * Marks it FETCHING and returns its object with one reference that the
 * caller owns, or NULL when there is no work.  Sets *@demanded.
 */
static struct sched_obj *job_take_locked(struct sched *s, uint32_t *part,
					 int *demanded, struct sched_obj **dead)
{
	while (s->demand_head) {
		struct demand *d = s->demand_head;
		struct sched_obj *o = d->o;

		s->demand_head = d->next;
		if (!s->demand_head)
			s->demand_tail = NULL;
		*part = d->part;
		free(d);
		if (o->part[*part] == PART_DEMANDED) {
			o->part[*part] = PART_FETCHING;
			*demanded = 1;
			return o; /* the demand's reference moves to the job */
		}
		sched_unref_into(o, dead);
	}
	while (s->pending_head) {
		struct sched_obj *o = s->pending_head;

		for (uint32_t i = 0; !o->stale && i < o->nparts; i++) {
			uint32_t p = (o->cursor + i) % o->nparts;

			if (o->part[p] != PART_QUEUED)
				continue;
			o->part[p] = PART_FETCHING;
			o->cursor = p + 1;
			o->refs++;
			*part = p;
			*demanded = 0;
			return o;
		}
		if (pending_pop_locked(s)) {
			o->pending_next = *dead;
			*dead = o;
		}
	}
	return NULL;
}

/* Context of one ranged GET streaming into a data file. */
struct fetch_sink {
	struct sched_obj *o;
	uint32_t part;
	uint64_t part_off;  /* object offset of the part */
	uint64_t fill;	    /* bytes of the part written from its start */
	uint64_t published; /* fill as readers last saw it */
	uint64_t bytes;	    /* written so far, all attempts */
};

/* Tell readers waiting inside the part how far it is written. */
static void fetch_publish(struct fetch_sink *sink)
{
	struct sched_obj *o = sink->o;

	pthread_mutex_lock(&o->s->lock);
	o->part_fill[sink->part] = sink->fill;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->s->lock);
	sink->published = sink->fill;
}

static int fetch_body(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct fetch_sink *sink = arg;
	int rc;

	if (atomic_load(&sink->o->s->stopping))
		return -ECANCELED;
	rc = store_pwrite_all(sink->o->fd, buf, len, off);
	if (rc != 0)
		return rc;
	sink->bytes += len;
	/* A retry may start again below the fill: those bytes are the same
	 * version's (If-Match), so the fill only grows. */
	if (off <= sink->part_off + sink->fill &&
	    off + len > sink->part_off + sink->fill)
		sink->fill = off + len - sink->part_off;
	if (sink->fill - sink->published >= SCHED_FILL_STEP)
		fetch_publish(sink);
	return 0;
}

static int fetch_part(struct sched_obj *o, uint32_t p, uint64_t *bytes)
{
	uint64_t off = sched_part_off(o, p);
	struct fetch_sink sink = {.o = o, .part = p, .part_off = off};
	int rc;

	rc = client_get(o->s->client, o->key, off, sched_part_bytes(o, p),
			o->etag, fetch_body, &sink, NULL, NULL);
	*bytes = sink.bytes;
	return rc;
}

/* Publish the outcome of fetching part @p of @o (s->lock held); @written
 * says a transfer into the data file was attempted. */
static void part_done_locked(struct sched *s, struct sched_obj *o, uint32_t p,
			     int rc, int written)
{
	if (rc == 0)
		rc = sched_commit_push_locked(s, o, sched_part_off(o, p),
					      sched_part_end(o, p));
	if (rc == 0) {
		o->part[p] = PART_PRESENT;
		o->fetched++;
		s->cached_bytes += sched_part_bytes(o, p);
		s->stats.parts_fetched++;
		if (++o->present == o->nparts) {
			atomic_store(&o->complete, 1);
			sched_verify_queue_locked(s, o);
		}
	} else {
		o->part[p] = PART_FAILED;
		o->part_err[p] = rc;
		o->fail_ms = util_mono_ms();
		s->stats.fetch_errors++;
		if (rc == -EDQUOT)
			o->part_err[p] = rc = -ENOSPC;
		if (rc == -ENOSPC && written) {
			/* The disk filled under a transfer: every later part
			 * of this object would pay a wasted GET, so read it
			 * straight from the store until it is closed. */
			o->bypass = 1;
			sched_evict_kick_locked(s);
		}
	}
	pthread_cond_broadcast(&o->cond);
}

static void *worker_main(void *arg)
{
	struct sched *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!atomic_load(&s->stopping)) {
		struct sched_obj *dead = NULL, *o;
		uint64_t bytes = 0, need;
		uint32_t p = 0;
		int demanded = 0, rc;

		/* Backpressure: a full commit or verify backlog must drain
		 * first. */
		if (s->ncommits >= s->commit_max ||
		    s->nverify >= s->commit_max) {
			pthread_cond_wait(&s->room_cond, &s->lock);
			continue;
		}
		o = job_take_locked(s, &p, &demanded, &dead);
		if (dead) {
			pthread_mutex_unlock(&s->lock);
			sched_destroy_chain(dead);
			pthread_mutex_lock(&s->lock);
		}
		if (!o) {
			if (!dead)
				pthread_cond_wait(&s->work_cond, &s->lock);
			continue;
		}
		/* A push wakes one worker; while parts remain, each worker
		 * that finds one wakes the next, so an object's parts go out
		 * --parallel at a time rather than one by one. */
		if (s->demand_head || s->pending_head)
			pthread_cond_signal(&s->work_cond);
		o->part_fill[p] = 0;
		need = sched_part_bytes(o, p);
		rc = sched_space_reserve_locked(s, need);
		if (rc != 0 && !demanded) {
			/* No room for read-ahead: leave the part for a
			 * reader, who will get it from the store. */
			o->part[p] = PART_ABSENT;
			pthread_cond_broadcast(&o->cond);
		} else if (rc != 0) {
			part_done_locked(s, o, p, rc, 0);
		} else {
			pthread_mutex_unlock(&s->lock);
			rc = fetch_part(o, p, &bytes);
			pthread_mutex_lock(&s->lock);
			s->inflight_bytes -= need;
			s->stats.bytes_fetched += bytes;
			part_done_locked(s, o, p, rc, 1);
		}
		if (sched_obj_unref_locked(o)) {
			pthread_mutex_unlock(&s->lock);
			sched_obj_destroy(o);
			pthread_mutex_lock(&s->lock);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static int start_thread(pthread_t *t, int *started, void *(*fn)(void *),
			struct sched *s)
{
	int rc = pthread_create(t, NULL, fn, s);

	if (rc == 0)
		*started = 1;
	return -rc;
}

int sched_new(const struct sched_config *cfg, const char *bucket,
	      struct client *client, struct store *store, struct idx *idx,
	      struct sched **out)
{
	uint64_t objects = 0;
	struct sched *s;
	int rc;

	if (cfg->part_size == 0 || cfg->workers == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->commit_max = sched_commit_max();
	s->client = client;
	s->store = store;
	s->idx = idx;
	s->bucket = strdup(bucket);
	s->workers = calloc(cfg->workers, sizeof(*s->workers));
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->version_lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_cond_init(&s->commit_cond, NULL);
	pthread_cond_init(&s->room_cond, NULL);
	pthread_cond_init(&s->evict_cond, NULL);
	pthread_cond_init(&s->space_cond, NULL);
	pthread_cond_init(&s->verify_cond, NULL);
	if (!s->bucket || !s->workers) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = idx_stats(idx, &objects, &s->cached_bytes);
	if (rc == 0)
		rc = start_thread(&s->committer, &s->committer_started,
				  sched_committer_main, s);
	if (rc == 0)
		rc = start_thread(&s->evictor, &s->evictor_started,
				  sched_evict_main, s);
	if (rc == 0)
		rc = start_thread(&s->verifier, &s->verifier_started,
				  sched_verify_main, s);
	if (rc == 0)
		rc = start_thread(&s->janitor, &s->janitor_started,
				  sched_janitor_main, s);
	for (; rc == 0 && s->nworkers < cfg->workers; s->nworkers++) {
		rc = -pthread_create(&s->workers[s->nworkers], NULL,
				     worker_main, s);
		if (rc != 0)
			break;
	}
	if (rc != 0)
		goto fail;
	*out = s;
	return 0;
fail:
	sched_free(s);
	return rc;
}

void sched_free(struct sched *s)
{
	struct sched_obj *dead = NULL;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->stopping, 1);
	pthread_cond_broadcast(&s->work_cond);
	pthread_cond_broadcast(&s->commit_cond);
	pthread_cond_broadcast(&s->room_cond);
	pthread_cond_broadcast(&s->evict_cond);
	pthread_cond_broadcast(&s->space_cond);
	pthread_cond_broadcast(&s->verify_cond);
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	if (s->verifier_started)
		pthread_join(s->verifier, NULL);
	if (s->evictor_started)
		pthread_join(s->evictor, NULL);
	if (s->janitor_started)
		pthread_join(s->janitor, NULL);
	/* Workers are gone: empty the queues, then let the committer drain
	 * what they finished. */
	pthread_mutex_lock(&s->lock);
	while (s->demand_head) {
		struct demand *d = s->demand_head;

		s->demand_head = d->next;
		sched_unref_into(d->o, &dead);
		free(d);
	}
	s->demand_tail = NULL;
	while (s->pending_head) {
		struct sched_obj *o = s->pending_head;

		if (pending_pop_locked(s)) {
			o->pending_next = dead;
			dead = o;
		}
	}
	pthread_mutex_unlock(&s->lock);
	sched_destroy_chain(dead);
	if (s->committer_started)
		pthread_join(s->committer, NULL);
	pthread_cond_destroy(&s->verify_cond);
	pthread_cond_destroy(&s->space_cond);
	pthread_cond_destroy(&s->evict_cond);
	pthread_cond_destroy(&s->commit_cond);
	pthread_cond_destroy(&s->room_cond);
	pthread_cond_destroy(&s->work_cond);
	pthread_mutex_destroy(&s->version_lock);
	pthread_mutex_destroy(&s->lock);
	free(s->commits);
	free(s->touches);
	free(s->workers);
	free(s->bucket);
	free(s);
}

/* A new in-memory object of @size_bytes; refs 1, every part absent. */
static int obj_new(struct sched *s, const char *key, const char *etag,
		   uint64_t size_bytes, struct sched_obj **out)
{
	uint64_t nparts =
		(size_bytes + s->cfg.part_size - 1) / s->cfg.part_size;
	struct sched_obj *o;

	if (nparts > UINT32_MAX)
		return -EFBIG;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->s = s;
	o->fd = -1;
	o->key = strdup(key);
	o->nparts = (uint32_t)nparts;
	o->part = calloc(nparts ? nparts : 1, sizeof(*o->part));
	o->part_err = calloc(nparts ? nparts : 1, sizeof(*o->part_err));
	o->part_fill = calloc(nparts ? nparts : 1, sizeof(*o->part_fill));
	pthread_cond_init(&o->cond, NULL);
	if (!o->key || !o->part || !o->part_err || !o->part_fill ||
	    store_name(s->bucket, key, etag, o->name) != 0) {
		sched_obj_destroy(o);
		return -ENOMEM;
	}
	snprintf(o->etag, sizeof(o->etag), "%s", etag);
	o->size = size_bytes;
	o->refs = 1;
	*out = o;
	return 0;
}

/* Mark parts whose whole range @set covers as present. */
static void obj_mark_present(struct sched_obj *o, const struct extent_set *set)
{
	for (uint32_t p = 0; p < o->nparts; p++) {
		if (!extent_set_contains(set, sched_part_off(o, p),
					 sched_part_end(o, p)))
			continue;
		o->part[p] = PART_PRESENT;
		o->present++;
	}
}

/* Take @bytes off the cache's byte count (s->lock not held). */
static void cached_bytes_sub(struct sched *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->lock);
	s->cached_bytes -= bytes < s->cached_bytes ? bytes : s->cached_bytes;
	pthread_mutex_unlock(&s->lock);
}

/* Bytes the index holds for the older version in @row (for accounting),
 * found before recording the new one drops them. */
static uint64_t old_version_bytes(struct sched *s, const struct idx_object *row)
{
	struct extent_set set;
	uint64_t bytes = 0;

	extent_set_init(&set);
	if (idx_extents_load(s->idx, row->id, &set) == 0)
		bytes = extent_set_bytes(&set);
	extent_set_clear(&set);
	return bytes;
}

/*
 * Record the version (version_lock held): an unchanged version, the warm
 * case, only queues a touch; a new one is written at once, dropping the
 * bytes of the one it replaces.  Fills *@row.
 */
static int obj_record_version(struct sched *s, struct sched_obj *o,
			      int64_t mtime_sec, struct idx_object *row)
{
	char old_etag[IDX_ETAG_MAX], old_name[STORE_NAME_LEN + 1];
	int rc = idx_object_lookup(s->idx, s->bucket, o->key, row);

	if (rc != 0 && rc != -ENOENT)
		return rc;
	if (rc == 0 && strcmp(row->etag, o->etag) == 0 &&
	    row->size == o->size && row->mtime_sec == mtime_sec) {
		sched_touch_push(s, row->id);
		return 0;
	}
	if (rc == 0 &&
	    (strcmp(row->etag, o->etag) != 0 || row->size != o->size))
		cached_bytes_sub(s, old_version_bytes(s, row));
	rc = idx_object_set_version(s->idx, s->bucket, o->key, o->etag, o->size,
				    mtime_sec, row, old_etag);
	if (rc != 0)
		return rc;
	if (old_etag[0] && strcmp(old_etag, o->etag) != 0) {
		log_info("s3://%s/%s changed (ETag %s -> %s): dropping its "
			 "cached bytes",
			 s->bucket, o->key, old_etag, o->etag);
		if (store_name(s->bucket, o->key, old_etag, old_name) == 0)
			(void)store_file_remove(s->store, old_name);
	}
	return 0;
}

/*
 * Record the version, open its data file and load what the index has of
 * it (version_lock held).  Drops an older version's data file, and the
 * extents of a data file that is missing or of the wrong size.
 */
static int obj_attach(struct sched *s, struct sched_obj *o, int64_t mtime_sec)
{
	struct extent_set set;
	struct idx_object row;
	int reset = 0, rc;

	rc = obj_record_version(s, o, mtime_sec, &row);
	if (rc != 0)
		return rc;
	o->idx_id = row.id;
	o->fd = store_file_open(s->store, o->name, o->size, &reset);
	if (o->fd < 0)
		return o->fd;
	o->needs_dir_sync = reset;
	extent_set_init(&set);
	rc = idx_extents_load(s->idx, o->idx_id, &set);
	if (rc == 0 && reset && set.n > 0) {
		log_warn("s3://%s/%s: data file missing or resized; dropping "
			 "its %llu cached bytes and fetching again",
			 s->bucket, o->key,
			 (unsigned long long)extent_set_bytes(&set));
		cached_bytes_sub(s, extent_set_bytes(&set));
		rc = idx_extents_drop(s->idx, o->idx_id);
	} else if (rc == 0) {
		obj_mark_present(o, &set);
	}
	extent_set_clear(&set);
	return rc;
}

int sched_obj_open(struct sched *s, const char *key, const char *etag,
		   uint64_t size_bytes, int64_t mtime_sec,
		   struct sched_obj **out)
{
	struct sched_obj *o, *found;
	int rc;

	pthread_mutex_lock(&s->lock);
	o = sched_table_find_locked(s, key);
	if (o && strcmp(o->etag, etag) == 0 && o->size == size_bytes) {
		o->refs++;
		o->users++;
		pthread_mutex_unlock(&s->lock);
		*out = o;
		return 0;
	}
	pthread_mutex_unlock(&s->lock);

	rc = obj_new(s, key, etag, size_bytes, &o);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&s->version_lock);
	pthread_mutex_lock(&s->lock);
	found = sched_table_find_locked(s, key);
	if (found && strcmp(found->etag, etag) == 0 &&
	    found->size == size_bytes) {
		/* Another open of this version won the race: share it. */
		found->refs++;
		found->users++;
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_unlock(&s->version_lock);
		sched_obj_destroy(o);
		*out = found;
		return 0;
	}
	if (found) {
		/* From now on no extent of the older version may be
		 * recorded under this key's row. */
		found->stale = 1;
		sched_table_remove_locked(s, found);
	}
	pthread_mutex_unlock(&s->lock);
	rc = obj_attach(s, o, mtime_sec);
	if (rc != 0) {
		/* The cache cannot take it (full or failing disk): serve
		 * this version from the store rather than fail the open. */
		log_warn("s3://%s/%s: cache unavailable (%s); reading it "
			 "straight from the store",
			 s->bucket, key, strerror(-rc));
		if (o->fd >= 0)
			close(o->fd);
		o->fd = -1;
		o->bypass = 1;
		o->present = 0;
		memset(o->part, PART_ABSENT, o->nparts);
	}
	pthread_mutex_lock(&s->lock);
	o->users = 1;
	o->table_next = s->table[key_hash(key)];
	s->table[key_hash(key)] = o;
	o->in_table = 1;
	if (!o->bypass) {
		for (uint32_t p = 0; p < o->nparts; p++)
			if (o->part[p] == PART_ABSENT)
				o->part[p] = PART_QUEUED;
		if (o->present == o->nparts)
			atomic_store(&o->complete, 1);
		else
			sched_pending_push_locked(s, o);
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->version_lock);
	*out = o;
	return 0;
}

void sched_obj_put(struct sched_obj *o)
{
	struct sched *s;

	if (!o)
		return;
	s = o->s;
	pthread_mutex_lock(&s->lock);
	o->users--;
	o = sched_obj_unref_locked(o);
	pthread_mutex_unlock(&s->lock);
	if (o)
		sched_obj_destroy(o);
}
