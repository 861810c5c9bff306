// SPDX-License-Identifier: MIT
/*
 * The scheduler's group commit: finished parts become durable (one
 * fdatasync per file, or one syncfs for a batch of many files) and are
 * recorded in the index in one transaction, together with the access
 * times of objects opened since the last one.  The commit backlog is
 * bounded; fetch workers wait on it (sched.c).  See the DESIGN comment in
 * sched.c for the locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hoardfs/log.h"
#include "hoardfs/util.h"
#include "sched/sched_int.h"

int sched_commit_push_locked(struct sched *s, struct sched_obj *o, uint64_t off,
			     uint64_t end)
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
	s->commits[s->ncommits++] = (struct commit_rec){
		.o = o, .off = off, .end = end, .generation = o->generation};
	pthread_cond_signal(&s->commit_cond);
	return 0;
}

void sched_touch_push(struct sched *s, int64_t id)
{
	pthread_mutex_lock(&s->lock);
	if (s->ntouches == s->touches_cap && s->touches_cap < SCHED_TOUCH_MAX) {
		size_t cap = s->touches_cap ? 2 * s->touches_cap : 256;
		int64_t *v = realloc(s->touches, cap * sizeof(*v));

		if (v) {
			s->touches = v;
			s->touches_cap = cap;
		}
	}
	if (s->ntouches < s->touches_cap)
		s->touches[s->ntouches++] = id;
	/* The first touch starts the committer's clock. */
	if (s->ntouches == 1)
		pthread_cond_signal(&s->commit_cond);
	pthread_mutex_unlock(&s->lock);
}

size_t sched_commit_max(void)
{
	struct rlimit lim;
	size_t max = SCHED_COMMIT_MAX;

	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur / 8 < max)
		max = lim.rlim_cur / 8;
	return max < SCHED_COMMIT_MIN ? SCHED_COMMIT_MIN : max;
}

/* Mark each record of a distinct file of the batch as the first of it
 * in batch @epoch; returns how many distinct files there are. */
static size_t commit_mark_files(const struct commit_rec *v, size_t n,
				unsigned epoch)
{
	size_t files = 0;

	for (size_t i = 0; i < n; i++) {
		struct sched_obj *o = v[i].o;

		if (o->commit_epoch == epoch)
			continue;
		o->commit_epoch = epoch;
		o->commit_durable = 0;
		files++;
	}
	return files;
}

/* Make a batch of many files durable with one syncfs(2).  Returns 0 when
 * every record's bytes and entries are durable. */
