// SPDX-License-Identifier: MIT
/*
 * The fetch scheduler: parts of open objects become ranged GETs whose
 * bodies stream into the cache data files; readers wait only for the parts
 * under their range.
 *
 * DESIGN
 *
 * Threads.  `workers` fetch threads each run one ranged GET at a time, and
 * one commit thread makes finished parts durable and records them in the
 * index.  Callers (FUSE threads) open objects and wait for ranges.
 *
 * Locks.  One mutex, s->lock, guards every object's part states, the
 * object table, both queues and the commit list.  It is never held across
 * network or disk I/O: a worker marks a part FETCHING, drops the lock for
 * the GET, and takes it again to publish the result.  Readers of an object
 * whose parts are all present skip the lock (o->complete is atomic), so
 * cached reads of one file never serialize.  s->commit_lock orders a
 * version switch in sched_obj_open() against the commit thread, so extents
 * of an old version are never recorded under a new ETag.  Lock order:
 * commit_lock before lock.
 *
 * Ordering.  Two queues feed the workers: the demand queue holds parts a
 * reader is blocked on, the pending list holds objects with parts left to
 * read ahead.  Workers always drain the demand queue first.  Within an
 * object, read-ahead walks parts from a cursor that jumps to just after
 * the last demanded part, so it follows the reader.
 *
 * Durability.  A part is readable as soon as its bytes are written (they
 * are in the page cache, and reads go through the same file), but it is
 * recorded in the index only after fdatasync(): the commit thread takes
 * every finished part at once, syncs each file once, and commits them in
 * one transaction (group commit).  After a crash the index may miss parts
 * that were on disk, never the reverse.
 *
 * Lifetime.  An object is reference counted: each open handle, each queue
 * entry, each part in flight and each commit record holds one.  The last
 * reference closes the data file.  So read-ahead finishes after the last
 * close, and a replaced version lives until its handles are released.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hoardfs/log.h"
#include "hoardfs/sched.h"
#include "hoardfs/util.h"

/* State of one part of one object version. */
enum part_state {
	PART_ABSENT = 0, /* not on disk, not queued */
	PART_QUEUED,	 /* waiting in read-ahead order */
	PART_DEMANDED,	 /* on the demand queue: a reader waits for it */
	PART_FETCHING,	 /* a worker is fetching it */
	PART_PRESENT,	 /* on disk (maybe not yet durable) */
	PART_FAILED,	 /* last fetch failed; part_err says why */
};

/* Buckets of the object table: live objects are the open or in-flight
 * ones, a few thousand at most; chains stay short. */
#define SCHED_TABLE_SIZE 4096

/*
 * One object version being cached.  Fields under "s->lock" may only be
 * read or written with it held.
 * Invariant: present == number of parts in PART_PRESENT;
 * complete != 0 exactly when present == nparts.
 */
struct sched_obj {
	struct sched *s;	 /* owner */
	char *key;		 /* object key, owned */
	char etag[IDX_ETAG_MAX]; /* version, as listed */
	uint64_t size;		 /* bytes */
	int64_t idx_id;		 /* row in the index */
	int fd;			 /* data file, open while refs > 0 */
	uint32_t nparts;	 /* ceil(size / part_size) */
	uint8_t *part;		 /* s->lock: enum part_state per part */
	int *part_err;		 /* s->lock: -errno of each failed part */
	uint32_t present;	 /* s->lock: parts in PART_PRESENT */
	atomic_int complete;	 /* every part present: reads take no lock */
	uint32_t cursor;	 /* s->lock: next part to read ahead */
	unsigned refs;		 /* s->lock: references */
	int stale;		 /* s->lock: replaced by a newer version */
	int in_table;		 /* s->lock: reachable from s->table */
	int on_pending;		 /* s->lock: on the pending list */
	struct sched_obj *table_next;	/* s->lock: hash chain */
	struct sched_obj *pending_next; /* s->lock: pending list link */
	pthread_cond_t cond;		/* signalled when a part finishes */
};

/* A part a reader waits for; holds a reference to its object. */
struct demand {
	struct sched_obj *o;
	uint32_t part;
	struct demand *next;
};

/* A finished part to make durable and record; holds a reference. */
struct commit_rec {
	struct sched_obj *o;
	uint64_t off;
	uint64_t end;
};

