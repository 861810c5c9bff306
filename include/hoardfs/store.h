/* SPDX-License-Identifier: MIT */
/*
 * The cache's data files on local disk.  One sparse file per object
 * version, named by SHA-256 of (bucket, key, ETag) so that neither the key's
 * text nor its length ever reaches the local filesystem:
 *   <cache_dir>/data/<h[0..2)>/<h>      (h = 64 hex digits)
 * Directories are 0700 and files 0600.  The store only creates, opens and
 * removes files; which bytes are valid is the index's business (idx.h).
 */
#ifndef HOARDFS_STORE_H
#define HOARDFS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define STORE_NAME_LEN 64 /* hex digits of the data file's name */

struct store;

/*
 * store_open - use @cache_dir (created 0700 with its parents if missing;
 * an existing dir is chmod'ed to 0700) and its data/ subdir.
 * On success *@out owns a new store; free it with store_free().
 * Returns 0, -EACCES/-ENOTDIR/-EROFS/... from mkdir(2), -ENOMEM, or
 * -EINVAL for an empty path.
 * Thread-safe after it returns.
 */
int store_open(const char *cache_dir, struct store **out)
	__attribute__((warn_unused_result));

/* store_free - release @s (NULL is a no-op).  Open fds stay valid. */
void store_free(struct store *s);

/*
 * store_name - the data file name of one object version: lower-case hex
 * SHA-256 over bucket, NUL, key, NUL, etag.  @out holds STORE_NAME_LEN + 1.
 * Returns 0, -EIO (OpenSSL failure) or -ENOMEM (only for inputs over
 * 1280 bytes, which S3 limits never produce).
 */
int store_name(const char *bucket, const char *key, const char *etag, char *out)
	__attribute__((warn_unused_result));

/*
 * store_file_open - open (creating 0600 if missing) the data file @name and
 * size it to @size_bytes with ftruncate(2) (sparse; existing bytes below
 * @size_bytes are kept).  *@reset is set to 1 when the file was created or
 * had another size, so the index's extents for it cannot be trusted, else
 * to 0.  A created file's entry is not yet durable: call store_sync_dirs()
 * before recording any of its bytes.
 * Returns an fd opened O_RDWR|O_CLOEXEC, owned by the caller, or -errno
 * from open(2)/ftruncate(2) (-ENOSPC, -EIO, ...), -EINVAL when @name is
 * not STORE_NAME_LEN lower-case hex digits, -EFBIG when @size_bytes
 * exceeds INT64_MAX.
 */
int store_file_open(struct store *s, const char *name, uint64_t size_bytes,
		    int *reset) __attribute__((warn_unused_result));

/*
 * store_sync_dirs - fsync(2) the directories holding data file @name, so
 * that its directory entry survives a crash.  Returns 0, -EINVAL for a bad
 * name, or -errno from fsync(2).  Blocks on the disk.
 */
int store_sync_dirs(struct store *s, const char *name)
	__attribute__((warn_unused_result));

/*
 * store_sync_all - syncfs(2) the filesystem holding the cache dir: every
 * data file's bytes and directory entry written before the call are
 * durable when it returns 0 (Linux >= 5.8 also reports writeback errors
 * of any file there).  Cheaper than one fdatasync(2) per file for a batch
 * of many small files.  Returns 0 or -errno.  Blocks on the disk.
 */
int store_sync_all(struct store *s) __attribute__((warn_unused_result));

/*
 * store_lock - take the cache dir's lock file (<cache_dir>/lock, 0600) with
 * flock(2), so one daemon owns the cache dir; the lock is held until the
 * process exits (it survives fork, so take it before daemonizing).  The
 * holder's pid is written into the file.  Returns 0, -EBUSY with the
 * holder's pid in *@holder_pid (0 if unknown) when another process holds
 * it, or -errno.
 */
int store_lock(struct store *s, long *holder_pid)
	__attribute__((warn_unused_result));

/*
 * store_lock_pid - write this process's pid into the held lock file again
 * (after daemonizing, the holder is the child).  Returns 0, -EBADF when
 * the lock is not held, or -errno.
 */
int store_lock_pid(struct store *s);

/*
 * store_wipe - remove every data file and the data/ subdirectories (for
 * --ephemeral at unmount).  The index files are the caller's.  Returns 0 or
 * the first -errno met (it goes on past errors).
 */
int store_wipe(struct store *s);

/*
 * store_walk - call @fn(@arg, name, st) for every data file in the store,
 * with its lstat(2), in no particular order.  Stops and returns the first
 * nonzero value @fn returns; else 0, or -errno when a directory cannot be
 * read.  Files whose names are not valid data file names are skipped.
 * Blocks on the disk.
 */
int store_walk(struct store *s,
	       int (*fn)(void *arg, const char *name, const struct stat *st),
	       void *arg);

/*
 * store_file_remove - unlink the data file @name.  A missing file is not an
 * error.  Returns 0, -EINVAL for a malformed @name, or -errno from
 * unlink(2).
 */
int store_file_remove(struct store *s, const char *name);

/*
 * store_pwrite_all - write all @len bytes of @buf at @off in @fd, retrying
 * short writes and EINTR.  Returns 0 or -errno (-ENOSPC, -EIO, -EFBIG when
 * @off + @len exceeds INT64_MAX or the file size limit); after an error
 * some leading bytes may have been written.
 */
int store_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
	__attribute__((warn_unused_result));

/* store_dir - the cache dir given to store_open(); owned by @s. */
const char *store_dir(const struct store *s);

#endif
