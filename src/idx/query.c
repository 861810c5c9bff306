// SPDX-License-Identifier: MIT
/*
 * The index's smaller calls: removing and counting objects,
 * dropping an object's extents, paging
 * through objects (LRU order for eviction, id order for the janitor), and
 * the stored directory listings.  Same locking as idx.c: one mutex around
 * every public call.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoardfs/idx.h"
#include "idx/idx_int.h"

int idx_object_remove(struct idx *x, int64_t object_id)
{
	int rc;

	idx_lock(x);
	/* One statement, so atomic; ON DELETE CASCADE drops the extents. */
	rc = idx_by_id_locked(x, IDX_ST_REMOVE, object_id, 0, 0,
			      "remove object");
	idx_unlock(x);
	return rc;
}

int idx_stats(struct idx *x, uint64_t *objects, uint64_t *cached_bytes)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(x);
	st = x->st[IDX_ST_STATS];
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = idx_errno(x, rc == SQLITE_DONE ? SQLITE_ERROR : rc,
			       "stats");
		goto out;
	}
	*objects = (uint64_t)sqlite3_column_int64(st, 0);
	*cached_bytes = (uint64_t)sqlite3_column_int64(st, 1);
	rc = 0;
out:
	idx_release(st);
	idx_unlock(x);
	return rc;
}

int idx_extents_drop(struct idx *x, int64_t object_id)
{
	int rc;

	idx_lock(x);
	rc = idx_by_id_locked(x, IDX_ST_EXTENTS_PURGE, object_id, 0, 0,
			      "drop extents");
	idx_unlock(x);
	return rc;
}

void idx_entries_clear(struct idx_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].bucket);
		free(v[i].key);
		memset(&v[i], 0, sizeof(v[i]));
	}
}

/* Copy one result row of a PAGE statement into @e. */
static int idx_row_entry(sqlite3_stmt *st, struct idx_entry *e)
{
	const unsigned char *etag = sqlite3_column_text(st, 3);
	int key_len = sqlite3_column_bytes(st, 2);
	const void *key = sqlite3_column_blob(st, 2);

	memset(e, 0, sizeof(*e));
	e->id = sqlite3_column_int64(st, 0);
	e->bucket = strdup((const char *)sqlite3_column_text(st, 1));
	e->key = malloc((size_t)key_len + 1);
	if (!e->bucket || !e->key) {
		free(e->bucket);
		free(e->key);
		return -ENOMEM;
	}
	if (key_len > 0)
		memcpy(e->key, key, (size_t)key_len);
	e->key[key_len] = '\0';
	snprintf(e->etag, sizeof(e->etag), "%s",
		 etag ? (const char *)etag : "");
	e->size = (uint64_t)sqlite3_column_int64(st, 4);
	e->atime_sec = sqlite3_column_int64(st, 5);
	e->cached_bytes = (uint64_t)sqlite3_column_int64(st, 6);
	return 0;
}

static int idx_page(struct idx *x, enum idx_stmt_id id, int64_t after_atime,
		    int64_t after_id, size_t max, struct idx_entry *out,
		    size_t *n)
{
	sqlite3_stmt *st;
	int rc = 0;

	*n = 0;
	idx_lock(x);
	st = x->st[id];
	if (sqlite3_bind_int64(st, 1, after_atime) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, after_id) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, (sqlite3_int64)max) != SQLITE_OK) {
		idx_release(st);
		rc = idx_bind_failed(x, "page objects");
		goto out;
	}
	while (*n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = idx_row_entry(st, &out[*n]);
		if (rc != 0)
			break;
		(*n)++;
	}
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		rc = 0;
	else if (rc > 0)
		rc = idx_errno(x, rc, "page objects");
	idx_release(st);
	if (rc != 0) {
		idx_entries_clear(out, *n);
		*n = 0;
	}
out:
	idx_unlock(x);
	return rc;
}

int idx_page_lru(struct idx *x, int64_t after_atime, int64_t after_id,
		 size_t max, struct idx_entry *out, size_t *n)
{
	return idx_page(x, IDX_ST_PAGE_LRU, after_atime, after_id, max, out, n);
}

int idx_page_by_id(struct idx *x, int64_t after_id, size_t max,
		   struct idx_entry *out, size_t *n)
{
	return idx_page(x, IDX_ST_PAGE_ID, 0, after_id, max, out, n);
}

int idx_listing_put(struct idx *x, const char *bucket, const char *prefix,
		    int64_t fetched_sec, const void *body, size_t len)
{
	sqlite3_stmt *st;
	int rc;

	if (len > INT32_MAX)
		return -EFBIG;
	idx_lock(x);
	st = x->st[IDX_ST_LISTING_PUT];
	if (sqlite3_bind_text(st, 1, bucket, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_blob(st, 2, prefix, (int)strlen(prefix),
			      SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, fetched_sec) != SQLITE_OK ||
	    sqlite3_bind_blob(st, 4, body, (int)len, SQLITE_STATIC) !=
		    SQLITE_OK) {
		idx_release(st);
		rc = idx_bind_failed(x, "store listing");
	} else {
		rc = idx_step_done(x, IDX_ST_LISTING_PUT, "store listing");
	}
	idx_unlock(x);
	return rc;
}

int idx_listing_get(struct idx *x, const char *bucket, const char *prefix,
		    int64_t *fetched_sec, void **body, size_t *len)
{
	sqlite3_stmt *st;
	int rc;

	*body = NULL;
	*len = 0;
	idx_lock(x);
	st = x->st[IDX_ST_LISTING_GET];
	if (sqlite3_bind_text(st, 1, bucket, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_blob(st, 2, prefix, (int)strlen(prefix),
			      SQLITE_STATIC) != SQLITE_OK) {
		idx_release(st);
		rc = idx_bind_failed(x, "load listing");
		goto out;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = -ENOENT;
	} else if (rc != SQLITE_ROW) {
		rc = idx_errno(x, rc, "load listing");
	} else {
		int n = sqlite3_column_bytes(st, 1);
		const void *p = sqlite3_column_blob(st, 1);

		*fetched_sec = sqlite3_column_int64(st, 0);
		*body = malloc(n > 0 ? (size_t)n : 1);
		if (!*body) {
			rc = -ENOMEM;
		} else {
			if (n > 0)
				memcpy(*body, p, (size_t)n);
			*len = (size_t)n;
			rc = 0;
		}
	}
	idx_release(st);
out:
	idx_unlock(x);
	return rc;
}
