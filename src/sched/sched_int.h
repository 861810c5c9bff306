/* SPDX-License-Identifier: MIT */
/*
 * Internal shapes of the scheduler, shared by sched.c (objects, fetch
 * workers, group commit), evict.c (capacity and eviction) and verify.c
 * (whole-object MD5 checks).  See the DESIGN comment in sched.c.
 */
#ifndef HOARDFS_SCHED_INT_H
#define HOARDFS_SCHED_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "hoardfs/sched.h"

/* State of one part of one object version. */
enum part_state {
	PART_ABSENT = 0, /* not on disk, not queued */
	PART_QUEUED,	 /* waiting in read-ahead order */
	PART_DEMANDED,	 /* on the demand queue: a reader waits for it */
	PART_FETCHING,	 /* a worker is fetching it */
	PART_PRESENT,	 /* on disk (maybe not yet durable) */
	PART_FAILED,	 /* last fetch failed; part_err says why */
};

/* How long a failed part answers with its error before a wait fetches it
 * again: long enough to cover the kernel's immediate re-read of a page
 * whose read-ahead failed, short enough that a reader retrying by hand
 * gets a fresh attempt. */
#define SCHED_FAIL_MEMORY_MS 2000

/* Buckets of the object table: live objects are the open or in-flight
 * ones, a few thousand at most; chains stay short. */
#define SCHED_TABLE_SIZE 4096

/* Commit records (finished parts) waiting for the committer at most, and
 * objects waiting for their MD5 check at most: each may keep a closed
 * object's data file open, so the backlogs bound descriptors and
 * unrecorded bytes; fetch workers wait while either is full.  Also at most
 * an eighth of the open-file limit each (the queue, the batch being
 * committed and the verify queue then hold under half of it), and at
 * least SCHED_COMMIT_MIN. */
#define SCHED_COMMIT_MAX 1024
#define SCHED_COMMIT_MIN 16

/* A batch of at least this many data files is made durable with one
 * syncfs(2) of the cache filesystem rather than an fdatasync(2) each. */
#define SCHED_SYNCFS_MIN 16

/* How long the committer waits for a batch to grow to SCHED_SYNCFS_MIN:
 * the window in which finished parts are readable but not yet recorded
 * grows by this much. */
#define SCHED_COMMIT_GATHER_MS 20

/* A part being fetched tells waiting readers of its progress every
 * this many bytes.  Bytes: a few kernel reads (128 KiB each). */
#define SCHED_FILL_STEP (256 << 10)

/* Touches queued at most; how long the committer lets them wait. */
#define SCHED_TOUCH_MAX	     65536
#define SCHED_TOUCH_DELAY_MS 1000

/*
 * One object version being cached.  Fields marked "lock" need s->lock.
 * Invariant: present == number of parts in PART_PRESENT;
 * complete != 0 exactly when present == nparts and !bypass.
 */
struct sched_obj {
	struct sched *s;	       /* owner */
	char *key;		       /* object key, owned */
	char etag[IDX_ETAG_MAX];       /* version, as listed */
	char name[STORE_NAME_LEN + 1]; /* data file name */
	uint64_t size;		       /* bytes */
	int64_t idx_id;		       /* row in the index */
	int fd;		 /* data file, open while refs > 0; -1 in bypass */
	int bypass;	 /* the cache cannot hold it: reads go to the store */
	uint32_t nparts; /* ceil(size / part_size) */
	uint8_t *part;	 /* lock: enum part_state per part */
	int *part_err;	 /* lock: -errno of each failed part */
	uint64_t *part_fill; /* lock: bytes of each FETCHING part written
			      * from its start, published every
			      * SCHED_FILL_STEP bytes: readers need not wait
			      * for the whole part */
	int64_t fail_ms;     /* lock: util_mono_ms() of the last failed part */
	uint32_t present;    /* lock: parts in PART_PRESENT */
	uint32_t fetched;    /* lock: parts fetched by this instance */
	atomic_int complete; /* every part present: reads take no lock */
	uint32_t cursor;     /* lock: next part to read ahead */
	unsigned refs;	     /* lock: references */
	unsigned users;	     /* lock: references from sched_obj_open() not
			      * yet put (open files, warms); refs >= users */
	unsigned generation; /* lock: bumped when its extents are dropped, so
			      * older commit records are not recorded */
	int stale;	     /* lock: replaced by a newer version */
	int needs_dir_sync;  /* lock: data file created, entry not durable */
	unsigned commit_epoch; /* commit thread only: last batch it was in */
	char commit_durable;   /* commit thread only: synced in that batch */
	int verified;	/* lock: MD5 checked (or queued) since the last fill */
	int refetched;	/* lock: dropped once after a bad MD5 */
	int in_table;	/* lock: reachable from s->table */
	int on_pending; /* lock: on the pending list */
	struct sched_obj *table_next;	/* lock: hash chain */
	struct sched_obj *pending_next; /* lock: pending list link */
	struct sched_obj *verify_next;	/* lock: verify queue link */
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
	unsigned generation; /* o->generation when the part finished */
};

