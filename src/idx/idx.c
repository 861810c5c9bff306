// SPDX-License-Identifier: MIT
/*
 * The cache index on SQLite (see idx.h): which object versions the store
 * holds, and which byte extents of each are on disk.  This file is the only
 * one that includes sqlite3.h.  It does not touch data files, and it
 * trusts its callers to record an extent only after its bytes are durable.
 *
 * DESIGN
 * Connection and locks: one SQLite connection, opened SQLITE_OPEN_NOMUTEX
 * because struct idx's own pthread mutex already serializes every public
 * call from lock to unlock, statements included; no public function calls
 * another public function (they share *_locked helpers instead), so the
 * mutex is never taken twice.  Calls block on disk I/O, and on another
 * process's write lock for up to IDX_BUSY_TIMEOUT_MS.
 * Transactions: writes that must be atomic (a version change with its
 * extent purge, a batch of extents) run in BEGIN IMMEDIATE ... COMMIT, so
 * the write lock is taken up front and a busy database fails at BEGIN, not
 * half-way.  Any failure rolls the whole transaction back.
 * Durability: WAL with synchronous=NORMAL: a commit survives a process
 * crash, and at worst the last commits are lost on power loss, which only
 * makes the index claim fewer bytes than the data files hold: safe.
 * Statements: prepared once at open (SQLITE_PREPARE_PERSISTENT), kept in
 * x->st[], and reset after every use so that no read transaction stays
 * open and blocks WAL checkpoints.
 * Schema: versioned by PRAGMA user_version; idx_migrations[] lists the
 * steps from each version to the next, applied in one transaction at open.
 * Errors: idx_errno() is the only place that turns SQLite result codes into
 * -errno, and it logs SQLite's message.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "hoardfs/idx.h"
#include "idx/idx_int.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

/*
 * How long a call waits for another process (e.g. a `hoardfs stats` run
 * next to the daemon) to release its lock before failing with -EBUSY:
 * long enough for any single commit, short enough not to hang a read.
 */
#define IDX_BUSY_TIMEOUT_MS 5000
#define IDX_FILE_MODE	    0600 /* the index names private objects */

/* One step of the schema: the SQL that takes version to_version - 1 to
 * to_version. */
struct idx_migration {
	int to_version;	 /* user_version after this step */
	const char *sql; /* statements run in the migration transaction */
};

/*
 * The schema history.  Append a step to change the schema (e.g. ALTER
 * TABLE objects ADD COLUMN ...); never edit a step that has shipped.
 */
static const struct idx_migration idx_migrations[] = {
	{1, "CREATE TABLE objects("
	    " id INTEGER PRIMARY KEY,"
	    " bucket TEXT NOT NULL,"
	    " key BLOB NOT NULL," /* bytes, exact for any key */
	    " etag TEXT NOT NULL,"
	    " size INTEGER NOT NULL,"
	    " mtime INTEGER NOT NULL,"
	    " atime INTEGER NOT NULL,"
	    " UNIQUE(bucket, key));"
	    "CREATE INDEX objects_atime ON objects(atime);"
	    "CREATE TABLE extents("
	    " object_id INTEGER NOT NULL"
	    "  REFERENCES objects(id) ON DELETE CASCADE,"
	    " off INTEGER NOT NULL,"
	    " end INTEGER NOT NULL,"
	    " PRIMARY KEY(object_id, off)) WITHOUT ROWID;"},
	/* Directory listings, so a remount within the metadata TTL needs no
	 * LIST; the body's format belongs to the filesystem layer. */
	{2, "CREATE TABLE listings("
	    " bucket TEXT NOT NULL,"
	    " prefix BLOB NOT NULL,"
	    " fetched INTEGER NOT NULL," /* wall-clock seconds */
	    " body BLOB NOT NULL,"
	    " PRIMARY KEY(bucket, prefix)) WITHOUT ROWID;"},
};

