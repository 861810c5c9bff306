// SPDX-License-Identifier: MIT
/*
 * Unit tests for src/idx on a temporary database: object versions, extent
 * coalescing (checked against the rows themselves, read through a second
 * SQLite connection, so a non-coalesced table cannot hide behind
 * extent_set's own merging), persistence across reopen, schema versions,
 * garbage files, file modes, lock timeouts and concurrent callers.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "hoardfs/extent.h"
#include "hoardfs/idx.h"
#include "hoardfs/util.h"

/* Per-test state: a temporary directory holding the database. */
struct fixture {
	char dir[64];	  /* mkdtemp(3) directory */
	char db[96];	  /* <dir>/index.db */
	mode_t old_umask; /* process umask before the test */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/hoardfs-idx-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->db, sizeof(f->db), "%s/index.db", f->dir);
	f->old_umask = umask(022);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
	char path[128];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", f->db, suffixes[i]);
		unlink(path);
		rmdir(path); /* test_not_a_file makes a directory there */
	}
	rmdir(f->dir);
	umask(f->old_umask);
	free(f);
	return 0;
}

/* Most extents one test reads back from the table. */
#define MAX_ROWS 4096

/*
 * db_rows - the extents rows of @object_id, read with a separate
 * connection, as pairs into @pairs.  Returns the number of rows.
 */
