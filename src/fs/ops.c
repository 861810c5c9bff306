// SPDX-License-Identifier: MIT
/*
 * The FUSE low-level handlers.  Each replies exactly once.  Metadata comes
 * from directory listings (inode.c); file data from the scheduler, whose
 * cache file is handed to the kernel as an fd and offset so that cached
 * reads are spliced without a copy through user space.  Writes of any kind
 * answer EROFS: the mount is read-only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs/fs_int.h"
#include "hoardfs/log.h"

/* Extended attribute names, in listxattr order (documented in the man
 * page).  The user namespace is what getfattr shows by default. */
/* Background requests the kernel may queue (see op_init). */
#define FS_MAX_BACKGROUND 64
/* Largest READ the kernel sends, bytes: see op_init(). */
#define FS_MAX_READ_BYTES (512 << 10)

#define XATTR_KEY    "user.hoardfs.key"
#define XATTR_ETAG   "user.hoardfs.etag"
#define XATTR_SIZE   "user.hoardfs.size"
#define XATTR_CACHED "user.hoardfs.cached_bytes"
#define XATTR_STATE  "user.hoardfs.state"

static struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * The one mapping from an internal -errno to what a caller of the mount
 * sees: the errors that say something true about the file pass through,
 * cancellation at shutdown is EINTR, everything else is EIO (the log line
 * written where it happened says what).
 */
int fs_errno(int rc)
{
	switch (rc) {
	case -ENOENT:
	case -ESTALE:
	case -EACCES:
	case -EPERM:
	case -ENOMEM:
	case -ENOSPC:
	case -EBUSY:
	case -EINTR:
		return -rc;
	case -ECANCELED:
		return EINTR;
	default:
		return EIO;
	}
}

static void fill_entry(struct fs *fs, struct fs_inode *ino,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino->ino;
	e->attr_timeout = fs_ttl_sec(fs);
	e->entry_timeout = fs_ttl_sec(fs);
	pthread_mutex_lock(&fs->lock);
	fs_attr_locked(fs, ino, &e->attr);
	pthread_mutex_unlock(&fs->lock);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* Cached reads reply with an fd: let libfuse splice it. */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/* Always readdirplus: `ls -l` then needs no lookup per entry. */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* The kernel's default of 12 background requests (read-ahead and
	 * async reads) starves 8 parallel readers of many files; readers
	 * here wait on the network, not on our CPU, so allow many more. */
	conn->max_background = FS_MAX_BACKGROUND;
	conn->congestion_threshold = FS_MAX_BACKGROUND * 3 / 4;
	/* libfuse 3.14 derives the kernel's request size (max_pages) from
	 * max_write.  A READ reply that does not fit the splice pipe
	 * (pipe-max-size, 1 MiB by default) is copied through a buffer
	 * instead: with read-ahead of 1 MiB or more, warm reads fell from
	 * ~2 GB/s to ~300 MB/s.  A read-only mount writes nothing. */
	conn->max_write = FS_MAX_READ_BYTES;
}

