// SPDX-License-Identifier: MIT
/*
 * Warming a whole object for `hoardfs warm` (sched_obj_wait_complete), and
 * the index figure the status document shows.  A warm is neither a reader
 * (it does not count as bytes served, and does not jump the read-ahead
 * queue) nor a fetch path of its own: it waits for the same parts,
 * fetched by the same workers, as readers of the object.  See the DESIGN
 * comment in sched.c for the locks.
 */
#include <errno.h>
#include <time.h>

#include "sched/sched_int.h"

/* How long a warm sleeps before looking at its parts again when no part
 * finished: a version replaced meanwhile (stale) is read ahead by nobody,
 * and nothing signals its waiters. */
#define SCHED_WARM_RECHECK_MS 1000

int sched_obj_wait_complete(struct sched_obj *o)
{
	struct sched *s = o->s;
	struct timespec ts;
	int rc = 0;

	if (atomic_load(&o->complete))
		return 0;
	pthread_mutex_lock(&s->lock);
	for (unsigned pass = 0;; pass++) {
		int missing = 0;

		/* The cache cannot hold it (full or failing disk). */
		if (o->bypass) {
			rc = -ENOSPC;
			break;
		}
		for (uint32_t p = 0; p < o->nparts && rc == 0; p++) {
			switch (o->part[p]) {
			case PART_PRESENT:
				break;
			case PART_FAILED:
				if (pass > 0) {
					/* Failed while we waited: report it;
					 * the next wait tries again. */
					rc = o->part_err[p];
					o->part[p] = PART_ABSENT;
					break;
				}
				/* An older failure: try it once more. */
				/* fall through */
			case PART_ABSENT:
				/* Not queued (an older failure, or read-ahead
				 * found no room): demand it, so that a lack
				 * of room fails it with -ENOSPC. */
				rc = sched_demand_push_locked(s, o, p);
				missing = 1;
				break;
			case PART_QUEUED:
				/* Read-ahead takes it, after every part a
				 * reader waits for; a stale version is read
				 * ahead by nobody. */
				if (o->stale)
					rc = sched_demand_push_locked(s, o, p);
				missing = 1;
				break;
			default: /* DEMANDED or FETCHING */
				missing = 1;
				break;
			}
		}
		if (rc != 0 || !missing)
			break;
		if (atomic_load(&s->stopping)) {
			rc = -ECANCELED;
			break;
		}
		sched_deadline_after(&ts, SCHED_WARM_RECHECK_MS);
		pthread_cond_timedwait(&o->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int sched_index_objects(struct sched *s, uint64_t *objects)
{
	uint64_t bytes;

	return idx_stats(s->idx, objects, &bytes);
}