static size_t db_rows(const char *db_path, int64_t object_id, int64_t *pairs)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	assert_int_equal(
		sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL),
		SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT off, end FROM extents "
					    "WHERE object_id = ? ORDER BY off",
					    -1, &st, NULL),
			 SQLITE_OK);
	sqlite3_bind_int64(st, 1, object_id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		assert_true(n < MAX_ROWS);
		pairs[2 * n] = sqlite3_column_int64(st, 0);
		pairs[2 * n + 1] = sqlite3_column_int64(st, 1);
		n++;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* db_exec - run @sql on @db_path through a separate connection. */
static void db_exec(const char *db_path, const char *sql)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* commit1 - record one extent of one object. */
static int commit1(struct idx *x, int64_t id, uint64_t off, uint64_t end)
{
	struct idx_extent_rec r = {.object_id = id, .off = off, .end = end};

	return idx_extents_commit(x, &r, 1, 1000);
}

/* Set the access time of @id alone: an empty record only touches. */
static int touch(struct idx *x, int64_t id, int64_t atime_sec)
{
	struct idx_extent_rec r = {.object_id = id};

	return idx_extents_commit(x, &r, 1, atime_sec);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 07777;
}

static void test_create_lookup_modes(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object obj;
	uint64_t objects = 1, bytes = 1;
	char path[128];

	assert_int_equal(idx_open(f->db, &x), 0);
	assert_non_null(x);
	assert_int_equal(idx_object_lookup(x, "b", "k", &obj), -ENOENT);
	assert_int_equal(idx_stats(x, &objects, &bytes), 0);
	assert_int_equal(objects, 0);
	assert_int_equal(bytes, 0);

	/* 0600 for the database and its WAL files, despite umask 022. */
	assert_int_equal(mode_of(f->db), 0600);
	snprintf(path, sizeof(path), "%s-wal", f->db);
	assert_int_equal(mode_of(path), 0600);
	snprintf(path, sizeof(path), "%s-shm", f->db);
	assert_int_equal(mode_of(path), 0600);
	idx_close(x);
	idx_close(NULL);

	/* A database left 0644 is tightened on open. */
	assert_int_equal(chmod(f->db, 0644), 0);
	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(mode_of(f->db), 0600);
	idx_close(x);

	/* The schema: version 1, WAL. */
	{
		sqlite3 *db = NULL;
		sqlite3_stmt *st = NULL;

		assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
		assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version",
						    -1, &st, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_int_equal(sqlite3_column_int(st, 0), 2);
		sqlite3_finalize(st);
		assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode",
						    -1, &st, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_string_equal((const char *)sqlite3_column_text(st, 0),
				    "wal");
		sqlite3_finalize(st);
		sqlite3_close(db);
	}
}

static void test_set_version(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object obj, got;
	char old[IDX_ETAG_MAX];
	struct extent_set set;
	char long_etag[IDX_ETAG_MAX + 1];
	int64_t id;
	int64_t before = util_now_sec();

	assert_int_equal(idx_open(f->db, &x), 0);

	/* New object. */
	strcpy(old, "junk");
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", "\"e1\"", 100,
						50, &obj, old),
			 0);
	assert_string_equal(old, "");
	assert_true(obj.id > 0);
	assert_string_equal(obj.etag, "\"e1\"");
	assert_int_equal(obj.size, 100);
	assert_int_equal(obj.mtime_sec, 50);
	assert_true(obj.atime_sec >= before && obj.atime_sec <= util_now_sec());
	id = obj.id;
	assert_int_equal(idx_object_lookup(x, "b", "dir/k", &got), 0);
	assert_int_equal(got.id, id);
	assert_string_equal(got.etag, "\"e1\"");
	assert_int_equal(got.size, 100);
	assert_int_equal(got.mtime_sec, 50);
	/* Same key in another bucket is another object. */
	assert_int_equal(idx_object_lookup(x, "c", "dir/k", &got), -ENOENT);

	/* Same ETag and size: extents kept, mtime updated. */
	assert_int_equal(commit1(x, id, 0, 40), 0);
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", "\"e1\"", 100,
						60, &obj, old),
			 0);
	assert_string_equal(old, "");
	assert_int_equal(obj.id, id);
	extent_set_init(&set);
	assert_int_equal(idx_extents_load(x, id, &set), 0);
	assert_int_equal(extent_set_bytes(&set), 40);
	extent_set_clear(&set);
	assert_int_equal(idx_object_lookup(x, "b", "dir/k", &got), 0);
	assert_int_equal(got.mtime_sec, 60);

	/* New ETag: extents dropped, old ETag reported, id kept. */
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", "\"e2\"", 100,
						70, &obj, old),
			 0);
	assert_string_equal(old, "\"e1\"");
	assert_int_equal(obj.id, id);
	assert_string_equal(obj.etag, "\"e2\"");
	assert_int_equal(db_rows(f->db, id, (int64_t[2 * MAX_ROWS]){0}), 0);
	assert_int_equal(idx_object_lookup(x, "b", "dir/k", &got), 0);
	assert_string_equal(got.etag, "\"e2\"");

	/* Same ETag, different size: treated as a new version too. */
	assert_int_equal(commit1(x, id, 0, 10), 0);
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", "\"e2\"", 200,
						70, NULL, old),
			 0);
	assert_string_equal(old, "\"e2\"");
	assert_int_equal(db_rows(f->db, id, (int64_t[2 * MAX_ROWS]){0}), 0);
	assert_int_equal(idx_object_lookup(x, "b", "dir/k", &got), 0);
	assert_int_equal(got.size, 200);

	/* Bad arguments change nothing. */
	memset(long_etag, 'e', IDX_ETAG_MAX);
	long_etag[IDX_ETAG_MAX] = '\0';
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", long_etag, 1,
						1, &obj, old),
			 -EINVAL);
	long_etag[IDX_ETAG_MAX - 1] = '\0'; /* the longest allowed */
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", long_etag, 1,
						1, &obj, old),
			 0);
	assert_int_equal(idx_object_lookup(x, "b", "dir/k", &got), 0);
	assert_string_equal(got.etag, long_etag);
	assert_int_equal(idx_object_set_version(x, "b", "dir/k", "\"e\"",
						(uint64_t)INT64_MAX + 1, 1,
						&obj, old),
			 -EINVAL);
	idx_close(x);
}