#define IDX_N_MIGRATIONS (sizeof(idx_migrations) / sizeof(idx_migrations[0]))
/* The schema this build writes: the last step's version. */
#define IDX_SCHEMA_VERSION 2

_Static_assert(IDX_N_MIGRATIONS == IDX_SCHEMA_VERSION,
	       "one migration step per schema version");

static const char *const idx_stmt_sql[IDX_ST_COUNT] = {
	[IDX_ST_BEGIN] = "BEGIN IMMEDIATE",
	[IDX_ST_COMMIT] = "COMMIT",
	[IDX_ST_ROLLBACK] = "ROLLBACK",
	[IDX_ST_LOOKUP] = "SELECT id, etag, size, mtime, atime FROM objects"
			  " WHERE bucket = ?1 AND key = ?2",
	[IDX_ST_INSERT] = "INSERT INTO objects(bucket, key, etag, size, mtime,"
			  " atime) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[IDX_ST_UPDATE] = "UPDATE objects SET etag = ?2, size = ?3, mtime = ?4,"
			  " atime = ?5 WHERE id = ?1",
	[IDX_ST_TOUCH] = "UPDATE objects SET atime = ?2 WHERE id = ?1",
	[IDX_ST_REMOVE] = "DELETE FROM objects WHERE id = ?1",
	[IDX_ST_EXTENTS_PURGE] = "DELETE FROM extents WHERE object_id = ?1",
	[IDX_ST_EXTENTS_LOAD] = "SELECT off, end FROM extents"
				" WHERE object_id = ?1 ORDER BY off",
	/*
	 * Extents of ?1 overlapping or touching [?2, ?3).  The lower bound
	 * on off (the last extent starting at or before ?2) lets SQLite
	 * range-scan the primary key instead of reading every extent from
	 * offset 0: the table is coalesced, so no earlier extent can reach
	 * ?2.
	 */
	[IDX_ST_EXTENTS_OVERLAP] =
		"SELECT off, end FROM extents"
		" WHERE object_id = ?1 AND off <= ?3 AND end >= ?2"
		" AND off >= coalesce((SELECT off FROM extents"
		"  WHERE object_id = ?1 AND off <= ?2"
		"  ORDER BY off DESC LIMIT 1), 0)",
	/* The same rows, given ?2 = the least off that OVERLAP returned. */
	[IDX_ST_EXTENTS_DELETE] = "DELETE FROM extents WHERE object_id = ?1"
				  " AND off >= ?2 AND off <= ?3 AND end >= ?4",
	[IDX_ST_EXTENTS_INSERT] = "INSERT INTO extents(object_id, off, end)"
				  " VALUES (?1, ?2, ?3)",
	[IDX_ST_STATS] = "SELECT (SELECT count(*) FROM objects),"
			 " (SELECT coalesce(sum(end - off), 0) FROM extents)",
	/* Row values compare (atime, id) as a pair (SQLite >= 3.15); the
	 * objects_atime index serves the order. */
	[IDX_ST_PAGE_LRU] = "SELECT id, bucket, key, etag, size, atime,"
			    " (SELECT coalesce(sum(end - off), 0) FROM extents"
			    "  WHERE object_id = objects.id)"
			    " FROM objects WHERE (atime, id) > (?1, ?2)"
			    " ORDER BY atime, id LIMIT ?3",
	[IDX_ST_PAGE_ID] = "SELECT id, bucket, key, etag, size, atime,"
			   " (SELECT coalesce(sum(end - off), 0) FROM extents"
			   "  WHERE object_id = objects.id)"
			   " FROM objects WHERE id > ?2 ORDER BY id LIMIT ?3",
	[IDX_ST_LISTING_GET] = "SELECT fetched, body FROM listings"
			       " WHERE bucket = ?1 AND prefix = ?2",
	[IDX_ST_LISTING_PUT] = "INSERT OR REPLACE INTO listings(bucket, prefix,"
			       " fetched, body) VALUES (?1, ?2, ?3, ?4)",
};