struct sched {
	struct sched_config cfg;     /* copied at start */
	char *bucket;		     /* owned */
	struct client *client;	     /* borrowed */
	struct store *store;	     /* borrowed */
	struct idx *idx;	     /* borrowed */
	pthread_mutex_t lock;	     /* see DESIGN */
	pthread_mutex_t commit_lock; /* see DESIGN */
	pthread_cond_t work_cond;    /* lock: a queue got work, or stopping */
	pthread_cond_t commit_cond;  /* lock: commits waiting, or stopping */
	struct sched_obj *table[SCHED_TABLE_SIZE];     /* lock: key -> object */
	struct demand *demand_head, *demand_tail;      /* lock: FIFO */
	struct sched_obj *pending_head, *pending_tail; /* lock: FIFO */
	struct commit_rec *commits;   /* lock: array of ncommits */
	size_t ncommits, commits_cap; /* lock */
	atomic_int stopping;	      /* set once by sched_free() */
	pthread_t *workers;	      /* cfg.workers threads */
	unsigned nworkers;	      /* started */
	pthread_t committer;	      /* commit thread */
	int committer_started;
	struct sched_stats stats; /* lock */
};

static uint32_t key_hash(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a offset basis */

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 16777619u; /* FNV-1a prime */
	return h % SCHED_TABLE_SIZE;
}

static uint64_t part_off(const struct sched_obj *o, uint32_t p)
{
	return (uint64_t)p * o->s->cfg.part_size;
}

static uint64_t part_end(const struct sched_obj *o, uint32_t p)
{
	uint64_t end = part_off(o, p) + o->s->cfg.part_size;

	return end < o->size ? end : o->size;
}

static void table_remove_locked(struct sched *s, struct sched_obj *o)
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

static void obj_destroy(struct sched_obj *o)
{
	if (o->fd >= 0)
		close(o->fd);
	pthread_cond_destroy(&o->cond);
	free(o->part);
	free(o->part_err);
	free(o->key);
	free(o);
}

/* Drop a reference with s->lock held.  Returns the object when this was
 * the last one, for the caller to obj_destroy() after unlocking. */
static struct sched_obj *obj_unref_locked(struct sched_obj *o)
{
	if (--o->refs > 0)
		return NULL;
	table_remove_locked(o->s, o);
	return o;
}

static void pending_push_locked(struct sched *s, struct sched_obj *o)
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

/* Remove the head of the pending list; returns it for unref. */
static struct sched_obj *pending_pop_locked(struct sched *s)
{
	struct sched_obj *o = s->pending_head;

	s->pending_head = o->pending_next;
	if (!s->pending_head)
		s->pending_tail = NULL;
	o->on_pending = 0;
	o->pending_next = NULL;
	return obj_unref_locked(o);
}

static int demand_push_locked(struct sched *s, struct sched_obj *o, uint32_t p)
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

/*
 * Pick the next part to fetch: demanded parts first, then read-ahead.
 * Marks it FETCHING and returns its object with one reference that the
 * caller owns, or NULL when there is no work.  Objects to destroy (their
 * last reference was a queue's) are chained on *@dead.
 */
static struct sched_obj *job_take_locked(struct sched *s, uint32_t *part,
					 struct sched_obj **dead)
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
			return o; /* the demand's reference moves to the job */
		}
		if (obj_unref_locked(o)) {
			o->pending_next = *dead;
			*dead = o;
		}
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
	uint64_t bytes; /* written so far */
};

static int fetch_body(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct fetch_sink *sink = arg;
	int rc;

	if (atomic_load(&sink->o->s->stopping))
		return -ECANCELED;
	rc = store_pwrite_all(sink->o->fd, buf, len, off);
	if (rc == 0)
		sink->bytes += len;
	return rc;
}

static int fetch_part(struct sched_obj *o, uint32_t p, uint64_t *bytes)
{
	struct fetch_sink sink = {.o = o, .bytes = 0};
	uint64_t off = part_off(o, p);
	int rc;

	rc = client_get(o->s->client, o->key, off, part_end(o, p) - off,
			o->etag, fetch_body, &sink, NULL, NULL);
	*bytes = sink.bytes;
	return rc;
}

static int commit_push_locked(struct sched *s, struct sched_obj *o,
			      uint64_t off, uint64_t end)
{
	if (s->ncommits == s->commits_cap) {
		size_t cap = s->commits_cap ? 2 * s->commits_cap : 64;
		struct commit_rec *v =
			realloc(s->commits, cap * sizeof(*s->commits));

		if (!v)
			return -ENOMEM;
		s->commits = v;
		s->commits_cap = cap;
	}
	o->refs++;
	s->commits[s->ncommits++] =
		(struct commit_rec){.o = o, .off = off, .end = end};
	pthread_cond_signal(&s->commit_cond);
	return 0;
}