static void test_binary_keys(void **state)
{
	struct fixture *f = *state;
	static const char *const keys[] = {
		"k",	    "K", "k/", "ключ/日本", "\xff\xfe not UTF-8",
		"\xff\xfe", "",
	};
	const size_t n = sizeof(keys) / sizeof(keys[0]);
	struct idx *x = NULL;
	struct idx_object obj;
	int64_t ids[sizeof(keys) / sizeof(keys[0])];

	assert_int_equal(idx_open(f->db, &x), 0);
	for (size_t i = 0; i < n; i++) {
		char etag[16];

		snprintf(etag, sizeof(etag), "\"%zu\"", i);
		assert_int_equal(idx_object_set_version(x, "b", keys[i], etag,
							i, 0, &obj, NULL),
				 0);
		ids[i] = obj.id;
		for (size_t j = 0; j < i; j++)
			assert_true(ids[j] != ids[i]);
	}
	for (size_t i = 0; i < n; i++) {
		char etag[16];

		snprintf(etag, sizeof(etag), "\"%zu\"", i);
		assert_int_equal(idx_object_lookup(x, "b", keys[i], &obj), 0);
		assert_int_equal(obj.id, ids[i]);
		assert_string_equal(obj.etag, etag);
	}
	idx_close(x);
}

static void test_extents_coalesce(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object a, b;
	int64_t rows[2 * MAX_ROWS];
	struct extent_set set;

	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(
		idx_object_set_version(x, "b", "a", "\"a\"", 1000, 0, &a, NULL),
		0);
	assert_int_equal(
		idx_object_set_version(x, "b", "b", "\"b\"", 1000, 0, &b, NULL),
		0);

	/* Across transactions: [0,10) [20,30), then [10,20) joins them. */
	{
		const struct idx_extent_rec v[] = {
			{a.id, 0, 10},
			{a.id, 20, 30},
			{b.id, 5, 6}, /* another object in the same batch */
		};

		assert_int_equal(idx_extents_commit(x, v, 3, 2000), 0);
	}
	assert_int_equal(db_rows(f->db, a.id, rows), 2);
	assert_int_equal(commit1(x, a.id, 10, 20), 0);
	assert_int_equal(db_rows(f->db, a.id, rows), 1);
	assert_int_equal(rows[0], 0);
	assert_int_equal(rows[1], 30);
	/* Object b untouched by a's merges. */
	assert_int_equal(db_rows(f->db, b.id, rows), 1);
	assert_int_equal(rows[0], 5);
	assert_int_equal(rows[1], 6);

	/* Within one batch: touching, overlapping, contained, spanning. */
	{
		const struct idx_extent_rec v[] = {
			{a.id, 100, 110}, {a.id, 110, 120}, /* touching */
			{a.id, 115, 130},		    /* overlapping */
			{a.id, 101, 102},		    /* contained */
			{a.id, 200, 210}, {a.id, 220, 230},
			{a.id, 240, 250}, {a.id, 190, 260}, /* spans three */
			{a.id, 300, 300},		    /* empty: ignored */
			{a.id, 30, 31}, /* touches [0,30) from the right */
		};

		assert_int_equal(idx_extents_commit(
					 x, v, sizeof(v) / sizeof(v[0]), 2000),
				 0);
	}
	assert_int_equal(db_rows(f->db, a.id, rows), 3);
	assert_int_equal(rows[0], 0);
	assert_int_equal(rows[1], 31);
	assert_int_equal(rows[2], 100);
	assert_int_equal(rows[3], 130);
	assert_int_equal(rows[4], 190);
	assert_int_equal(rows[5], 260);
	/* Re-recording a contained range changes nothing. */
	assert_int_equal(commit1(x, a.id, 120, 125), 0);
	assert_int_equal(db_rows(f->db, a.id, rows), 3);

	/* The atime of every object named was set. */
	assert_int_equal(idx_object_lookup(x, "b", "a", &a), 0);
	assert_int_equal(a.atime_sec, 1000);
	assert_int_equal(idx_object_lookup(x, "b", "b", &b), 0);
	assert_int_equal(b.atime_sec, 2000);
	assert_int_equal(touch(x, b.id, 3000), 0);
	assert_int_equal(idx_object_lookup(x, "b", "b", &b), 0);
	assert_int_equal(b.atime_sec, 3000);

	/* Load adds to what the set already holds. */
	extent_set_init(&set);
	assert_int_equal(extent_set_add(&set, 500, 600), 0);
	assert_int_equal(idx_extents_load(x, a.id, &set), 0);
	assert_int_equal(set.n, 4);
	assert_int_equal(extent_set_bytes(&set), 31 + 30 + 70 + 100);
	extent_set_clear(&set);

	/* 64-bit offsets, up to INT64_MAX. */
	assert_int_equal(commit1(x, b.id, (1ull << 40), (1ull << 40) + 7), 0);
	assert_int_equal(
		commit1(x, b.id, (uint64_t)INT64_MAX - 1, (uint64_t)INT64_MAX),
		0);
	assert_int_equal(db_rows(f->db, b.id, rows), 3);
	assert_int_equal(rows[2], 1ll << 40);
	assert_int_equal(rows[5], INT64_MAX);
	/* A bad record fails the whole batch: nothing recorded. */
	{
		const struct idx_extent_rec v[] = {
			{b.id, 0, 1},
			{b.id, 10, (uint64_t)INT64_MAX + 1},
		};

		assert_int_equal(idx_extents_commit(x, v, 2, 1), -EINVAL);
		assert_int_equal(db_rows(f->db, b.id, rows), 3);
		assert_int_equal(rows[0], 5);
	}
	{
		const struct idx_extent_rec v[] = {{b.id, 10, 9}};

		assert_int_equal(idx_extents_commit(x, v, 1, 1), -EINVAL);
	}
	assert_int_equal(idx_extents_commit(x, NULL, 0, 1), 0);
	idx_close(x);
}

