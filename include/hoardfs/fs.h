/* SPDX-License-Identifier: MIT */
/*
 * The read-only FUSE filesystem (libfuse low-level API): the inode table,
 * directories implied by key prefixes, listings cached under the metadata
 * TTL, and the handlers that answer lookups, attributes, directory reads,
 * opens, reads (from the cache file by splice) and extended attributes,
 * among them the control attributes through which hoardfs warm, status and
 * evict talk to the daemon (src/fs/ctl.c).  Every write operation answers
 * EROFS.
 */
#ifndef HOARDFS_FS_H
#define HOARDFS_FS_H

#include <stdint.h>
#include <sys/types.h>

#include <fuse_lowlevel.h>

#include "hoardfs/client.h"
#include "hoardfs/idx.h"
#include "hoardfs/sched.h"
#include "hoardfs/store.h"

struct fs_config {
	const char *bucket; /* bucket name */
	const char *prefix; /* key prefix mounted as the root: "" or "a/b/" */
	int64_t metadata_ttl_sec; /* listing and attribute lifetime; -1 for
				   * forever, 0 to ask the server every time */
	int64_t negative_ttl_sec; /* how long the kernel may remember that a
				   * name does not exist; -1 for forever */
	unsigned prefetch_dir;	  /* files after an opened one, in listing
				   * order, to fetch ahead (0: none) */
	uid_t uid;		  /* owner of every file and directory */
	gid_t gid;		  /* group of every file and directory */
	mode_t file_mode;	  /* permission bits of files, e.g. 0444 */
	mode_t dir_mode; /* permission bits of directories, e.g. 0555 */
};

struct fs;

/*
 * fs_new - the filesystem state for one mount.  @client, @store and @idx
 * (where listings are kept across remounts) are borrowed and must outlive
 * it; strings in @cfg are copied.  The scheduler
 * is attached later with fs_set_sched(), once the process has daemonized.
 * Returns 0 with *@out owning it, or -ENOMEM.
 */
int fs_new(const struct fs_config *cfg, struct client *client,
	   struct store *store, struct idx *idx, struct fs **out)
	__attribute__((warn_unused_result));

/* fs_set_sched - attach the scheduler before the session loop starts. */
void fs_set_sched(struct fs *fs, struct sched *sched);

/*
 * A provider of the status document that getxattr(MOUNTPOINT,
 * "user.hoardfs.status") answers: puts a malloc'd text of *@len bytes in
 * *@out (the caller frees it) and returns 0, or a negative errno.  Called
 * from FUSE threads, concurrently; must not block on the network.
 */
typedef int (*fs_status_fn)(void *arg, char **out, size_t *len);

/* fs_set_status_fn - set the status provider before the session loop
 * starts (without one, the status attribute answers ENODATA). */
void fs_set_status_fn(struct fs *fs, fs_status_fn fn, void *arg);

/*
 * Work that must follow the kernel's handling of the FUSE INIT reply,
 * which sets the mount's read-ahead from it: called once, from a FUSE
 * thread, at the first LOOKUP or GETATTR (every use of the mount starts
 * with one).  It must not touch the mount itself.
 */
typedef void (*fs_after_init_fn)(void *arg);

/* fs_set_after_init - set that work before the session loop starts. */
void fs_set_after_init(struct fs *fs, fs_after_init_fn fn, void *arg);

/* fs_free - free @fs and every inode (NULL is a no-op); call after the
 * session loop ended. */
void fs_free(struct fs *fs);

/* fs_ops - the handler table to pass to fuse_session_new() with the fs as
 * userdata. */
const struct fuse_lowlevel_ops *fs_ops(void);

#endif