/*
 * idx_errno - the one mapping from a SQLite result code (primary or
 * extended) to -errno.  Logs @what and SQLite's message for the
 * connection; call it before resetting the failed statement.
 */
int idx_errno(struct idx *x, int rc, const char *what)
{
	const char *msg = x->db ? sqlite3_errmsg(x->db) : sqlite3_errstr(rc);

	switch (rc & 0xff) {
	case SQLITE_FULL:
		log_error("idx: %s: %s: disk full: %s", x->path, what, msg);
		return -ENOSPC;
	case SQLITE_NOMEM:
		log_error("idx: %s: %s: out of memory: %s", x->path, what, msg);
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		log_error("idx: %s: %s: database still locked after %d ms: %s",
			  x->path, what, IDX_BUSY_TIMEOUT_MS, msg);
		return -EBUSY;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		log_error("idx: %s: %s: database is corrupt or not a SQLite "
			  "database (remove it to start an empty cache): %s",
			  x->path, what, msg);
		return -EIO;
	default:
		log_error("idx: %s: %s: SQLite error %d: %s", x->path, what, rc,
			  msg);
		return -EIO;
	}
}

/* idx_bind_failed - map the error left by a failed sqlite3_bind_*(). */
int idx_bind_failed(struct idx *x, const char *what)
{
	return idx_errno(x, sqlite3_extended_errcode(x->db), what);
}

/* idx_release - reset @st (NULL is a no-op) and drop its bindings, so it
 * holds no read transaction and no pointer into the caller's memory. */