static void test_removed_object(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object a, b;
	int64_t rows[2 * MAX_ROWS];
	uint64_t objects, bytes;

	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(
		idx_object_set_version(x, "b", "a", "\"a\"", 100, 0, &a, NULL),
		0);
	assert_int_equal(
		idx_object_set_version(x, "b", "b", "\"b\"", 100, 0, &b, NULL),
		0);
	assert_int_equal(commit1(x, a.id, 0, 50), 0);
	assert_int_equal(idx_stats(x, &objects, &bytes), 0);
	assert_int_equal(objects, 2);
	assert_int_equal(bytes, 50);

	/* Removing cascades to the extents. */
	assert_int_equal(idx_object_remove(x, a.id), 0);
	assert_int_equal(idx_object_remove(x, a.id), 0); /* absent: fine */
	assert_int_equal(db_rows(f->db, a.id, rows), 0);
	assert_int_equal(idx_object_lookup(x, "b", "a", &a), -ENOENT);

	/* A batch naming the removed object and one never seen still
	 * records the rest. */
	{
		const struct idx_extent_rec v[] = {
			{a.id, 0, 10},
			{b.id, 0, 10},
			{987654, 0, 10},
			{a.id, 20, 30},
		};

		assert_int_equal(idx_extents_commit(x, v, 4, 5), 0);
	}
	assert_int_equal(db_rows(f->db, a.id, rows), 0);
	assert_int_equal(db_rows(f->db, 987654, rows), 0);
	assert_int_equal(db_rows(f->db, b.id, rows), 1);
	assert_int_equal(idx_stats(x, &objects, &bytes), 0);
	assert_int_equal(objects, 1);
	assert_int_equal(bytes, 10);
	/* No row was created for the unknown ids. */
	assert_int_equal(idx_object_lookup(x, "b", "a", &a), -ENOENT);
	idx_close(x);
}

static void test_reopen_persists(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object obj;
	struct extent_set set;
	uint64_t objects, bytes;
	int64_t id;

	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(idx_object_set_version(x, "bkt", "p/q", "\"v1\"",
						1 << 20, 77, &obj, NULL),
			 0);
	id = obj.id;
	{
		const struct idx_extent_rec v[] = {
			{id, 0, 4096},
			{id, 8192, 16384},
		};

		assert_int_equal(idx_extents_commit(x, v, 2, 999), 0);
	}
	idx_close(x);

	x = NULL;
	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(idx_object_lookup(x, "bkt", "p/q", &obj), 0);
	assert_int_equal(obj.id, id);
	assert_string_equal(obj.etag, "\"v1\"");
	assert_int_equal(obj.size, 1 << 20);
	assert_int_equal(obj.mtime_sec, 77);
	assert_int_equal(obj.atime_sec, 999);
	extent_set_init(&set);
	assert_int_equal(idx_extents_load(x, id, &set), 0);
	assert_int_equal(set.n, 2);
	assert_int_equal(set.v[0].off, 0);
	assert_int_equal(set.v[0].end, 4096);
	assert_int_equal(set.v[1].off, 8192);
	assert_int_equal(set.v[1].end, 16384);
	extent_set_clear(&set);
	assert_int_equal(idx_stats(x, &objects, &bytes), 0);
	assert_int_equal(objects, 1);
	assert_int_equal(bytes, 4096 + 8192);
	/* Joining across the reopen still coalesces. */
	assert_int_equal(commit1(x, id, 4096, 8192), 0);
	assert_int_equal(db_rows(f->db, id, (int64_t[2 * MAX_ROWS]){0}), 1);
	idx_close(x);
}

