// SPDX-License-Identifier: MIT
/*
 * Unit tests for src/store: directory and file modes under hostile umasks,
 * data file naming, sparse sizing, store_pwrite_all() (including a short
 * write forced by RLIMIT_FSIZE) and removal.  Each test works in its own
 * mkdtemp(3) directory and removes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hoardfs/store.h"

/* Per-test state: a temporary directory and the umask to restore. */
struct fixture {
	char root[64];	  /* mkdtemp(3) directory, removed on teardown */
	mode_t old_umask; /* process umask before the test */
};

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->root, sizeof(f->root), "/tmp/hoardfs-store-XXXXXX");
	if (!mkdtemp(f->root)) {
		free(f);
		return -1;
	}
	f->old_umask = umask(022);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	umask(f->old_umask);
	chmod(f->root, 0700);
	nftw(f->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 07777;
}

static void test_dir_modes(void **state)
{
	struct fixture *f = *state;
	struct store *s = NULL;
	char path[256];

	/* Missing parents are created 0700 despite umask 022. */
	snprintf(path, sizeof(path), "%s/a/b/cache", f->root);
	assert_int_equal(store_open(path, &s), 0);
	assert_string_equal(store_dir(s), path);
	assert_int_equal(mode_of(path), 0700);
	snprintf(path, sizeof(path), "%s/a", f->root);
	assert_int_equal(mode_of(path), 0700);
	snprintf(path, sizeof(path), "%s/a/b/cache/data", f->root);
	assert_int_equal(mode_of(path), 0700);
	store_free(s);

	/* An existing cache dir made 0755 by hand is tightened. */
	snprintf(path, sizeof(path), "%s/existing", f->root);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chmod(path, 0755), 0);
	assert_int_equal(store_open(path, &s), 0);
	assert_int_equal(mode_of(path), 0700);
	store_free(s);
	/* Reopening an existing store works. */
	assert_int_equal(store_open(path, &s), 0);
	store_free(s);

	/* A file in the way of the cache dir. */
	snprintf(path, sizeof(path), "%s/plain", f->root);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	s = (struct store *)1;
	assert_int_equal(store_open(path, &s), -ENOTDIR);
	assert_null(s);
	snprintf(path, sizeof(path), "%s/plain/sub", f->root);
	assert_int_equal(store_open(path, &s), -ENOTDIR);
	assert_int_equal(store_open("", &s), -EINVAL);
	store_free(NULL);
}

static void test_file_modes(void **state)
{
	struct fixture *f = *state;
	static const mode_t masks[] = {022, 0, 0777};
	struct store *s = NULL;
	char name[STORE_NAME_LEN + 1];
	char path[256];

	assert_int_equal(store_open(f->root, &s), 0);
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		char key[16];
		int fd, reset = -1;

		/* A fresh key each time, so its subdir is new too. */
		snprintf(key, sizeof(key), "key%zu", i);
		assert_int_equal(store_name("b", key, "\"e\"", name), 0);
		umask(masks[i]);
		fd = store_file_open(s, name, 10, &reset);
		assert_int_equal(reset, 1);
		umask(022);
		assert_true(fd >= 0);
		assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
		assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
		close(fd);
		snprintf(path, sizeof(path), "%s/data/%.2s/%s", f->root, name,
			 name);
		assert_int_equal(mode_of(path), 0600);
		snprintf(path, sizeof(path), "%s/data/%.2s", f->root, name);
		assert_int_equal(mode_of(path), 0700);
	}
	/* Reopening the last one finds it: same size, so reset is 0, and a
	 * mode loosened behind the store's back is tightened again. */
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", f->root, name, name);
	assert_int_equal(chmod(path, 0644), 0);
	{
		int fd, reset = -1;

		fd = store_file_open(s, name, 10, &reset);
		assert_true(fd >= 0);
		assert_int_equal(reset, 0);
		close(fd);
	}
	assert_int_equal(mode_of(path), 0600);
	/* Whole-filesystem sync of the cache, as large commits use it. */
	assert_int_equal(store_sync_all(s), 0);
	store_free(s);
}

