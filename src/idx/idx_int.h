/* SPDX-License-Identifier: MIT */
/*
 * Internal shapes of the index, shared by idx.c (opening, schema, objects
 * and extents) and query.c (paged object queries and stored listings).
 */
#ifndef HOARDFS_IDX_INT_H
#define HOARDFS_IDX_INT_H

#include <pthread.h>

#include <sqlite3.h>

/* The cached statements, by purpose. */
enum idx_stmt_id {
	IDX_ST_BEGIN,		/* start a write transaction */
	IDX_ST_COMMIT,		/* commit it */
	IDX_ST_ROLLBACK,	/* abandon it */
	IDX_ST_LOOKUP,		/* object row by (bucket, key) */
	IDX_ST_INSERT,		/* new object row */
	IDX_ST_UPDATE,		/* new version of an object row */
	IDX_ST_TOUCH,		/* set an object's atime */
	IDX_ST_REMOVE,		/* delete an object (extents cascade) */
	IDX_ST_EXTENTS_PURGE,	/* delete all extents of an object */
	IDX_ST_EXTENTS_LOAD,	/* all extents of an object, by off */
	IDX_ST_EXTENTS_OVERLAP, /* extents overlapping or touching a range */
	IDX_ST_EXTENTS_DELETE,	/* delete the extents found by OVERLAP */
	IDX_ST_EXTENTS_INSERT,	/* insert one extent */
	IDX_ST_STATS,		/* object count and extent bytes */
	IDX_ST_PAGE_LRU,	/* objects by (atime, id), after a cursor */
	IDX_ST_PAGE_ID,		/* objects by id, after a cursor */
	IDX_ST_LISTING_GET,	/* a directory listing by (bucket, prefix) */
	IDX_ST_LISTING_PUT,	/* insert or replace one */
	IDX_ST_COUNT
};

/*
 * Invariant: between public calls no transaction is open and every
 * statement in st[] is reset.  The extents table holds, per object,
 * disjoint non-touching non-empty ranges (what idx_extents_commit keeps).
 */
struct idx {
	pthread_mutex_t lock;		/* held for all of every public call */
	sqlite3 *db;			/* the one connection, under lock */
	char *path;			/* database file path, for log lines */
	sqlite3_stmt *st[IDX_ST_COUNT]; /* prepared statements, by id */
};

/* The one mapping from a SQLite result code to -errno; logs @what. */
int idx_errno(struct idx *x, int rc, const char *what);
/* A bind failed: log and map it. */
int idx_bind_failed(struct idx *x, const char *what);
/* Reset and clear the bindings of a cached statement. */
void idx_release(sqlite3_stmt *st);
/* Take and drop the index's one mutex (held for all of a public call). */
void idx_lock(struct idx *x);
void idx_unlock(struct idx *x);
/* Step statement @id to its end; 0 or -errno. */
int idx_step_done(struct idx *x, enum idx_stmt_id id, const char *what);
/* Run statement @id with ?1 = @object_id and, when @has_arg, ?2 = @arg. */
int idx_by_id_locked(struct idx *x, enum idx_stmt_id id, int64_t object_id,
		     int has_arg, int64_t arg, const char *what);

#endif