/* Offsets in the random test: small, so ranges collide often. */
#define RANDOM_SPACE 2000
/* Batches in the random test, each of up to 8 records. */
#define RANDOM_BATCHES 400

static uint64_t xorshift(uint64_t *seed)
{
	uint64_t v = *seed;

	v ^= v << 13;
	v ^= v >> 7;
	v ^= v << 17;
	*seed = v;
	return v;
}

/* The table must hold exactly the model's coalesced extents. */
static void check_rows(const char *db_path, int64_t id,
		       const struct extent_set *model)
{
	static int64_t rows[2 * MAX_ROWS];
	size_t n = db_rows(db_path, id, rows);

	assert_int_equal(n, model->n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(rows[2 * i], model->v[i].off);
		assert_int_equal(rows[2 * i + 1], model->v[i].end);
	}
}

static void test_random_vs_model(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object obj[3];
	struct extent_set model[3];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	uint64_t objects, bytes, want_bytes = 0;

	assert_int_equal(idx_open(f->db, &x), 0);
	for (int k = 0; k < 3; k++) {
		char key[8];

		snprintf(key, sizeof(key), "r%d", k);
		assert_int_equal(idx_object_set_version(x, "b", key, "\"r\"",
							RANDOM_SPACE, 0,
							&obj[k], NULL),
				 0);
		extent_set_init(&model[k]);
	}
	for (int batch = 0; batch < RANDOM_BATCHES; batch++) {
		struct idx_extent_rec v[8];
		size_t n = 1 + xorshift(&seed) % 8;

		for (size_t i = 0; i < n; i++) {
			int k = (int)(xorshift(&seed) % 3);
			uint64_t off = xorshift(&seed) % RANDOM_SPACE;
			uint64_t len = xorshift(&seed) % 15;

			v[i].object_id = obj[k].id;
			v[i].off = off;
			v[i].end = off + len;
			assert_int_equal(
				extent_set_add(&model[k], off, off + len), 0);
		}
		assert_int_equal(idx_extents_commit(x, v, n, batch), 0);
		if (batch % 20 == 0)
			for (int k = 0; k < 3; k++)
				check_rows(f->db, obj[k].id, &model[k]);
	}
	for (int k = 0; k < 3; k++) {
		check_rows(f->db, obj[k].id, &model[k]);
		want_bytes += extent_set_bytes(&model[k]);
		extent_set_clear(&model[k]);
	}
	assert_int_equal(idx_stats(x, &objects, &bytes), 0);
	assert_int_equal(objects, 3);
	assert_int_equal(bytes, want_bytes);
	idx_close(x);
}

static void test_newer_schema(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;

	assert_int_equal(idx_open(f->db, &x), 0);
	idx_close(x);
	db_exec(f->db, "PRAGMA user_version = 3");
	x = (struct idx *)1;
	assert_int_equal(idx_open(f->db, &x), -EPROTO);
	assert_null(x);
	db_exec(f->db, "PRAGMA user_version = -1");
	assert_int_equal(idx_open(f->db, &x), -EPROTO);
	/* Back to the current version, it opens again. */
	db_exec(f->db, "PRAGMA user_version = 2");
	assert_int_equal(idx_open(f->db, &x), 0);
	idx_close(x);
}