static void test_naming(void **state)
{
	struct fixture *f = *state;
	struct store *s = NULL;
	char a[STORE_NAME_LEN + 1], b[STORE_NAME_LEN + 1];
	char path[256];
	struct stat st;
	int fd, reset = -1;

	/* printf 'b\0k\0"e"' | sha256sum */
	assert_int_equal(store_name("b", "k", "\"e\"", a), 0);
	assert_string_equal(a, "ce90d81bfb5be01905e99238759ab1d0"
			       "6925204c3f20304fa735b4d39127a2ba");
	/* A different ETag, key or bucket gives a different name. */
	assert_int_equal(store_name("b", "k", "\"f\"", b), 0);
	assert_string_not_equal(a, b);
	assert_int_equal(store_name("b", "k2", "\"e\"", b), 0);
	assert_string_not_equal(a, b);
	/* The separators matter: ("bk", "") is not ("b", "k"). */
	assert_int_equal(store_name("bk", "", "\"e\"", b), 0);
	assert_string_not_equal(a, b);

	/* The file lands at data/<h[0..2)>/<h>. */
	assert_int_equal(store_open(f->root, &s), 0);
	fd = store_file_open(s, a, 1, &reset);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/data/ce/%s", f->root, a);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));

	/* Names that are not 64 lower-case hex digits are refused. */
	assert_int_equal(store_file_open(s, "../../etc/passwd", 1, &reset),
			 -EINVAL);
	assert_int_equal(store_file_open(s, "ab", 1, &reset), -EINVAL);
	memcpy(b, a, sizeof(b));
	b[10] = 'A';
	assert_int_equal(store_file_open(s, b, 1, &reset), -EINVAL);
	b[10] = '/';
	assert_int_equal(store_file_remove(s, b), -EINVAL);
	store_free(s);
}

static void test_long_key_name(void **state)
{
	char a[STORE_NAME_LEN + 1], b[STORE_NAME_LEN + 1];
	char *key = malloc(5000);

	(void)state;
	assert_non_null(key);
	/* Past the stack buffer: the heap path hashes the same way. */
	memset(key, 'x', 4999);
	key[4999] = '\0';
	assert_int_equal(store_name("b", key, "\"e\"", a), 0);
	key[4998] = 'y';
	assert_int_equal(store_name("b", key, "\"e\"", b), 0);
	assert_string_not_equal(a, b);
	free(key);
}

static void test_sparse_and_pwrite(void **state)
{
	struct fixture *f = *state;
	struct store *s = NULL;
	char name[STORE_NAME_LEN + 1];
	const uint64_t size_bytes = 1ull << 30; /* 1 GiB, mostly holes */
	char buf[16];
	struct stat st;
	int fd, reset = -1;

	assert_int_equal(store_open(f->root, &s), 0);
	assert_int_equal(store_name("bucket", "big", "\"1\"", name), 0);
	fd = store_file_open(s, name, size_bytes, &reset);
	assert_true(fd >= 0);
	assert_int_equal(reset, 1);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, size_bytes);
	/* Sparse: far fewer than 1 GiB of blocks (st_blocks is 512 B). */
	assert_true((uint64_t)st.st_blocks * 512 < (1u << 20));

	/* Write at both ends of the sparse file. */
	assert_int_equal(store_pwrite_all(fd, "hello", 5, size_bytes - 5), 0);
	assert_int_equal(pread(fd, buf, 5, (off_t)(size_bytes - 5)), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(store_pwrite_all(fd, "abc", 3, 0), 0);
	assert_int_equal(store_pwrite_all(fd, "", 0, 7), 0);
	close(fd);

	/* Reopening with a larger size keeps the bytes already written. */
	fd = store_file_open(s, name, size_bytes, &reset);
	assert_true(fd >= 0);
	assert_int_equal(reset, 0); /* same size: the bytes can be trusted */
	close(fd);
	fd = store_file_open(s, name, size_bytes + 4096, &reset);
	assert_true(fd >= 0);
	assert_int_equal(reset, 1); /* resized: they cannot */
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, size_bytes + 4096);
	assert_int_equal(pread(fd, buf, 3, 0), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(pread(fd, buf, 5, (off_t)(size_bytes - 5)), 5);
	assert_memory_equal(buf, "hello", 5);
	close(fd);

	/* Errors come back as -errno. */
	assert_int_equal(store_pwrite_all(-1, "x", 1, 0), -EBADF);
	assert_int_equal(store_pwrite_all(0, "x", 1, (uint64_t)INT64_MAX),
			 -EFBIG);
	assert_int_equal(store_file_open(s, name, UINT64_MAX, &reset), -EFBIG);
	store_free(s);
}