static void destroy_chain(struct sched_obj *dead)
{
	while (dead) {
		struct sched_obj *next = dead->pending_next;

		obj_destroy(dead);
		dead = next;
	}
}

static void *worker_main(void *arg)
{
	struct sched *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!atomic_load(&s->stopping)) {
		struct sched_obj *dead = NULL, *o;
		uint64_t bytes = 0;
		uint32_t p = 0;
		int rc;

		o = job_take_locked(s, &p, &dead);
		if (dead) {
			pthread_mutex_unlock(&s->lock);
			destroy_chain(dead);
			pthread_mutex_lock(&s->lock);
		}
		if (!o) {
			if (!dead)
				pthread_cond_wait(&s->work_cond, &s->lock);
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		rc = fetch_part(o, p, &bytes);
		pthread_mutex_lock(&s->lock);
		s->stats.bytes_fetched += bytes;
		if (rc == 0)
			rc = commit_push_locked(s, o, part_off(o, p),
						part_end(o, p));
		if (rc == 0) {
			o->part[p] = PART_PRESENT;
			s->stats.parts_fetched++;
			if (++o->present == o->nparts)
				atomic_store(&o->complete, 1);
		} else {
			o->part[p] = PART_FAILED;
			o->part_err[p] = rc;
			s->stats.fetch_errors++;
		}
		pthread_cond_broadcast(&o->cond);
		if (obj_unref_locked(o)) {
			pthread_mutex_unlock(&s->lock);
			obj_destroy(o);
			pthread_mutex_lock(&s->lock);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Make one batch durable and record it.  Runs without s->lock. */
static void commit_batch(struct sched *s, const struct commit_rec *v, size_t n)
{
	struct idx_extent_rec *recs = calloc(n ? n : 1, sizeof(*recs));
	char *durable = calloc(n ? n : 1, 1);
	size_t nrecs = 0;
	int rc;

	if (!recs || !durable) {
		log_error("commit: out of memory; %zu parts stay unrecorded",
			  n);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t j;

		/* One fdatasync per file per batch: reuse an earlier one. */
		for (j = 0; j < i && v[j].o != v[i].o; j++)
			;
		if (j < i) {
			durable[i] = durable[j];
		} else if (fdatasync(v[i].o->fd) == 0) {
			durable[i] = 1;
		} else {
			log_error("commit: fdatasync of s3://%s/%s: %s",
				  s->bucket, v[i].o->key, strerror(errno));
		}
	}
	pthread_mutex_lock(&s->commit_lock);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		if (!durable[i] || v[i].o->stale)
			continue;
		recs[nrecs++] = (struct idx_extent_rec){
			.object_id = v[i].o->idx_id,
			.off = v[i].off,
			.end = v[i].end,
		};
	}
	pthread_mutex_unlock(&s->lock);
	rc = idx_extents_commit(s->idx, recs, nrecs, util_now_sec());
	pthread_mutex_unlock(&s->commit_lock);
	if (rc != 0)
		log_error("commit: recording %zu extents: %s", nrecs,
			  strerror(-rc));
out:
	free(durable);
	free(recs);
}

static void *committer_main(void *arg)
{
	struct sched *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct commit_rec *v;
		struct sched_obj *dead = NULL;
		size_t n;

		while (s->ncommits == 0 && !atomic_load(&s->stopping))
			pthread_cond_wait(&s->commit_cond, &s->lock);
		if (s->ncommits == 0)
			break; /* stopping with nothing left */
		v = s->commits;
		n = s->ncommits;
		s->commits = NULL;
		s->ncommits = s->commits_cap = 0;
		pthread_mutex_unlock(&s->lock);
		commit_batch(s, v, n);
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < n; i++) {
			struct sched_obj *o = v[i].o;

			if (obj_unref_locked(o)) {
				o->pending_next = dead;
				dead = o;
			}
		}
		pthread_mutex_unlock(&s->lock);
		destroy_chain(dead);
		free(v);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int sched_new(const struct sched_config *cfg, const char *bucket,
	      struct client *client, struct store *store, struct idx *idx,
	      struct sched **out)
{
	struct sched *s;
	int rc;

	if (cfg->part_size == 0 || cfg->workers == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->client = client;
	s->store = store;
	s->idx = idx;
	s->bucket = strdup(bucket);
	s->workers = calloc(cfg->workers, sizeof(*s->workers));
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->commit_lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_cond_init(&s->commit_cond, NULL);
	if (!s->bucket || !s->workers) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = -pthread_create(&s->committer, NULL, committer_main, s);
	if (rc != 0)
		goto fail;
	s->committer_started = 1;
	for (; s->nworkers < cfg->workers; s->nworkers++) {
		rc = -pthread_create(&s->workers[s->nworkers], NULL,
				     worker_main, s);
		if (rc != 0)
			goto fail;
	}
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
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	/* Workers are gone: empty the queues, then let the committer drain
	 * what they finished. */
	pthread_mutex_lock(&s->lock);
	while (s->demand_head) {
		struct demand *d = s->demand_head;

		s->demand_head = d->next;
		if (obj_unref_locked(d->o)) {
			d->o->pending_next = dead;
			dead = d->o;
		}
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
	destroy_chain(dead);
	if (s->committer_started)
		pthread_join(s->committer, NULL);
	pthread_cond_destroy(&s->commit_cond);
	pthread_cond_destroy(&s->work_cond);
	pthread_mutex_destroy(&s->commit_lock);
	pthread_mutex_destroy(&s->lock);
	free(s->commits);
	free(s->workers);
	free(s->bucket);
	free(s);
}

/* A new in-memory object for a version already recorded as @row. */
static int obj_new(struct sched *s, const char *key,
		   const struct idx_object *row, struct sched_obj **out)
{
	uint64_t nparts = (row->size + s->cfg.part_size - 1) / s->cfg.part_size;
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
	pthread_cond_init(&o->cond, NULL);
	if (!o->key || !o->part || !o->part_err) {
		obj_destroy(o);
		return -ENOMEM;
	}
	memcpy(o->etag, row->etag, sizeof(o->etag));
	o->size = row->size;
	o->idx_id = row->id;
	o->refs = 1;
	*out = o;
	return 0;
}

/* Mark parts whose whole range the index lists as present. */
static int obj_load_extents(struct sched_obj *o)
{
	struct extent_set set;
	int rc;

	extent_set_init(&set);
	rc = idx_extents_load(o->s->idx, o->idx_id, &set);
	for (uint32_t p = 0; rc == 0 && p < o->nparts; p++) {
		if (!extent_set_contains(&set, part_off(o, p), part_end(o, p)))
			continue;
		o->part[p] = PART_PRESENT;
		o->present++;
	}
	extent_set_clear(&set);
	if (o->present == o->nparts)
		atomic_store(&o->complete, 1);
	return rc;
}

static struct sched_obj *table_find_locked(struct sched *s, const char *key)
{
	struct sched_obj *o = s->table[key_hash(key)];

	while (o && strcmp(o->key, key) != 0)
		o = o->table_next;
	return o;
}

/* Record the version in the index and drop an older one's data file. */
static int obj_record_version(struct sched *s, const char *key,
			      const char *etag, uint64_t size_bytes,
			      int64_t mtime_sec, struct idx_object *row)
{
	char old_etag[IDX_ETAG_MAX], name[STORE_NAME_LEN + 1];
	struct sched_obj *old;
	int rc;

	pthread_mutex_lock(&s->commit_lock);
	rc = idx_object_set_version(s->idx, s->bucket, key, etag, size_bytes,
				    mtime_sec, row, old_etag);
	if (rc == 0) {
		/* From now on no extent of an older version may be recorded
		 * under this row: mark any such object stale. */
		pthread_mutex_lock(&s->lock);
		old = table_find_locked(s, key);
		if (old && strcmp(old->etag, etag) != 0) {
			old->stale = 1;
			table_remove_locked(s, old);
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&s->commit_lock);
	/* Same ETag with another size: the data file has the same name and
	 * is re-sized by the caller; only its extents had to go. */
	if (rc != 0 || old_etag[0] == '\0' || strcmp(old_etag, etag) == 0)
		return rc;
	log_info("s3://%s/%s changed (ETag %s -> %s): dropping cached data",
		 s->bucket, key, old_etag, etag);
	if (store_name(s->bucket, key, old_etag, name) == 0)
		(void)store_file_remove(s->store, name);
	return 0;
}

int sched_obj_open(struct sched *s, const char *key, const char *etag,
		   uint64_t size_bytes, int64_t mtime_sec,
		   struct sched_obj **out)
{
	char name[STORE_NAME_LEN + 1];
	struct sched_obj *o, *found;
	struct idx_object row;
	int rc;

	pthread_mutex_lock(&s->lock);
	o = table_find_locked(s, key);
	if (o && strcmp(o->etag, etag) == 0 && o->size == size_bytes) {
		o->refs++;
		pthread_mutex_unlock(&s->lock);
		*out = o;
		return 0;
	}
	pthread_mutex_unlock(&s->lock);

	rc = obj_record_version(s, key, etag, size_bytes, mtime_sec, &row);
	if (rc == 0)
		rc = obj_new(s, key, &row, &o);
	if (rc != 0)
		return rc;
	rc = obj_load_extents(o);
	if (rc == 0)
		rc = store_name(s->bucket, key, etag, name);
	if (rc == 0) {
		o->fd = store_file_open(s->store, name, size_bytes);
		if (o->fd < 0)
			rc = o->fd;
	}
	if (rc != 0) {
		log_error("open s3://%s/%s: cache: %s", s->bucket, key,
			  strerror(-rc));
		obj_destroy(o);
		return rc;
	}

	pthread_mutex_lock(&s->lock);
	found = table_find_locked(s, key);
	if (found && strcmp(found->etag, etag) == 0) {
		/* Another open of this version won the race: share it. */
		found->refs++;
		pthread_mutex_unlock(&s->lock);
		obj_destroy(o);
		*out = found;
		return 0;
	}
	if (found)
		table_remove_locked(s, found);
	o->table_next = s->table[key_hash(key)];
	s->table[key_hash(key)] = o;
	o->in_table = 1;
	for (uint32_t p = 0; p < o->nparts; p++)
		if (o->part[p] == PART_ABSENT)
			o->part[p] = PART_QUEUED;
	if (!atomic_load(&o->complete))
		pending_push_locked(s, o);
	pthread_mutex_unlock(&s->lock);
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
	o = obj_unref_locked(o);
	pthread_mutex_unlock(&s->lock);
	if (o)
		obj_destroy(o);
}

int sched_obj_wait(struct sched_obj *o, uint64_t off, uint64_t len)
{
	struct sched *s = o->s;
	uint64_t end;
	uint32_t first, last;
	int waited = 0, rc = 0;

	if (len == 0 || off >= o->size)
		return 0;
	end = len > o->size - off ? o->size : off + len;
	if (atomic_load(&o->complete)) {
		pthread_mutex_lock(&s->lock);
		s->stats.bytes_served_cached += end - off;
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	first = (uint32_t)(off / s->cfg.part_size);
	last = (uint32_t)((end - 1) / s->cfg.part_size);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		int missing = 0;

		for (uint32_t p = first; p <= last && rc == 0; p++) {
			switch (o->part[p]) {
			case PART_PRESENT:
				break;
			case PART_FAILED:
				rc = o->part_err[p];
				o->part[p] =
					PART_ABSENT; /* next wait retries */
				break;
			case PART_ABSENT:
			case PART_QUEUED:
				rc = demand_push_locked(s, o, p);
				missing = 1;
				break;
			default: /* DEMANDED or FETCHING */
				missing = 1;
				break;
			}
		}
		if (rc != 0 || !missing)
			break;
		if (!waited && last + 1 < o->nparts)
			o->cursor = last + 1; /* read ahead after the reader */
		waited = 1;
		if (atomic_load(&s->stopping)) {
			rc = -ECANCELED;
			break;
		}
		pthread_cond_wait(&o->cond, &s->lock);
	}
	if (rc == 0 && waited)
		s->stats.bytes_served_fetched += end - off;
	else if (rc == 0)
		s->stats.bytes_served_cached += end - off;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int sched_obj_fd(const struct sched_obj *o)
{
	return o->fd;
}

void sched_stats_get(struct sched *s, struct sched_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	pthread_mutex_unlock(&s->lock);
}

int sched_cached_bytes(struct sched *s, const char *key, const char *etag,
		       uint64_t *bytes, int *fetching)
{
	struct extent_set set;
	struct idx_object row;
	struct sched_obj *o;
	int rc;

	*bytes = 0;
	*fetching = 0;
	pthread_mutex_lock(&s->lock);
	o = table_find_locked(s, key);
	if (o && strcmp(o->etag, etag) == 0) {
		for (uint32_t p = 0; p < o->nparts; p++) {
			if (o->part[p] == PART_PRESENT)
				*bytes += part_end(o, p) - part_off(o, p);
			else if (o->part[p] != PART_FAILED)
				*fetching = 1;
		}
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	pthread_mutex_unlock(&s->lock);
	rc = idx_object_lookup(s->idx, s->bucket, key, &row);
	if (rc == -ENOENT || (rc == 0 && strcmp(row.etag, etag) != 0))
		return 0;
	if (rc != 0)
		return rc;
	extent_set_init(&set);
	rc = idx_extents_load(s->idx, row.id, &set);
	if (rc == 0)
		*bytes = extent_set_bytes(&set);
	extent_set_clear(&set);
	return rc;
}