static void test_listings_and_v1_migration(void **state)
{
	struct fixture *f = *state;
	struct idx_object o;
	struct idx *x = NULL;
	int64_t at = 0;
	void *body = NULL;
	size_t len = 0;

	/* A version-1 cache: no listings table yet, one object. */
	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(
		idx_object_set_version(x, "b", "k", "\"e\"", 5, 0, &o, NULL),
		0);
	idx_close(x);
	db_exec(f->db, "DROP TABLE listings; PRAGMA user_version = 1");
	assert_int_equal(idx_open(f->db, &x), 0);
	assert_int_equal(idx_object_lookup(x, "b", "k", &o), 0);
	assert_int_equal(idx_listing_get(x, "b", "d/", &at, &body, &len),
			 -ENOENT);
	assert_int_equal(idx_listing_put(x, "b", "d/", 1234, "abc\0def", 7), 0);
	assert_int_equal(idx_listing_put(x, "b", "", 99, "", 0), 0);
	assert_int_equal(idx_listing_get(x, "b", "d/", &at, &body, &len), 0);
	assert_int_equal(at, 1234);
	assert_int_equal(len, 7);
	assert_memory_equal(body, "abc\0def", 7);
	free(body);
	/* Replaced, not duplicated. */
	assert_int_equal(idx_listing_put(x, "b", "d/", 1300, "x", 1), 0);
	assert_int_equal(idx_listing_get(x, "b", "d/", &at, &body, &len), 0);
	assert_int_equal(at, 1300);
	assert_int_equal(len, 1);
	free(body);
	assert_int_equal(idx_listing_get(x, "b", "", &at, &body, &len), 0);
	assert_int_equal(len, 0);
	free(body);
	assert_int_equal(idx_listing_get(x, "other", "d/", &at, &body, &len),
			 -ENOENT);
	idx_close(x);
}

static void test_garbage_file(void **state)
{
	struct fixture *f = *state;
	struct idx *x = (struct idx *)1;
	char buf[8192];
	uint64_t seed = 42;
	int fd;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)xorshift(&seed);
	fd = open(f->db, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	close(fd);
	assert_int_equal(idx_open(f->db, &x), -EIO);
	assert_null(x);

	/* Plain text, shorter than a SQLite header. */
	fd = open(f->db, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello\n", 6), 6);
	close(fd);
	assert_int_equal(idx_open(f->db, &x), -EIO);

	/* A real database with its first page damaged. */
	unlink(f->db);
	assert_int_equal(idx_open(f->db, &x), 0);
	idx_close(x);
	fd = open(f->db, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, 100, 0), 100);
	close(fd);
	assert_int_equal(idx_open(f->db, &x), -EIO);
}

static void test_not_a_file(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	char path[128];

	assert_int_equal(mkdir(f->db, 0700), 0);
	assert_int_equal(idx_open(f->db, &x), -EISDIR);
	assert_int_equal(rmdir(f->db), 0);
	snprintf(path, sizeof(path), "%s/missing/index.db", f->dir);
	assert_int_equal(idx_open(path, &x), -ENOENT);
}

static void test_busy(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	struct idx_object obj;
	sqlite3 *other = NULL;
	int64_t t0;

	assert_int_equal(idx_open(f->db, &x), 0);
	/* Another process holds the write lock past the busy timeout. */
	assert_int_equal(sqlite3_open(f->db, &other), SQLITE_OK);
	assert_int_equal(
		sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL),
		SQLITE_OK);
	t0 = util_mono_ms();
	assert_int_equal(
		idx_object_set_version(x, "b", "k", "\"e\"", 1, 1, &obj, NULL),
		-EBUSY);
	assert_true(util_mono_ms() - t0 >= 4000); /* it did wait */
	/* Reads still work under WAL. */
	assert_int_equal(idx_object_lookup(x, "b", "k", &obj), -ENOENT);
	assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(other);
	/* And the index is usable afterwards: no transaction left open. */
	assert_int_equal(
		idx_object_set_version(x, "b", "k", "\"e\"", 1, 1, &obj, NULL),
		0);
	idx_close(x);
}