void idx_release(sqlite3_stmt *st)
{
	if (!st)
		return;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

void idx_lock(struct idx *x)
{
	int err = pthread_mutex_lock(&x->lock);

	assert(err == 0);
	(void)err;
}

void idx_unlock(struct idx *x)
{
	int err = pthread_mutex_unlock(&x->lock);

	assert(err == 0);
	(void)err;
}

/*
 * idx_step_done - run a cached statement that returns no rows (bindings
 * already set) and reset it.  Returns 0 or -errno.
 */
int idx_step_done(struct idx *x, enum idx_stmt_id id, const char *what)
{
	int rc = sqlite3_step(x->st[id]);

	rc = rc == SQLITE_DONE ? 0 : idx_errno(x, rc, what);
	idx_release(x->st[id]);
	return rc;
}

/* idx_tx_begin - BEGIN IMMEDIATE; waits up to the busy timeout. */
static int idx_tx_begin(struct idx *x, const char *what)
{
	assert(sqlite3_get_autocommit(x->db));
	return idx_step_done(x, IDX_ST_BEGIN, what);
}

/*
 * idx_tx_end - COMMIT when @rc is 0, else (or if COMMIT fails) ROLLBACK.
 * Returns @rc, or the COMMIT error.
 */
static int idx_tx_end(struct idx *x, int rc, const char *what)
{
	if (rc == 0)
		rc = idx_step_done(x, IDX_ST_COMMIT, what);
	/* A failed COMMIT may leave the transaction open, or SQLite may
	 * already have rolled back after an I/O error. */
	if (rc != 0 && !sqlite3_get_autocommit(x->db) &&
	    idx_step_done(x, IDX_ST_ROLLBACK, what) != 0)
		log_error("idx: %s: %s: rollback failed", x->path, what);
	assert(sqlite3_get_autocommit(x->db));
	return rc;
}

/*
 * idx_exec - run @sql (one or more statements, no rows wanted) outside
 * the statement cache; for open-time pragmas and migrations.
 */
static int idx_exec(struct idx *x, const char *sql, const char *what)
{
	int rc = sqlite3_exec(x->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : idx_errno(x, rc, what);
}

/*
 * idx_pragma_int - run a pragma that returns one integer row (e.g.
 * "PRAGMA user_version") and store the value in *@val.
 */
static int idx_pragma_int(struct idx *x, const char *sql, int64_t *val)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(x->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		rc = idx_errno(x, rc, sql);
		goto out;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = idx_errno(x, rc == SQLITE_DONE ? SQLITE_ERROR : rc, sql);
		goto out;
	}
	*val = sqlite3_column_int64(st, 0);
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/*
 * idx_set_wal - switch to WAL.  SQLite answers with the mode it chose; a
 * filesystem without shared memory support keeps the rollback journal,
 * which is slower but still correct, so that only warns.
 */
static int idx_set_wal(struct idx *x)
{
	sqlite3_stmt *st = NULL;
	const char *mode;
	int rc;

	rc = sqlite3_prepare_v2(x->db, "PRAGMA journal_mode=WAL", -1, &st,
				NULL);
	if (rc != SQLITE_OK) {
		rc = idx_errno(x, rc, "set WAL mode");
		goto out;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = idx_errno(x, rc, "set WAL mode");
		goto out;
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	if (!mode || strcmp(mode, "wal") != 0)
		log_warn("idx: %s: journal mode is %s, not wal", x->path,
			 mode ? mode : "unknown");
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/*
 * idx_migrate - bring the schema to IDX_SCHEMA_VERSION.  The version is
 * read again inside the write transaction, in case another process
 * migrated the same file meanwhile.  Returns 0, -EPROTO for a database
 * written by a newer build, or -errno.
 */
static int idx_migrate(struct idx *x)
{
	char sql[64];
	int64_t version;
	int rc;

	/* Read first, so that an up-to-date schema takes no write lock. */
	rc = idx_pragma_int(x, "PRAGMA user_version", &version);
	if (rc || version < 0 || version >= IDX_SCHEMA_VERSION)
		goto check;
	rc = idx_exec(x, "BEGIN IMMEDIATE", "migrate");
	if (rc)
		return rc;
	rc = idx_pragma_int(x, "PRAGMA user_version", &version);
	if (rc || version < 0 || version > IDX_SCHEMA_VERSION)
		goto out;
	for (size_t i = 0; i < IDX_N_MIGRATIONS; i++) {
		if (idx_migrations[i].to_version <= version)
			continue;
		rc = idx_exec(x, idx_migrations[i].sql, "migrate");
		if (rc)
			goto out;
		log_debug("idx: %s: schema migrated to version %d", x->path,
			  idx_migrations[i].to_version);
		version = idx_migrations[i].to_version;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
		 IDX_SCHEMA_VERSION);
	rc = idx_exec(x, sql, "migrate");
out:
	if (rc == 0)
		rc = idx_exec(x, "COMMIT", "migrate");
	if (!sqlite3_get_autocommit(x->db))
		(void)idx_exec(x, "ROLLBACK", "migrate");
check:
	if (rc == 0 && (version < 0 || version > IDX_SCHEMA_VERSION)) {
		log_error("idx: %s: schema version %lld is not one this build "
			  "(version %d) knows; use a newer hoardfs or another "
			  "cache dir",
			  x->path, (long long)version, IDX_SCHEMA_VERSION);
		rc = -EPROTO;
	}
	return rc;
}

/*
 * idx_create_file - create the database file 0600 if missing and force
 * 0600 on it and any -wal and -shm next to it.  SQLite creates -wal and
 * -shm with the mode of the main file, so this makes all three 0600
 * without touching the process-wide umask.
 */
static int idx_create_file(const char *db_path)
{
	static const char *const suffixes[] = {"-wal", "-shm"};
	char *side = NULL;
	int fd, rc = 0;

	fd = open(db_path, O_RDWR | O_CREAT | O_CLOEXEC, IDX_FILE_MODE);
	if (fd < 0) {
		rc = -errno;
		log_error("idx: cannot open %s: %s", db_path, strerror(-rc));
		goto out;
	}
	if (fchmod(fd, IDX_FILE_MODE) != 0) {
		rc = -errno;
		log_error("idx: cannot chmod %s to 0600: %s", db_path,
			  strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (asprintf(&side, "%s%s", db_path, suffixes[i]) < 0) {
			side = NULL;
			rc = -ENOMEM;
			goto out;
		}
		if (chmod(side, IDX_FILE_MODE) != 0 && errno != ENOENT) {
			rc = -errno;
			log_error("idx: cannot chmod %s to 0600: %s", side,
				  strerror(-rc));
			goto out;
		}
		free(side);
		side = NULL;
	}
out:
	free(side);
	if (fd >= 0)
		close(fd);
	return rc;
}

int idx_open(const char *db_path, struct idx **out)
{
	struct idx *x;
	int64_t fk = 0;
	int rc;

	*out = NULL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	if (pthread_mutex_init(&x->lock, NULL) != 0) {
		free(x);
		return -ENOMEM;
	}
	x->path = strdup(db_path);
	if (!x->path) {
		rc = -ENOMEM;
		goto out;
	}
	rc = idx_create_file(db_path);
	if (rc)
		goto out;
	rc = sqlite3_open_v2(db_path, &x->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		rc = x->db ? idx_errno(x, rc, "open") : -ENOMEM;
		goto out;
	}
	sqlite3_extended_result_codes(x->db, 1);
	sqlite3_busy_timeout(x->db, IDX_BUSY_TIMEOUT_MS);
	/* The first statement that reads the file: a garbage file fails
	 * here with SQLITE_NOTADB. */
	rc = idx_set_wal(x);
	if (rc)
		goto out;
	rc = idx_exec(x, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
		      "set pragmas");
	if (rc)
		goto out;
	/* Removing an object relies on ON DELETE CASCADE. */
	rc = idx_pragma_int(x, "PRAGMA foreign_keys", &fk);
	if (rc)
		goto out;
	if (fk != 1) {
		log_error("idx: %s: this SQLite does not enforce foreign keys",
			  db_path);
		rc = -EIO;
		goto out;
	}
	rc = idx_migrate(x);
	if (rc)
		goto out;
	for (int i = 0; i < IDX_ST_COUNT; i++) {
		rc = sqlite3_prepare_v3(x->db, idx_stmt_sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &x->st[i],
					NULL);
		if (rc != SQLITE_OK) {
			rc = idx_errno(x, rc, idx_stmt_sql[i]);
			goto out;
		}
	}
	*out = x;
	x = NULL;
	rc = 0;
out:
	idx_close(x);
	return rc;
}

void idx_close(struct idx *x)
{
	int rc;

	if (!x)
		return;
	for (int i = 0; i < IDX_ST_COUNT; i++)
		sqlite3_finalize(x->st[i]);
	/* All statements are finalized, so this cannot be SQLITE_BUSY. */
	rc = sqlite3_close(x->db);
	if (rc != SQLITE_OK)
		log_error("idx: %s: close: %s", x->path, sqlite3_errstr(rc));
	pthread_mutex_destroy(&x->lock);
	free(x->path);
	free(x);
}

/*
 * idx_row_object - fill *@out from a row of IDX_ST_LOOKUP (id, etag, size,
 * mtime, atime).  Returns 0, or -EIO for values this build never writes.
 */
static int idx_row_object(struct idx *x, sqlite3_stmt *st,
			  struct idx_object *out)
{
	const unsigned char *etag = sqlite3_column_text(st, 1);
	int etag_bytes = sqlite3_column_bytes(st, 1);
	int64_t size = sqlite3_column_int64(st, 2);

	if (!etag || etag_bytes >= IDX_ETAG_MAX || size < 0) {
		log_error("idx: %s: object %lld has a corrupt ETag or size",
			  x->path, (long long)sqlite3_column_int64(st, 0));
		return -EIO;
	}
	out->id = sqlite3_column_int64(st, 0);
	memcpy(out->etag, etag, (size_t)etag_bytes);
	out->etag[etag_bytes] = '\0';
	out->size = (uint64_t)size;
	out->mtime_sec = sqlite3_column_int64(st, 3);
	out->atime_sec = sqlite3_column_int64(st, 4);
	return 0;
}

/*
 * idx_lookup_locked - idx_object_lookup() with the lock held.  The key is
 * bound as a BLOB of strlen(key) bytes, the way it was stored.
 */
static int idx_lookup_locked(struct idx *x, const char *bucket, const char *key,
			     struct idx_object *out)
{
	sqlite3_stmt *st = x->st[IDX_ST_LOOKUP];
	int rc;

	if (sqlite3_bind_text64(st, 1, bucket, strlen(bucket), SQLITE_STATIC,
				SQLITE_UTF8) != SQLITE_OK ||
	    sqlite3_bind_blob64(st, 2, key, strlen(key), SQLITE_STATIC) !=
		    SQLITE_OK) {
		rc = idx_bind_failed(x, "lookup");
		goto out;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = -ENOENT;
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = idx_errno(x, rc, "lookup");
		goto out;
	}
	rc = idx_row_object(x, st, out);
out:
	idx_release(st);
	return rc;
}

int idx_object_lookup(struct idx *x, const char *bucket, const char *key,
		      struct idx_object *out)
{
	int rc;

	idx_lock(x);
	rc = idx_lookup_locked(x, bucket, key, out);
	idx_unlock(x);
	return rc;
}

/* idx_insert_locked - a new object row; its id goes to obj->id. */
static int idx_insert_locked(struct idx *x, const char *bucket, const char *key,
			     struct idx_object *obj)
{
	sqlite3_stmt *st = x->st[IDX_ST_INSERT];
	int rc;

	if (sqlite3_bind_text64(st, 1, bucket, strlen(bucket), SQLITE_STATIC,
				SQLITE_UTF8) != SQLITE_OK ||
	    sqlite3_bind_blob64(st, 2, key, strlen(key), SQLITE_STATIC) !=
		    SQLITE_OK ||
	    sqlite3_bind_text(st, 3, obj->etag, -1, SQLITE_STATIC) !=
		    SQLITE_OK ||
	    sqlite3_bind_int64(st, 4, (sqlite3_int64)obj->size) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 5, obj->mtime_sec) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 6, obj->atime_sec) != SQLITE_OK) {
		idx_release(st);
		return idx_bind_failed(x, "insert object");
	}
	rc = idx_step_done(x, IDX_ST_INSERT, "insert object");
	if (rc == 0)
		obj->id = sqlite3_last_insert_rowid(x->db);
	return rc;
}

/* idx_update_locked - store obj's version and times in its row. */
static int idx_update_locked(struct idx *x, const struct idx_object *obj)
{
	sqlite3_stmt *st = x->st[IDX_ST_UPDATE];

	if (sqlite3_bind_int64(st, 1, obj->id) != SQLITE_OK ||
	    sqlite3_bind_text(st, 2, obj->etag, -1, SQLITE_STATIC) !=
		    SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, (sqlite3_int64)obj->size) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 4, obj->mtime_sec) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 5, obj->atime_sec) != SQLITE_OK) {
		idx_release(st);
		return idx_bind_failed(x, "update object");
	}
	return idx_step_done(x, IDX_ST_UPDATE, "update object");
}

