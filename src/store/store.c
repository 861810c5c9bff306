// SPDX-License-Identifier: MIT
/*
 * The cache's data files: creating the cache dir, naming object versions,
 * and creating, sizing, writing and removing sparse data files under
 * <cache_dir>/data.  It does not know which bytes of a file are valid (the
 * index does) and does no reads: callers pread(2) or splice from the fd.
 *
 * DESIGN
 * Threads and locks: a store holds only the cache dir's path and an fd of
 * its data/ dir, both fixed at store_open(), so it takes no lock.  Every
 * operation is a few system calls relative to that fd (mkdirat, openat,
 * unlinkat), which the kernel serializes.  Two threads opening the same
 * name race harmlessly: the one whose O_EXCL create fails opens the file
 * the other created, and both ftruncate it to the same size.  Two threads
 * creating the same data/<h[0..2)> dir race harmlessly too: the loser sees
 * EEXIST. Modes: directories 0700 and files 0600 whatever the process umask, by
 * chmod after every mkdir and fchmod after an open that finds another
 * mode, since umask is process-wide and cannot be changed safely under
 * other threads.
 * Ordering and durability: the caller fdatasync()s a file before the
 * index records its bytes (idx.h), but fdatasync does not make the file's
 * directory entry durable.  So a caller that created a file calls
 * store_sync_dirs() before recording its first bytes: after a crash the
 * index never names bytes of a file that vanished.  That sync is left to
 * the caller so it can batch it (one per directory per group commit) off
 * the path of an open(2) that a reader waits on.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hoardfs/log.h"
#include "hoardfs/store.h"
#include "hoardfs/util.h"

#define STORE_DIR_MODE	0700 /* the cache may hold private objects */
#define STORE_FILE_MODE 0600 /* likewise, for each data file */
#define STORE_FANOUT	2    /* hex digits of the name used as subdir */

/*
 * Invariant: dir is the path given to store_open(), and data_fd is an open
 * directory fd of dir/data, mode 0700, for the whole life of the store.
 */
struct store {
	char *dir;   /* the cache dir as given by the user; owned */
	int data_fd; /* O_DIRECTORY fd of <dir>/data, for the *at() calls */
	int lock_fd; /* fd holding the flock of <dir>/lock, or -1 */
};

/*
 * store_mkdir - create @path with mode 0700 (exactly, whatever the umask);
 * an existing directory is left as it is.
 * Returns 0, -ENOTDIR when @path exists but is not a directory, or -errno
 * from mkdir(2)/chmod(2).
 */