static int commit_sync_all(struct sched *s, const struct commit_rec *v,
			   size_t n, char *durable)
{
	if (store_sync_all(s->store) != 0)
		return -EIO;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		v[i].o->needs_dir_sync = 0;
		durable[i] = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Make a batch of few files durable: one fdatasync per file, and one
 * sync per directory of new files.  Fills @durable. */
static void commit_sync_each(struct sched *s, const struct commit_rec *v,
			     size_t n, char *durable)
{
	unsigned char sub_state[256] = {0}; /* 0 unsynced, 1 ok, 2 failed */
	unsigned epoch = ++s->commit_epoch;
	int dir_sync;

	for (size_t i = 0; i < n; i++) {
		struct sched_obj *o = v[i].o;
		unsigned sub;

		/* One fdatasync per file per batch: reuse an earlier one. */
		if (o->commit_epoch == epoch) {
			durable[i] = o->commit_durable;
			continue;
		}
		o->commit_epoch = epoch;
		o->commit_durable = 0;
		pthread_mutex_lock(&s->lock);
		dir_sync = o->needs_dir_sync;
		pthread_mutex_unlock(&s->lock);
		if (fdatasync(o->fd) != 0) {
			log_error("commit: fdatasync of s3://%s/%s: %s",
				  s->bucket, o->key, strerror(errno));
			continue;
		}
		/* And one sync per directory of new files per batch. */
		sub = (unsigned)strtoul((char[3]){o->name[0], o->name[1], 0},
					NULL, 16);
		if (dir_sync && !sub_state[sub])
			sub_state[sub] =
				store_sync_dirs(s->store, o->name) == 0 ? 1 : 2;
		if (dir_sync && sub_state[sub] != 1)
			continue;
		durable[i] = o->commit_durable = 1;
		if (dir_sync) {
			pthread_mutex_lock(&s->lock);
			o->needs_dir_sync = 0;
			pthread_mutex_unlock(&s->lock);
		}
	}
}

/* Make one batch durable and record it with the queued touches (object
 * ids).  Runs without s->lock; the commit marks of objects are the commit
 * thread's own. */
static void commit_batch(struct sched *s, const struct commit_rec *v, size_t n,
			 const int64_t *touches, size_t ntouches)
{
	struct idx_extent_rec *recs =
		calloc(n + ntouches ? n + ntouches : 1, sizeof(*recs));
	char *durable = calloc(n ? n : 1, 1);
	size_t nrecs = 0;
	int rc;

	if (!recs || !durable) {
		log_error("commit: out of memory; %zu parts stay unrecorded",
			  n);
		goto out;
	}
	if (commit_mark_files(v, n, ++s->commit_epoch) < SCHED_SYNCFS_MIN ||
	    commit_sync_all(s, v, n, durable) != 0)
		commit_sync_each(s, v, n, durable);
	pthread_mutex_lock(&s->version_lock);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		const struct sched_obj *o = v[i].o;

		if (!durable[i] || o->stale || o->generation != v[i].generation)
			continue;
		recs[nrecs++] = (struct idx_extent_rec){
			.object_id = o->idx_id,
			.off = v[i].off,
			.end = v[i].end,
		};
	}
	pthread_mutex_unlock(&s->lock);
	/* An empty extent only touches its object. */
	for (size_t i = 0; i < ntouches; i++)
		recs[nrecs++] =
			(struct idx_extent_rec){.object_id = touches[i]};
	rc = idx_extents_commit(s->idx, recs, nrecs, util_now_sec());
	pthread_mutex_unlock(&s->version_lock);
	if (rc != 0)
		log_error("commit: recording %zu extents: %s", nrecs,
			  strerror(-rc));
out:
	free(durable);
	free(recs);
}

void *sched_committer_main(void *arg)
{
	struct sched *s = arg;
	struct timespec ts;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct commit_rec *v;
		struct sched_obj *dead = NULL;
		int64_t *touches;
		size_t n, ntouches;

		/* Parts go at once; touches wait to share a transaction. */
		while (s->ncommits == 0 && !atomic_load(&s->stopping)) {
			if (s->ntouches == 0) {
				pthread_cond_wait(&s->commit_cond, &s->lock);
				continue;
			}
			sched_deadline_after(&ts, SCHED_TOUCH_DELAY_MS);
			if (pthread_cond_timedwait(&s->commit_cond, &s->lock,
						   &ts) == ETIMEDOUT)
				break;
		}
		if (s->ncommits == 0 && s->ntouches == 0)
			break; /* stopping with nothing left */
		/* A few parts: wait a moment for enough files to make one
		 * syncfs cheaper than a sync each (a journal commit each). */
		if (s->ncommits < SCHED_SYNCFS_MIN &&
		    !atomic_load(&s->stopping)) {
			sched_deadline_after(&ts, SCHED_COMMIT_GATHER_MS);
			while (s->ncommits < SCHED_SYNCFS_MIN &&
			       !atomic_load(&s->stopping) &&
			       pthread_cond_timedwait(&s->commit_cond, &s->lock,
						      &ts) != ETIMEDOUT)
				;
		}
		v = s->commits;
		n = s->ncommits;
		s->commits = NULL;
		s->ncommits = s->commits_cap = 0;
		touches = s->touches;
		ntouches = s->ntouches;
		s->touches = NULL;
		s->ntouches = s->touches_cap = 0;
		pthread_cond_broadcast(&s->room_cond);
		pthread_mutex_unlock(&s->lock);
		commit_batch(s, v, n, touches, ntouches);
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < n; i++)
			sched_unref_into(v[i].o, &dead);
		pthread_mutex_unlock(&s->lock);
		sched_destroy_chain(dead);
		free(v);
		free(touches);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}