/* idx_by_id_locked - run a cached statement whose one parameter ?1 is an
 * object id, and an optional ?2 int64 when @has_arg. */
int idx_by_id_locked(struct idx *x, enum idx_stmt_id id, int64_t object_id,
		     int has_arg, int64_t arg, const char *what)
{
	sqlite3_stmt *st = x->st[id];

	if (sqlite3_bind_int64(st, 1, object_id) != SQLITE_OK ||
	    (has_arg && sqlite3_bind_int64(st, 2, arg) != SQLITE_OK)) {
		idx_release(st);
		return idx_bind_failed(x, what);
	}
	return idx_step_done(x, id, what);
}

int idx_object_set_version(struct idx *x, const char *bucket, const char *key,
			   const char *etag, uint64_t size_bytes,
			   int64_t mtime_sec, struct idx_object *out,
			   char *old_etag)
{
	struct idx_object obj;
	char prev[IDX_ETAG_MAX] = "";
	size_t etag_len = strlen(etag);
	int rc;

	if (old_etag)
		old_etag[0] = '\0';
	if (etag_len >= IDX_ETAG_MAX || size_bytes > (uint64_t)INT64_MAX)
		return -EINVAL;
	idx_lock(x);
	rc = idx_tx_begin(x, "set version");
	if (rc)
		goto out_unlock;
	rc = idx_lookup_locked(x, bucket, key, &obj);
	if (rc && rc != -ENOENT)
		goto out;
	if (rc == 0 &&
	    (strcmp(obj.etag, etag) != 0 || obj.size != size_bytes)) {
		/* A new version: the old bytes describe another object. */
		memcpy(prev, obj.etag, sizeof(prev));
		rc = idx_by_id_locked(x, IDX_ST_EXTENTS_PURGE, obj.id, 0, 0,
				      "purge extents");
		if (rc)
			goto out;
	}
	memcpy(obj.etag, etag, etag_len + 1);
	obj.size = size_bytes;
	obj.mtime_sec = mtime_sec;
	obj.atime_sec = util_now_sec();
	if (rc == -ENOENT)
		rc = idx_insert_locked(x, bucket, key, &obj);
	else
		rc = idx_update_locked(x, &obj);
out:
	rc = idx_tx_end(x, rc, "set version");
out_unlock:
	idx_unlock(x);
	if (rc) {
		log_error("idx: cannot record version %s of s3://%s/%s: %s",
			  etag, bucket, key, strerror(-rc));
		return rc;
	}
	if (old_etag)
		memcpy(old_etag, prev, sizeof(prev));
	if (out)
		*out = obj;
	return 0;
}