static void test_pwrite_short_write(void **state)
{
	struct fixture *f = *state;
	struct rlimit old_lim, lim;
	char path[256];
	char buf[200];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/short", f->root);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	memset(buf, 'z', sizeof(buf));
	/*
	 * With a 100-byte file size limit, the first pwrite(2) of 200 bytes
	 * writes 100 and returns short; a loop that retries then gets EFBIG.
	 * Stopping after the short write and returning 0 would be the bug.
	 */
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
	lim = old_lim;
	lim.rlim_cur = 100;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(store_pwrite_all(fd, buf, sizeof(buf), 0), -EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 100);
	close(fd);
}

static void test_remove(void **state)
{
	struct fixture *f = *state;
	struct store *s = NULL;
	char name[STORE_NAME_LEN + 1];
	char path[256];
	int fd, reset = -1;

	assert_int_equal(store_open(f->root, &s), 0);
	assert_int_equal(store_name("b", "gone", "\"e\"", name), 0);
	/* Missing file, and missing subdir: both fine. */
	assert_int_equal(store_file_remove(s, name), 0);
	fd = store_file_open(s, name, 3, &reset);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", f->root, name, name);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(store_file_remove(s, name), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(store_file_remove(s, name), 0);
	store_free(s);
}

static int count_name(void *arg, const char *name, const struct stat *st)
{
	(void)name;
	assert_true(S_ISREG(st->st_mode));
	(*(int *)arg)++;
	return 0;
}

static void test_lock_walk_wipe(void **state)
{
	struct fixture *f = *state;
	struct store *s = NULL, *t = NULL;
	char name[STORE_NAME_LEN + 1], path[256];
	long pid = -1;
	int fd, reset, n = 0;

	assert_int_equal(store_open(f->root, &s), 0);
	assert_int_equal(store_lock(s, &pid), 0);
	/* A second owner is refused and learns who holds it. */
	assert_int_equal(store_open(f->root, &t), 0);
	assert_int_equal(store_lock(t, &pid), -EBUSY);
	assert_int_equal(pid, (long)getpid());
	for (int i = 0; i < 3; i++) {
		char key[8];

		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(store_name("b", key, "\"e\"", name), 0);
		fd = store_file_open(s, name, 1, &reset);
		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(store_sync_dirs(s, name), 0);
	}
	/* Not a data file name: never walked, never wiped. */
	snprintf(path, sizeof(path), "%s/data/%.2s/stray", f->root, name);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(store_walk(s, count_name, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(store_wipe(s), 0);
	n = 0;
	assert_int_equal(store_walk(s, count_name, &n), 0);
	assert_int_equal(n, 0);
	store_free(t);
	store_free(s);
	/* The lock dies with its store (the daemon's exit). */
	assert_int_equal(store_open(f->root, &t), 0);
	assert_int_equal(store_lock(t, &pid), 0);
	store_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dir_modes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_file_modes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_naming, setup, teardown),
		cmocka_unit_test(test_long_key_name),
		cmocka_unit_test_setup_teardown(test_sparse_and_pwrite, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pwrite_short_write, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_walk_wipe, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