static int store_mkdir(const char *path)
{
	struct stat st;

	if (mkdir(path, STORE_DIR_MODE) == 0) {
		if (chmod(path, STORE_DIR_MODE) != 0)
			return -errno;
		return 0;
	}
	if (errno != EEXIST)
		return -errno;
	if (stat(path, &st) != 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/*
 * store_mkdir_parents - like `mkdir -p`: create every missing directory
 * of @path, each 0700.  Existing directories keep their mode.
 * Returns 0, -ENOMEM, or -errno as store_mkdir().
 */
static int store_mkdir_parents(const char *path)
{
	char *copy = strdup(path);
	char *p;
	int rc;

	if (!copy)
		return -ENOMEM;
	/* Skip leading slashes, then create each prefix ending at a '/'. */
	for (p = copy; *p == '/'; p++)
		;
	for (; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		rc = store_mkdir(copy);
		*p = '/';
		if (rc)
			goto out;
	}
	rc = store_mkdir(copy);
out:
	free(copy);
	return rc;
}

/*
 * store_name_ok - nonzero when @name is exactly STORE_NAME_LEN lower-case
 * hex digits, so it can never leave the data dir ("..", "/").
 */
static int store_name_ok(const char *name)
{
	size_t i;

	for (i = 0; i < STORE_NAME_LEN; i++) {
		char c = name[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return name[i] == '\0';
}

/*
 * store_rel_path - "<h[0..2)>/<h>" of @name into @out, relative to the
 * data dir.  @name must pass store_name_ok().
 */
static void store_rel_path(const char *name,
			   char out[STORE_FANOUT + 1 + STORE_NAME_LEN + 1])
{
	memcpy(out, name, STORE_FANOUT);
	out[STORE_FANOUT] = '/';
	memcpy(out + STORE_FANOUT + 1, name, STORE_NAME_LEN + 1);
}

/*
 * store_mkdir_sub - create the data file subdir @sub (0700 whatever the
 * umask) unless it exists.  Returns 0 or -errno.
 */
static int store_mkdir_sub(struct store *s, const char *sub)
{
	int rc;

	if (mkdirat(s->data_fd, sub, STORE_DIR_MODE) == 0) {
		if (fchmodat(s->data_fd, sub, STORE_DIR_MODE, 0) == 0)
			return 0;
		rc = -errno;
		log_error("store: cannot chmod %s/data/%s: %s", s->dir, sub,
			  strerror(-rc));
		return rc;
	}
	if (errno == EEXIST)
		return 0;
	rc = -errno;
	log_error("store: cannot create %s/data/%s: %s", s->dir, sub,
		  strerror(-rc));
	return rc;
}

/*
 * store_openat - open the data file @rel (relative to the data dir)
 * read-write, creating it and its data/<h[0..2)> dir @sub if missing;
 * *@created says whether this call created the file.  A cached file
 * exists, so the plain open comes first and costs one call; O_EXCL on the
 * creating open makes creation known.  A file removed between the two
 * opens is simply opened again on the next turn.
 * Returns an fd or -errno.
 */
static int store_openat(struct store *s, const char *sub, const char *rel,
			int *created)
{
	const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
	int fd, rc;

	for (;;) {
		fd = openat(s->data_fd, rel, flags);
		if (fd >= 0) {
			*created = 0;
			return fd;
		}
		if (errno != ENOENT)
			break;
		rc = store_mkdir_sub(s, sub);
		if (rc != 0)
			return rc;
		fd = openat(s->data_fd, rel, flags | O_CREAT | O_EXCL,
			    STORE_FILE_MODE);
		if (fd >= 0) {
			*created = 1;
			return fd;
		}
		if (errno != EEXIST)
			break;
	}
	rc = -errno;
	log_error("store: cannot open %s/data/%s: %s", s->dir, rel,
		  strerror(-rc));
	return rc;
}

/*
 * store_sync_dir - fsync(2) the directory @rel of the data dir ("." for
 * the data dir itself), making the entries created in it durable.
 * Returns 0 or -errno.
 */
static int store_sync_dir(struct store *s, const char *rel)
{
	int fd, rc = 0;

	fd = openat(s->data_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc)
		log_error("store: cannot sync %s/data/%s: %s", s->dir, rel,
			  strerror(-rc));
	return rc;
}

int store_open(const char *cache_dir, struct store **out)
{
	struct store *s = NULL;
	char *data = NULL;
	int rc;

	*out = NULL;
	if (!cache_dir || !*cache_dir)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	s->data_fd = -1;
	s->lock_fd = -1;
	s->dir = strdup(cache_dir);
	if (!s->dir || asprintf(&data, "%s/data", cache_dir) < 0) {
		data = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = store_mkdir_parents(cache_dir);
	if (rc) {
		log_error("store: cannot create cache dir %s: %s", cache_dir,
			  strerror(-rc));
		goto out;
	}
	/* An existing cache dir may have been made by hand with 0755. */
	if (chmod(cache_dir, STORE_DIR_MODE) != 0) {
		rc = -errno;
		log_error("store: cannot chmod cache dir %s to 0700: %s",
			  cache_dir, strerror(-rc));
		goto out;
	}
	rc = store_mkdir(data);
	if (rc) {
		log_error("store: cannot create %s: %s", data, strerror(-rc));
		goto out;
	}
	s->data_fd = open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->data_fd < 0) {
		rc = -errno;
		log_error("store: cannot open %s: %s", data, strerror(-rc));
		goto out;
	}
	if (fchmod(s->data_fd, STORE_DIR_MODE) != 0) {
		rc = -errno;
		log_error("store: cannot chmod %s to 0700: %s", data,
			  strerror(-rc));
		goto out;
	}
	*out = s;
	s = NULL;
	rc = 0;
out:
	free(data);
	store_free(s);
	return rc;
}

void store_free(struct store *s)
{
	if (!s)
		return;
	if (s->data_fd >= 0)
		close(s->data_fd);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->dir);
	free(s);
}

int store_name(const char *bucket, const char *key, const char *etag, char *out)
{
	/*
	 * Room for a 63-byte bucket, a 1024-byte key (the S3 and OBS limit)
	 * and a 128-byte ETag, so no allocation in practice.
	 */
	char stack_buf[1280];
	size_t bucket_len = strlen(bucket), key_len = strlen(key);
	size_t etag_len = strlen(etag);
	size_t len = bucket_len + 1 + key_len + 1 + etag_len;
	char *buf = stack_buf;
	int rc;

	if (len > sizeof(stack_buf)) {
		buf = malloc(len);
		if (!buf)
			return -ENOMEM;
	}
	/* bucket NUL key NUL etag: NUL cannot occur in any of the three. */
	memcpy(buf, bucket, bucket_len + 1);
	memcpy(buf + bucket_len + 1, key, key_len + 1);
	memcpy(buf + bucket_len + 1 + key_len + 1, etag, etag_len);
	rc = util_sha256_hex(buf, len, out);
	if (buf != stack_buf)
		free(buf);
	return rc;
}

int store_file_open(struct store *s, const char *name, uint64_t size_bytes,
		    int *reset)
{
	char rel[STORE_FANOUT + 1 + STORE_NAME_LEN + 1];
	char sub[STORE_FANOUT + 1];
	struct stat st;
	int created = 0;
	int fd = -1;
	int rc;

	if (!store_name_ok(name))
		return -EINVAL;
	if (size_bytes > (uint64_t)INT64_MAX)
		return -EFBIG;
	memcpy(sub, name, STORE_FANOUT);
	sub[STORE_FANOUT] = '\0';
	store_rel_path(name, rel);

	rc = store_openat(s, sub, rel, &created);
	if (rc < 0)
		goto out;
	fd = rc;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		log_error("store: cannot stat %s/data/%s: %s", s->dir, rel,
			  strerror(-rc));
		goto out;
	}
	/* open(2) applied the umask: set the mode exactly when it differs. */
	if ((st.st_mode & 07777) != STORE_FILE_MODE &&
	    fchmod(fd, STORE_FILE_MODE) != 0) {
		rc = -errno;
		log_error("store: cannot chmod %s/data/%s: %s", s->dir, rel,
			  strerror(-rc));
		goto out;
	}
	/* Skip the call when the size is right: it would bump the mtime. */
	if ((uint64_t)st.st_size != size_bytes &&
	    ftruncate(fd, (off_t)size_bytes) != 0) {
		rc = -errno;
		log_error("store: cannot size %s/data/%s to %llu bytes: %s",
			  s->dir, rel, (unsigned long long)size_bytes,
			  strerror(-rc));
		goto out;
	}
	*reset = created || (uint64_t)st.st_size != size_bytes;
	rc = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int store_sync_all(struct store *s)
{
	int rc;

	if (syncfs(s->data_fd) == 0)
		return 0;
	rc = -errno;
	log_error("store: cannot sync the filesystem of %s: %s", s->dir,
		  strerror(-rc));
	return rc;
}

int store_sync_dirs(struct store *s, const char *name)
{
	char sub[STORE_FANOUT + 1];
	int rc;

	if (!store_name_ok(name))
		return -EINVAL;
	memcpy(sub, name, STORE_FANOUT);
	sub[STORE_FANOUT] = '\0';
	/*
	 * The file's entry, then the data dir's entry for the subdir: always
	 * both, since the subdir may have been created a moment ago by
	 * another thread that has not synced it yet.  Cheap when clean.
	 */
	rc = store_sync_dir(s, sub);
	if (rc == 0)
		rc = store_sync_dir(s, ".");
	return rc;
}

int store_file_remove(struct store *s, const char *name)
{
	char rel[STORE_FANOUT + 1 + STORE_NAME_LEN + 1];
	int rc;

	if (!store_name_ok(name))
		return -EINVAL;
	store_rel_path(name, rel);
	if (unlinkat(s->data_fd, rel, 0) == 0 || errno == ENOENT)
		return 0;
	rc = -errno;
	log_error("store: cannot remove %s/data/%s: %s", s->dir, rel,
		  strerror(-rc));
	return rc;
}

int store_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* pwrite(2) returns 0 only for len 0; never spin on it. */
		if (n == 0)
			return -EIO;
		assert((size_t)n <= len);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

const char *store_dir(const struct store *s)
{
	return s->dir;
}

int store_lock(struct store *s, long *holder_pid)
{
	char path[PATH_MAX], pid[32];
	ssize_t n;
	int fd, rc;

	*holder_pid = 0;
	if (snprintf(path, sizeof(path), "%s/lock", s->dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, STORE_FILE_MODE);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		if (n > 0) {
			pid[n] = '\0';
			*holder_pid = strtol(pid, NULL, 10);
		}
		close(fd);
		return rc;
	}
	/* Keep fd open (and so the lock) for the life of the process; the
	 * pid is only a hint for the message a second daemon prints. */
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (fchmod(fd, STORE_FILE_MODE) != 0 || ftruncate(fd, 0) != 0 ||
	    pwrite(fd, pid, (size_t)n, 0) != n)
		log_warn("store: cannot write %s: %s", path, strerror(errno));
	s->lock_fd = fd;
	return 0;
}

/* Call @fn for each valid data file name in data/<sub>. */
/* A directory stream for @rel below the data dir, in *@out; 0 or -errno. */
static int store_opendir(struct store *s, const char *rel, DIR **out)
{
	int fd = openat(s->data_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	*out = fdopendir(fd);
	if (!*out) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return 0;
}

static int store_walk_sub(struct store *s, const char *sub,
			  int (*fn)(void *arg, const char *name,
				    const struct stat *st),
			  void *arg)
{
	struct dirent *e;
	DIR *d;
	int rc;

	rc = store_opendir(s, sub, &d);
	if (rc != 0)
		return rc;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		struct stat st;

		if (!store_name_ok(e->d_name) ||
		    strncmp(e->d_name, sub, STORE_FANOUT) != 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		rc = fn(arg, e->d_name, &st);
	}
	closedir(d);
	return rc;
}

int store_walk(struct store *s,
	       int (*fn)(void *arg, const char *name, const struct stat *st),
	       void *arg)
{
	struct dirent *e;
	DIR *d;
	int rc;

	rc = store_opendir(s, ".", &d);
	if (rc != 0)
		return rc;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strlen(e->d_name) != STORE_FANOUT ||
		    strspn(e->d_name, "0123456789abcdef") != STORE_FANOUT)
			continue;
		rc = store_walk_sub(s, e->d_name, fn, arg);
	}
	closedir(d);
	return rc;
}

static int store_wipe_one(void *arg, const char *name, const struct stat *st)
{
	(void)st;
	int rc = store_file_remove(arg, name);

	return rc == -ENOENT ? 0 : rc;
}

int store_wipe(struct store *s)
{
	char sub[STORE_FANOUT + 1];
	int rc = store_walk(s, store_wipe_one, s);

	/* Then the 256 fan-out dirs; ENOENT for the ones never made. */
	for (unsigned i = 0; i < 256; i++) {
		snprintf(sub, sizeof(sub), "%02x", i);
		if (unlinkat(s->data_fd, sub, AT_REMOVEDIR) != 0 &&
		    errno != ENOENT && rc == 0)
			rc = -errno;
	}
	return rc;
}

int store_lock_pid(struct store *s)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

	if (s->lock_fd < 0)
		return -EBADF;
	if (ftruncate(s->lock_fd, 0) != 0 ||
	    pwrite(s->lock_fd, pid, (size_t)n, 0) != n)
		return -errno;
	return 0;
}