int idx_extents_load(struct idx *x, int64_t object_id, struct extent_set *set)
{
	sqlite3_stmt *st;
	int rc;

	idx_lock(x);
	st = x->st[IDX_ST_EXTENTS_LOAD];
	if (sqlite3_bind_int64(st, 1, object_id) != SQLITE_OK) {
		rc = idx_bind_failed(x, "load extents");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t off = sqlite3_column_int64(st, 0);
		int64_t end = sqlite3_column_int64(st, 1);

		if (off < 0 || end <= off) {
			log_error("idx: %s: object %lld has a corrupt extent "
				  "[%lld, %lld)",
				  x->path, (long long)object_id, (long long)off,
				  (long long)end);
			rc = -EIO;
			goto out;
		}
		rc = extent_set_add(set, (uint64_t)off, (uint64_t)end);
		if (rc)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : idx_errno(x, rc, "load extents");
out:
	idx_release(st);
	idx_unlock(x);
	return rc;
}

/*
 * idx_extent_merge_locked - record [off, end) of @object_id inside the
 * open transaction: replace the extents it overlaps or touches with their
 * union, so the table stays coalesced.  0 < end - off, end <= INT64_MAX.
 */
static int idx_extent_merge_locked(struct idx *x, int64_t object_id,
				   int64_t off, int64_t end)
{
	sqlite3_stmt *st = x->st[IDX_ST_EXTENTS_OVERLAP];
	int64_t new_off = off, new_end = end;
	int found = 0, covered = 0;
	int rc;

	assert(off >= 0 && off < end);
	if (sqlite3_bind_int64(st, 1, object_id) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, off) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, end) != SQLITE_OK) {
		rc = idx_bind_failed(x, "find extents");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t o = sqlite3_column_int64(st, 0);
		int64_t e = sqlite3_column_int64(st, 1);

		covered = o <= off && e >= end;
		if (o < new_off)
			new_off = o;
		if (e > new_end)
			new_end = e;
		found++;
	}
	if (rc != SQLITE_DONE) {
		rc = idx_errno(x, rc, "find extents");
		goto out;
	}
	idx_release(st);
	st = NULL;
	/* Already recorded: write nothing. */
	if (found == 1 && covered)
		return 0;
	if (found) {
		st = x->st[IDX_ST_EXTENTS_DELETE];
		if (sqlite3_bind_int64(st, 1, object_id) != SQLITE_OK ||
		    sqlite3_bind_int64(st, 2, new_off) != SQLITE_OK ||
		    sqlite3_bind_int64(st, 3, end) != SQLITE_OK ||
		    sqlite3_bind_int64(st, 4, off) != SQLITE_OK) {
			rc = idx_bind_failed(x, "delete extents");
			goto out;
		}
		st = NULL;
		rc = idx_step_done(x, IDX_ST_EXTENTS_DELETE, "delete extents");
		if (rc)
			return rc;
		/* Exactly the rows found above, no more. */
		assert(sqlite3_changes(x->db) == found);
	}
	st = x->st[IDX_ST_EXTENTS_INSERT];
	if (sqlite3_bind_int64(st, 1, object_id) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, new_off) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 3, new_end) != SQLITE_OK) {
		rc = idx_bind_failed(x, "insert extent");
		goto out;
	}
	st = NULL;
	rc = idx_step_done(x, IDX_ST_EXTENTS_INSERT, "insert extent");
