// SPDX-License-Identifier: MIT
/*
 * The reader's side of the scheduler: waiting for a range (demanding its
 * parts ahead of read-ahead), reading around a cache that cannot hold the
 * bytes, and answering what is cached.  See the DESIGN comment in sched.c
 * for the locks.
 */
#include <errno.h>
#include <string.h>

#include "hoardfs/log.h"
#include "hoardfs/util.h"
#include "sched/sched_int.h"

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
	if (o->bypass)
		return -ENOSPC;
	first = (uint32_t)(off / s->cfg.part_size);
	last = (uint32_t)((end - 1) / s->cfg.part_size);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		int missing = 0;

		for (uint32_t p = first; p <= last && rc == 0; p++) {
			uint64_t need = (end < sched_part_end(o, p)
						 ? end
						 : sched_part_end(o, p)) -
					sched_part_off(o, p);

			switch (o->part[p]) {
			case PART_PRESENT:
				break;
			case PART_FETCHING:
				/* Written up to the range already. */
				if (o->part_fill[p] < need)
					missing = 1;
				break;
			case PART_FAILED:
				/* The error stands for a moment, so the
				 * kernel's second read of a page whose
				 * read-ahead failed does not run the client's
				 * retries again. */
				rc = o->part_err[p];
				if (util_mono_ms() - o->fail_ms >=
				    SCHED_FAIL_MEMORY_MS)
					o->part[p] = PART_ABSENT;
				break;
			case PART_ABSENT:
			case PART_QUEUED:
				rc = sched_demand_push_locked(s, o, p);
				missing = 1;
				break;
			default: /* DEMANDED */
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

/* Copies a GET body into a caller's buffer. */
struct direct_sink {
	char *buf;
	uint64_t off; /* object offset of buf[0] */
	size_t len;   /* bytes copied */
};

static int direct_body(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct direct_sink *d = arg;

	memcpy(d->buf + (off - d->off), buf, len);
	d->len = off - d->off + len;
	return 0;
}

ssize_t sched_obj_read_direct(struct sched_obj *o, uint64_t off, size_t len,
			      void *buf)
{
	struct direct_sink d = {.buf = buf, .off = off, .len = 0};
	int rc;

	if (off >= o->size || len == 0)
		return 0;
	if (len > o->size - off)
		len = (size_t)(o->size - off);
	rc = client_get(o->s->client, o->key, off, len, o->etag, direct_body,
			&d, NULL, NULL);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&o->s->lock);
	o->s->stats.bytes_served_direct += d.len;
	pthread_mutex_unlock(&o->s->lock);
	return (ssize_t)d.len;
}

int sched_obj_fd(const struct sched_obj *o)
{
	return o->fd;
}

void sched_stats_get(struct sched *s, struct sched_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->cached_bytes = s->cached_bytes;
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
	o = sched_table_find_locked(s, key);
	if (o && strcmp(o->etag, etag) == 0) {
		for (uint32_t p = 0; p < o->nparts; p++) {
			if (o->part[p] == PART_PRESENT)
				*bytes += sched_part_bytes(o, p);
			else if (o->part[p] != PART_FAILED &&
				 o->part[p] != PART_ABSENT)
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
