// SPDX-License-Identifier: MIT
/*
 * The janitor: once per mount, in the background, removes data files that
 * the index does not name (left by a crash between creating a file and
 * recording its object, by an index that was found corrupt and replaced,
 * or by an older version whose removal failed).  Mounting never waits for
 * it, so a cache of 100,000 objects mounts as fast as an empty one.
 *
 * Rows whose data file is missing need no sweep: opening such an object
 * finds the file absent and drops its extents (sched.c, obj_attach()).
 * A file newer than the start of the sweep is left alone: it may belong to
 * an object opened while the sweep ran.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hoardfs/log.h"
#include "hoardfs/util.h"
#include "sched/sched_int.h"

#define JANITOR_PAGE	  1024 /* index rows per query */
#define JANITOR_GRACE_SEC 2    /* mtime granularity margin */

/* What the sweep knows: the names the index claims, sorted. */
struct janitor {
	struct sched *s;
	char (*names)[STORE_NAME_LEN + 1]; /* sorted data file names */
	size_t n, cap;
	int64_t started_sec; /* files modified since are left alone */
	uint64_t removed, removed_bytes;
};

static int name_cmp(const void *a, const void *b)
{
	return memcmp(a, b, STORE_NAME_LEN);
}

/* Read every object of the index and compute its data file name. */
static int janitor_load(struct janitor *j)
{
	struct idx_entry v[JANITOR_PAGE];
	int64_t after = 0;
	size_t n;
	int rc;

	do {
		rc = idx_page_by_id(j->s->idx, after, JANITOR_PAGE, v, &n);
		if (rc != 0)
			return rc;
		for (size_t i = 0; i < n && rc == 0; i++) {
			if (j->n == j->cap) {
				size_t cap = j->cap ? 2 * j->cap : 4096;
				void *p = realloc(j->names,
						  cap * sizeof(*j->names));

				if (!p) {
					rc = -ENOMEM;
					break;
				}
				j->names = p;
				j->cap = cap;
			}
			rc = store_name(v[i].bucket, v[i].key, v[i].etag,
					j->names[j->n]);
			j->n += rc == 0;
		}
		if (n > 0)
			after = v[n - 1].id;
		idx_entries_clear(v, n);
	} while (rc == 0 && n == JANITOR_PAGE && !atomic_load(&j->s->stopping));
	if (j->n > 0) /* qsort wants an array, even of none */
		qsort(j->names, j->n, sizeof(*j->names), name_cmp);
	return rc;
}

static int janitor_visit(void *arg, const char *name, const struct stat *st)
{
	struct janitor *j = arg;

	if (atomic_load(&j->s->stopping))
		return -ECANCELED;
	if (st->st_mtime >= j->started_sec - JANITOR_GRACE_SEC ||
	    (j->n &&
	     bsearch(name, j->names, j->n, sizeof(*j->names), name_cmp)))
		return 0;
	if (store_file_remove(j->s->store, name) == 0) {
		j->removed++;
		j->removed_bytes += (uint64_t)st->st_blocks * 512;
	}
	return 0;
}

void *sched_janitor_main(void *arg)
{
	struct janitor j = {.s = arg, .started_sec = util_now_sec()};
	int rc = janitor_load(&j);

	if (rc == 0)
		rc = store_walk(j.s->store, janitor_visit, &j);
	if (rc != 0 && rc != -ECANCELED)
		log_warn("janitor: sweep of the cache stopped: %s",
			 strerror(-rc));
	if (j.removed)
		log_info("janitor: removed %llu orphaned data files (%llu "
			 "bytes)",
			 (unsigned long long)j.removed,
			 (unsigned long long)j.removed_bytes);
	free(j.names);
	return NULL;
}