/* Threads and operations per thread in the concurrency test. */
#define THREADS	       4
#define OPS_PER_THREAD 100

/* Work for one thread: its own objects in one shared index. */
struct worker {
	struct idx *x; /* shared index */
	int t;	       /* thread number, for unique keys */
	int failures;  /* calls that did not return 0 */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < OPS_PER_THREAD; i++) {
		struct idx_object obj;
		struct idx_extent_rec r;
		char key[32];

		snprintf(key, sizeof(key), "t%d/%d", w->t, i);
		if (idx_object_set_version(w->x, "b", key, "\"e\"", 100, 0,
					   &obj, NULL) != 0) {
			w->failures++;
			continue;
		}
		r.object_id = obj.id;
		r.off = 0;
		r.end = 10;
		if (idx_extents_commit(w->x, &r, 1, 1) != 0)
			w->failures++;
		if (idx_object_lookup(w->x, "b", key, &obj) != 0)
			w->failures++;
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct fixture *f = *state;
	struct idx *x = NULL;
	pthread_t th[THREADS];
	struct worker w[THREADS];
	uint64_t objects, bytes;

	assert_int_equal(idx_open(f->db, &x), 0);
	for (int t = 0; t < THREADS; t++) {
		w[t] = (struct worker){.x = x, .t = t};
		assert_int_equal(
			pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
	}
	for (int t = 0; t < THREADS; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		assert_int_equal(w[t].failures, 0);
	}
	assert_int_equal(idx_stats(x, &objects, &bytes), 0);
	assert_int_equal(objects, THREADS * OPS_PER_THREAD);
	assert_int_equal(bytes, THREADS * OPS_PER_THREAD * 10);
	idx_close(x);
}

static void test_pages(void **state)
{
	struct fixture *f = *state;
	struct idx_entry v[4];
	struct idx_object o[5];
	struct idx *x = NULL;
	int64_t at = INT64_MIN, id = 0;
	size_t n, seen = 0;
	char key[8];

	assert_int_equal(idx_open(f->db, &x), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(idx_object_set_version(x, "b", key, "\"e\"",
							100, 0, &o[i], NULL),
				 0);
	}
	/* Extents first: a commit sets the access time too. */
	assert_int_equal(commit1(x, o[1].id, 0, 60), 0);
	/* Access order 3, 1, 4, 0, 2 (oldest first). */
	assert_int_equal(touch(x, o[3].id, 10), 0);
	assert_int_equal(touch(x, o[1].id, 20), 0);
	assert_int_equal(touch(x, o[4].id, 30), 0);
	assert_int_equal(touch(x, o[0].id, 40), 0);
	assert_int_equal(touch(x, o[2].id, 50), 0);
	assert_int_equal(idx_page_lru(x, at, id, 3, v, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0].key, "k3");
	assert_string_equal(v[1].key, "k1");
	assert_int_equal(v[1].cached_bytes, 60);
	assert_string_equal(v[2].key, "k4");
	at = v[2].atime_sec;
	id = v[2].id;
	idx_entries_clear(v, n);
	assert_int_equal(idx_page_lru(x, at, id, 3, v, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].key, "k0");
	assert_string_equal(v[1].key, "k2");
	idx_entries_clear(v, n);
	/* By id: everything once. */
	for (id = 0;;) {
		assert_int_equal(idx_page_by_id(x, id, 2, v, &n), 0);
		if (n == 0)
			break;
		seen += n;
		id = v[n - 1].id; /* before clearing, which zeroes it */
		idx_entries_clear(v, n);
		assert_true(seen <= 5);
	}
	assert_int_equal(seen, 5);
	/* Dropping extents keeps the object. */
	assert_int_equal(idx_extents_drop(x, o[1].id), 0);
	assert_int_equal(idx_page_lru(x, 15, o[3].id, 1, v, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].key, "k1");
	assert_int_equal(v[0].cached_bytes, 0);
	idx_entries_clear(v, n);
	idx_close(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create_lookup_modes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_set_version, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_binary_keys, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_extents_coalesce, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_removed_object, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reopen_persists, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_random_vs_model, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_garbage_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_not_a_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listings_and_v1_migration,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