struct sched {
	struct sched_config cfg;      /* copied at start */
	char *bucket;		      /* owned */
	struct client *client;	      /* borrowed */
	struct store *store;	      /* borrowed */
	struct idx *idx;	      /* borrowed */
	pthread_mutex_t lock;	      /* see DESIGN */
	pthread_mutex_t version_lock; /* see DESIGN */
	pthread_cond_t work_cond;     /* lock: a queue got work, or stopping */
	pthread_cond_t commit_cond;   /* lock: commits waiting, or stopping */
	pthread_cond_t evict_cond;    /* lock: eviction wanted, or stopping */
	pthread_cond_t space_cond;    /* lock: an eviction pass ended */
	pthread_cond_t verify_cond;   /* lock: objects to verify, or stopping */
	struct sched_obj *table[SCHED_TABLE_SIZE];     /* lock: key -> object */
	struct demand *demand_head, *demand_tail;      /* lock: FIFO */
	struct sched_obj *pending_head, *pending_tail; /* lock: FIFO */
	struct sched_obj *verify_head, *verify_tail;   /* lock: FIFO */
	size_t nverify;		    /* lock: objects queued or being verified */
	struct commit_rec *commits; /* lock: array of ncommits */
	size_t ncommits, commits_cap; /* lock */
	pthread_cond_t room_cond;     /* lock: the committer took a batch or the
				       * verifier finished an object */
	size_t commit_max;	      /* backlog bound, see SCHED_COMMIT_MAX */
	int64_t *touches;	      /* lock: ids of objects opened since the
				       * last commit, to touch in the index */
	size_t ntouches, touches_cap; /* lock */
	unsigned commit_epoch;	      /* commit thread only: batches so far */
	uint64_t cached_bytes;	      /* lock: bytes of every present part, on
				       * disk, recorded in the index or not */
	uint64_t inflight_bytes;      /* lock: bytes of parts being fetched */
	unsigned evict_passes;	      /* lock: eviction passes finished */
	int evict_wanted;	      /* lock: a worker is short of space */
	atomic_int stopping;	      /* set once by sched_free() */
	pthread_t *workers;	      /* cfg.workers threads */
	unsigned nworkers;	      /* started */
	pthread_t committer, evictor, verifier, janitor; /* service threads */
	int committer_started, evictor_started, verifier_started;
	int janitor_started;
	struct sched_stats stats; /* lock */
};

/* The group commit (commit.c). */
/* Queue [@off, @end) of @o for the committer (s->lock held); takes a
 * reference.  Returns 0 or -ENOMEM. */
int sched_commit_push_locked(struct sched *s, struct sched_obj *o, uint64_t off,
			     uint64_t end);
/* Record that object @id was used, in the committer's next transaction
 * (s->lock not held): an open of a cached version then writes nothing to
 * the index itself.  A touch lost to a full queue or to memory only ages
 * the object in the LRU order. */
void sched_touch_push(struct sched *s, int64_t id);
/* The commit backlog bound for this process's open-file limit, records. */
size_t sched_commit_max(void);
/* The commit thread's body; @arg is the struct sched. */
void *sched_committer_main(void *arg);

/* Shared helpers of sched.c. */
/* Chain @o on *@dead when @o is the last reference (s->lock held), for
 * sched_destroy_chain() after unlocking. */
void sched_unref_into(struct sched_obj *o, struct sched_obj **dead);
/* Destroy every object of a chain made by sched_unref_into(). */
void sched_destroy_chain(struct sched_obj *dead);
/* *@ts = now + @ms on CLOCK_REALTIME, the clock of pthread_cond_timedwait. */
void sched_deadline_after(struct timespec *ts, long ms);
uint64_t sched_part_off(const struct sched_obj *o, uint32_t p);
uint64_t sched_part_bytes(const struct sched_obj *o, uint32_t p);
/* Put part @p of @o on the demand queue (s->lock held); -ENOMEM. */
int sched_demand_push_locked(struct sched *s, struct sched_obj *o, uint32_t p);
uint64_t sched_part_end(const struct sched_obj *o, uint32_t p);
struct sched_obj *sched_table_find_locked(struct sched *s, const char *key);
void sched_table_remove_locked(struct sched *s, struct sched_obj *o);
/* Drop a reference with s->lock held; returns the object when that was
 * the last one, to destroy with sched_obj_destroy() after unlocking. */
struct sched_obj *sched_obj_unref_locked(struct sched_obj *o);
void sched_obj_destroy(struct sched_obj *o);
void sched_pending_push_locked(struct sched *s, struct sched_obj *o);
/* Forget every part of @o (s->lock held): absent, queued again unless
 * @requeue is 0, and older commit records void. */
void sched_obj_drop_parts_locked(struct sched_obj *o, int requeue);

/* evict.c: the eviction thread, and the reservation a worker makes
 * before a fetch.  sched_space_reserve_locked() returns 0 when @bytes fit
 * in the cache now (after waiting for one eviction pass if needed) and
 * adds them to s->inflight_bytes, which the caller takes them off when the
 * fetch ends; else -ENOSPC and nothing is reserved.  Called and returns
 * with s->lock held (dropped meanwhile). */
void *sched_evict_main(void *arg);
int sched_space_reserve_locked(struct sched *s, uint64_t bytes);
void sched_evict_kick_locked(struct sched *s);

/* janitor.c: the one-shot sweep of orphaned data files. */
void *sched_janitor_main(void *arg);

/* verify.c: the MD5 thread, and queueing an object that just filled. */
void *sched_verify_main(void *arg);
void sched_verify_queue_locked(struct sched *s, struct sched_obj *o);

#endif