out:
	idx_release(st);
	return rc;
}

static int idx_cmp_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int idx_extents_commit(struct idx *x, const struct idx_extent_rec *v, size_t n,
		       int64_t atime_sec)
{
	int64_t *ids = NULL;	      /* distinct object ids, sorted */
	unsigned char *exists = NULL; /* exists[j]: ids[j] still has a row */
	size_t m = 0;
	int rc;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].off > v[i].end || v[i].end > (uint64_t)INT64_MAX) {
			log_error("idx: bad extent [%llu, %llu) of object %lld",
				  (unsigned long long)v[i].off,
				  (unsigned long long)v[i].end,
				  (long long)v[i].object_id);
			return -EINVAL;
		}
	}
	ids = malloc(n * sizeof(*ids));
	exists = calloc(n, 1);
	if (!ids || !exists) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = v[i].object_id;
	qsort(ids, n, sizeof(*ids), idx_cmp_id);
	for (size_t i = 0; i < n; i++)
		if (m == 0 || ids[m - 1] != ids[i])
			ids[m++] = ids[i];

	idx_lock(x);
	rc = idx_tx_begin(x, "commit extents");
	if (rc)
		goto out_unlock;
	/* Touch each object once; a row changed means it still exists. */
	for (size_t j = 0; j < m; j++) {
		rc = idx_by_id_locked(x, IDX_ST_TOUCH, ids[j], 1, atime_sec,
				      "touch object");
		if (rc)
			goto out;
		exists[j] = sqlite3_changes(x->db) > 0;
	}
	for (size_t i = 0; i < n; i++) {
		const int64_t *hit;

		if (v[i].off == v[i].end)
			continue;
		hit = bsearch(&v[i].object_id, ids, m, sizeof(*ids),
			      idx_cmp_id);
		assert(hit);
		if (!exists[hit - ids]) {
			log_debug("idx: extent [%llu, %llu) of removed object "
				  "%lld ignored",
				  (unsigned long long)v[i].off,
				  (unsigned long long)v[i].end,
				  (long long)v[i].object_id);
			continue;
		}
		rc = idx_extent_merge_locked(x, v[i].object_id,
					     (int64_t)v[i].off,
					     (int64_t)v[i].end);
		if (rc)
			goto out;
	}
out:
	rc = idx_tx_end(x, rc, "commit extents");
out_unlock:
	idx_unlock(x);
out_free:
	free(exists);
	free(ids);
	return rc;
}