/* Run the after-INIT work once (fs_set_after_init()). */
static void after_init(struct fs *fs)
{
	if (atomic_load(&fs->after_init_due) &&
	    atomic_exchange(&fs->after_init_due, 0))
		fs->after_init(fs->after_init_arg);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	struct fs_inode *dir = fs_inode_of(fs, parent), *ino;
	struct fuse_entry_param e;
	int rc;

	after_init(fs);

	if (!dir->is_dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (strlen(name) > FS_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	rc = fs_lookup(fs, dir, name, &ino);
	if (rc == -ENOENT) {
		/* A zero ino with a timeout is a negative entry the kernel
		 * caches for --negative-ttl. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs_negative_ttl_sec(fs);
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc != 0) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	fill_entry(fs, ino, &e);
	if (fuse_reply_entry(req, &e) != 0)
		fs_inode_forget(fs, ino->ino, 1);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_inode_forget(req_fs(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_inode_forget(req_fs(req), forgets[i].ino,
				forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino_nr,
		       struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct stat st;

	after_init(fs);

	pthread_mutex_lock(&fs->lock);
	fs_attr_locked(fs, fs_inode_of(fs, ino_nr), &st);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_attr(req, &st, fs_ttl_sec(fs));
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino_nr,
		       struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_inode *dir = fs_inode_of(fs, ino_nr);
	struct fs_listing *l;
	int rc;

	if (!dir->is_dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* The handle keeps the listing it opened with, so offsets stay
	 * meaningful even if the directory is listed again meanwhile. */
	rc = fs_listing_get(fs, dir, 1, &l);
	if (rc != 0) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l;
	fi->cache_readdir = fs->cfg.metadata_ttl_sec != 0;
	fi->keep_cache = fi->cache_readdir;
	if (fuse_reply_open(req, fi) != 0)
		fs_listing_put(fs, l);
}

/*
 * Offsets: 1 is after ".", 2 after "..", 2 + i + 1 after child i.
 * With @plus, every child returned gets a lookup reference.
 */
static void readdir_common(fuse_req_t req, fuse_ino_t ino_nr, size_t size,
			   off_t off, struct fuse_file_info *fi, int plus)
{
	struct fs *fs = req_fs(req);
	struct fs_listing *l = (struct fs_listing *)(uintptr_t)fi->fh;
	struct fs_inode *dir = fs_inode_of(fs, ino_nr);
	char *buf = malloc(size);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t i = off; (size_t)i < l->n + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : NULL;
		const struct fs_child *c = name ? NULL : &l->v[i - 2];
		struct fuse_entry_param e;
		struct fs_inode *ino;
		size_t need;

		memset(&e, 0, sizeof(e));
		if (c) {
			name = c->name;
			e.attr.st_mode = c->is_dir ? S_IFDIR : S_IFREG;
		} else {
			e.attr.st_mode = S_IFDIR;
			e.attr.st_ino = i == 0 ? ino_nr : FUSE_ROOT_ID;
		}
		if (!plus) {
			need = fuse_add_direntry(req, buf + used, size - used,
						 name, &e.attr, i + 1);
			if (need > size - used)
				break;
			used += need;
			continue;
		}
		need = fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0);
		if (need > size - used)
			break;
		if (c) {
			ino = fs_inode_ref(fs, dir, l->fetched_ms, c);
			if (!ino)
				break;
			fill_entry(fs, ino, &e);
		}
		used += fuse_add_direntry_plus(req, buf + used, size - used,
					       name, &e, i + 1);
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	fs_listing_put(req_fs(req), (struct fs_listing *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino_nr,
		    struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_inode *ino = fs_inode_of(fs, ino_nr);
	struct sched_obj *o;
	char *key = ino->key, etag[IDX_ETAG_MAX];
	uint64_t size;
	int64_t mtime;
	int rc;

	if (ino->is_dir) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* Past the TTL, check the version before serving cached bytes. */
	rc = fs_inode_revalidate(fs, ino);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	snprintf(etag, sizeof(etag), "%s", ino->etag ? ino->etag : "");
	size = ino->size;
	mtime = ino->mtime_sec;
	/* The page cache may keep what it holds only if it is of the same
	 * version this open will read. */
	fi->keep_cache =
		ino->opened_etag && strcmp(ino->opened_etag, etag) == 0;
	if (!fi->keep_cache) {
		free(ino->opened_etag);
		ino->opened_etag = strdup(etag);
	}
	pthread_mutex_unlock(&fs->lock);

	rc = sched_obj_open(fs->sched, key, etag, size, mtime, &o);
	if (rc != 0) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)o;
	if (fuse_reply_open(req, fi) != 0)
		sched_obj_put(o);
	fs_prefetch_after(fs, ino);
}

/* The cache cannot hold these bytes now: fetch them for this read alone,
 * so a full cache disk slows a reader down but never fails it. */
static void read_direct(fuse_req_t req, struct sched_obj *o, size_t size,
			off_t off)
{
	char *data = malloc(size ? size : 1);
	ssize_t n;

	if (!data) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = sched_obj_read_direct(o, (uint64_t)off, size, data);
	if (n < 0)
		fuse_reply_err(req, fs_errno((int)n));
	else
		fuse_reply_buf(req, data, (size_t)n);
	free(data);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sched_obj *o = (struct sched_obj *)(uintptr_t)fi->fh;
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	int rc = sched_obj_wait(o, (uint64_t)off, size);

	if (rc == -ENOSPC) {
		read_direct(req, o, size, off);
		return;
	}
	if (rc != 0) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	/* The kernel stops at st_size; libfuse reads the fd and replies with
	 * what it got, so a range past the end reads short, as it should. */
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = sched_obj_fd(o);
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	sched_obj_put((struct sched_obj *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	struct statvfs st;

	/* Report the cache filesystem: its size and free space are what
	 * bound the cache.  (All zero free would look like a full disk to
	 * monitoring.)  No inodes can be made on a read-only mount. */
	if (statvfs(store_dir(fs->store), &st) != 0)
		memset(&st, 0, sizeof(st));
	st.f_ffree = st.f_favail = 0;
	st.f_namemax = FS_NAME_MAX;
	fuse_reply_statfs(req, &st);
}

/* Format one attribute's value into @out; returns its length or -errno. */
static int xattr_value(struct fs *fs, struct fs_inode *ino, const char *name,
		       char *out, size_t cap)
{
	char etag[IDX_ETAG_MAX];
	uint64_t size, cached = 0;
	int fetching = 0, rc;

	if (strcmp(name, XATTR_KEY) == 0)
		return snprintf(out, cap, "%s", ino->key);
	if (ino->is_dir)
		return -ENODATA;
	pthread_mutex_lock(&fs->lock);
	snprintf(etag, sizeof(etag), "%s", ino->etag ? ino->etag : "");
	size = ino->size;
	pthread_mutex_unlock(&fs->lock);
	if (strcmp(name, XATTR_ETAG) == 0)
		return snprintf(out, cap, "%s", etag);
	if (strcmp(name, XATTR_SIZE) == 0)
		return snprintf(out, cap, "%llu", (unsigned long long)size);
	if (strcmp(name, XATTR_CACHED) != 0 && strcmp(name, XATTR_STATE) != 0)
		return -ENODATA;
	rc = sched_cached_bytes(fs->sched, ino->key, etag, &cached, &fetching);
	if (rc != 0)
		return rc;
	if (strcmp(name, XATTR_CACHED) == 0)
		return snprintf(out, cap, "%llu", (unsigned long long)cached);
	return snprintf(out, cap, "%s",
			cached == size ? "cached"
			: fetching     ? "fetching"
			: cached       ? "partial"
				       : "absent");
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino_nr, const char *name,
			size_t size)
{
	struct fs *fs = req_fs(req);
	char value[2048];
	int len;

	if (fs_ctl_getxattr(req, fs, fs_inode_of(fs, ino_nr), name, size))
		return; /* warm, evict, status...: see ctl.c */
	len = xattr_value(fs, fs_inode_of(fs, ino_nr), name, value,
			  sizeof(value));
	if (len < 0)
		fuse_reply_err(req, -len);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)len);
	else if ((size_t)len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, value, (size_t)len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino_nr, size_t size)
{
	static const char file_names[] =
		XATTR_KEY "\0" XATTR_ETAG "\0" XATTR_SIZE "\0" XATTR_CACHED
			  "\0" XATTR_STATE;
	static const char dir_names[] = XATTR_KEY;
	/* Only the side-effect-free, cheap control attribute is listed, so
	 * `getfattr -d` never warms, evicts or walks a tree (ctl.c). */
	static const char root_names[] = XATTR_KEY "\0user.hoardfs.status";
	struct fs *fs = req_fs(req);
	struct fs_inode *ino = fs_inode_of(fs, ino_nr);
	int is_dir = ino->is_dir;
	const char *names = is_dir ? dir_names : file_names;
	size_t len = is_dir ? sizeof(dir_names) : sizeof(file_names);

	if (ino == fs->root && fs->status_fn) {
		names = root_names;
		len = sizeof(root_names);
	}

	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, len);
}

/* Every operation that would change the tree. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static const struct fuse_lowlevel_ops fs_lowlevel_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.create = op_create,
	.write = op_write,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};

const struct fuse_lowlevel_ops *fs_ops(void)
{
	return &fs_lowlevel_ops;
}
