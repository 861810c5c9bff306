// SPDX-License-Identifier: MIT
/*
 * The control channel: extended attributes through which `hoardfs warm`,
 * `hoardfs status` and `hoardfs evict` talk to a running daemon from any
 * process that sees the mountpoint (a sidecar container shares nothing
 * else).  The mount is read-only, so the kernel refuses setxattr and
 * writes before they reach us: every command is a getxattr, some with
 * side effects.
 *
 *   file  user.hoardfs.warm       fetch the whole object, block until it is
 *                                 cached: "cached SIZE", or fail with errno
 *   file  user.hoardfs.evict      drop its cached bytes: "evicted BYTES";
 *                                 EBUSY while open or being fetched; EPERM
 *                                 unless the caller is root or the daemon's
 *                                 user (also for evict_all)
 *   root  user.hoardfs.evict_all  the same for every cached object of the
 *                                 bucket: "evicted BYTES objects N busy K"
 *   root  user.hoardfs.status     the status document (JSON), built by the
 *                                 provider set with fs_set_status_fn()
 *   dir   user.hoardfs.summary    {"files","dirs","bytes","cached_bytes",
 *                                 "cached_files"} of the tree below
 *   dir   user.hoardfs.size, .cached_bytes, .state: the same tree's figures
 *
 * None of these is named by listxattr except status, so `getfattr -d`
 * neither triggers a side effect nor walks a tree.  A size-0 probe (how
 * callers ask for the length first) answers an upper bound and does
 * nothing, so a warm or an evict runs once, with the real read.
 * What this file does not do: walk trees for the commands (the CLI does),
 * or keep any state of its own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs_int.h"
#include "hoardfs/log.h"

#define CTL_PREFIX    "user.hoardfs."
#define CTL_WARM      CTL_PREFIX "warm"
#define CTL_EVICT     CTL_PREFIX "evict"
#define CTL_EVICT_ALL CTL_PREFIX "evict_all"
#define CTL_STATUS    CTL_PREFIX "status"
#define CTL_SUMMARY   CTL_PREFIX "summary"
/* The per-file attributes of ops.c, answered on directories here. */
#define CTL_SIZE   CTL_PREFIX "size"
#define CTL_CACHED CTL_PREFIX "cached_bytes"
#define CTL_STATE  CTL_PREFIX "state"

/* Upper bounds answered to size-0 probes: a warm or evict answer is two
 * words and a number; a summary five numbers; the status document is
 * about 1.5 KiB (and refused with ERANGE past this bound). */
#define CTL_SHORT_MAX	128
#define CTL_SUMMARY_MAX 512
#define CTL_STATUS_MAX	16384

/* Figures of a tree, from its listings and the index. */
struct ctl_summary {
	uint64_t files;	       /* regular files */
	uint64_t dirs;	       /* directories below the top one */
	uint64_t bytes;	       /* their sizes */
	uint64_t cached_bytes; /* of which in the cache */
	uint64_t cached_files; /* files wholly in the cache */
};

static int ctl_warm(struct fs *fs, struct fs_inode *ino, char *out, size_t cap)
{
	char etag[IDX_ETAG_MAX];
	struct sched_obj *o;
	uint64_t size, cached = 0;
	int64_t mtime;
	int fetching, rc;

	pthread_mutex_lock(&fs->lock);
	snprintf(etag, sizeof(etag), "%s", ino->etag ? ino->etag : "");
	size = ino->size;
	mtime = ino->mtime_sec;
	pthread_mutex_unlock(&fs->lock);
	/* Already cached: no request, and no write to the index either. */
	rc = sched_cached_bytes(fs->sched, ino->key, etag, &cached, &fetching);
	if (rc == 0 && cached == size)
		return snprintf(out, cap, "cached %" PRIu64, size);
	rc = sched_obj_open(fs->sched, ino->key, etag, size, mtime, &o);
	if (rc == 0) {
		rc = sched_obj_wait_complete(o);
		sched_obj_put(o);
	}
	if (rc != 0) {
		log_warn("warm s3://%s/%s: %s", fs->cfg.bucket, ino->key,
			 strerror(-rc));
		return -fs_errno(rc);
	}
	log_debug("warm s3://%s/%s: cached %" PRIu64 " bytes", fs->cfg.bucket,
		  ino->key, size);
	return snprintf(out, cap, "cached %" PRIu64, size);
}

static int ctl_evict(struct fs *fs, struct fs_inode *ino, char *out, size_t cap)
{
	uint64_t bytes = 0;
	int rc = sched_evict_key(fs->sched, ino->key, &bytes);

	if (rc != 0)
		return -fs_errno(rc);
	return snprintf(out, cap, "evicted %" PRIu64, bytes);
}

static int ctl_evict_all(struct fs *fs, char *out, size_t cap)
{
	uint64_t bytes, objects, busy;
	int rc = sched_evict_all(fs->sched, &bytes, &objects, &busy);

	if (rc != 0)
		return -fs_errno(rc);
	return snprintf(out, cap,
			"evicted %" PRIu64 " objects %" PRIu64 " busy %" PRIu64,
			bytes, objects, busy);
}

/* The key of file @name in directory @dir (malloc'd), or NULL. */
static char *ctl_child_key(const struct fs_inode *dir, const char *name)
{
	char *key = NULL;

	if (asprintf(&key, "%s%s", dir->key, name) < 0)
		return NULL;
	return key;
}

/*
 * Add the tree below @dir to @sum: its listing (cached while younger than
 * the TTL, in memory or in the index, else listed again), then each
 * subdirectory through an inode reference taken and given back, as
 * readdirplus would.  Recursion depth is bounded by the key length limit
 * (1024 bytes, so 512 levels).
 */
static int ctl_sum_dir(struct fs *fs, struct fs_inode *dir,
		       struct ctl_summary *sum)
{
	struct fs_listing *l;
	int rc = fs_listing_get(fs, dir, 1, &l);

	if (rc != 0)
		return rc;
	for (size_t i = 0; i < l->n && rc == 0; i++) {
		const struct fs_child *c = &l->v[i];
		uint64_t cached = 0;
		int fetching = 0;
		char *key;

		if (c->is_dir) {
			struct fs_inode *sub =
				fs_inode_ref(fs, dir, l->fetched_ms, c);

			if (!sub) {
				rc = -ENOMEM;
				break;
			}
			sum->dirs++;
			rc = ctl_sum_dir(fs, sub, sum);
			fs_inode_forget(fs, sub->ino, 1);
			continue;
		}
		key = ctl_child_key(dir, c->name);
		if (!key) {
			rc = -ENOMEM;
			break;
		}
		rc = sched_cached_bytes(fs->sched, key, c->etag ? c->etag : "",
					&cached, &fetching);
		free(key);
		sum->files++;
		sum->bytes += c->size;
		if (cached > c->size)
			cached = c->size;
		sum->cached_bytes += cached;
		if (cached == c->size)
			sum->cached_files++;
	}
	fs_listing_put(fs, l);
	return rc;
}

static int ctl_dir_value(struct fs *fs, struct fs_inode *dir, const char *name,
			 char *out, size_t cap)
{
	struct ctl_summary sum = {0};
	int rc = ctl_sum_dir(fs, dir, &sum);

	if (rc != 0) {
		log_warn("summary of s3://%s/%s: %s", fs->cfg.bucket, dir->key,
			 strerror(-rc));
		return -fs_errno(rc);
	}
	if (strcmp(name, CTL_SIZE) == 0)
		return snprintf(out, cap, "%" PRIu64, sum.bytes);
	if (strcmp(name, CTL_CACHED) == 0)
		return snprintf(out, cap, "%" PRIu64, sum.cached_bytes);
	if (strcmp(name, CTL_STATE) == 0)
		return snprintf(out, cap, "%s",
				sum.cached_files == sum.files ? "cached"
				: sum.cached_bytes	      ? "partial"
							      : "absent");
	return snprintf(out, cap,
			"{\"files\":%" PRIu64 ",\"dirs\":%" PRIu64
			",\"bytes\":%" PRIu64 ",\"cached_bytes\":%" PRIu64
			",\"cached_files\":%" PRIu64 "}",
			sum.files, sum.dirs, sum.bytes, sum.cached_bytes,
			sum.cached_files);
}

/* Reply with @len bytes of @value to a getxattr of @size bytes. */
static void ctl_reply(fuse_req_t req, const char *value, size_t len,
		      size_t size)
{
	if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, value, len);
}

static void ctl_status(fuse_req_t req, struct fs *fs, size_t size)
{
	char *doc = NULL;
	size_t len = 0;
	int rc;

	if (!fs->status_fn) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (size == 0) {
		fuse_reply_xattr(req, CTL_STATUS_MAX);
		return;
	}
	rc = fs->status_fn(fs->status_arg, &doc, &len);
	if (rc != 0)
		fuse_reply_err(req, -fs_errno(rc));
	else
		ctl_reply(req, doc, len, size);
	free(doc);
}

/* Whether the caller of @req may evict: uid 0, or the daemon's own uid. */
static int ctl_may_evict(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return ctx && (ctx->uid == 0 || ctx->uid == geteuid());
}

int fs_ctl_getxattr(fuse_req_t req, struct fs *fs, struct fs_inode *ino,
		    const char *name, size_t size)
{
	int is_root = ino == fs->root, is_dir = ino->is_dir, len;
	size_t bound = CTL_SHORT_MAX;
	char value[CTL_SUMMARY_MAX];

	if (strncmp(name, CTL_PREFIX, strlen(CTL_PREFIX)) != 0)
		return 0;
	if (strcmp(name, CTL_STATUS) == 0) {
		if (!is_root)
			return 0;
		ctl_status(req, fs, size);
		return 1;
	}
	if (strcmp(name, CTL_WARM) == 0 || strcmp(name, CTL_EVICT) == 0) {
		if (is_dir) {
			fuse_reply_err(req, EISDIR);
			return 1;
		}
	} else if (strcmp(name, CTL_EVICT_ALL) == 0) {
		if (!is_root)
			return 0;
	} else if (strcmp(name, CTL_SUMMARY) == 0 ||
		   (is_dir && (strcmp(name, CTL_SIZE) == 0 ||
			       strcmp(name, CTL_CACHED) == 0 ||
			       strcmp(name, CTL_STATE) == 0))) {
		if (!is_dir)
			return 0;
		bound = CTL_SUMMARY_MAX;
	} else {
		return 0; /* an ordinary attribute: ops.c answers it */
	}
	/* Dropping cached data is the administrator's: root or the user the
	 * daemon runs as (warming is no more than reading). */
	if ((strcmp(name, CTL_EVICT) == 0 ||
	     strcmp(name, CTL_EVICT_ALL) == 0) &&
	    !ctl_may_evict(req)) {
		fuse_reply_err(req, EPERM);
		return 1;
	}
	/* A probe for the length: promise enough room, do nothing yet. */
	if (size == 0) {
		fuse_reply_xattr(req, bound);
		return 1;
	}
	if (strcmp(name, CTL_WARM) == 0)
		len = ctl_warm(fs, ino, value, sizeof(value));
	else if (strcmp(name, CTL_EVICT) == 0)
		len = ctl_evict(fs, ino, value, sizeof(value));
	else if (strcmp(name, CTL_EVICT_ALL) == 0)
		len = ctl_evict_all(fs, value, sizeof(value));
	else
		len = ctl_dir_value(fs, ino, name, value, sizeof(value));
	if (len < 0)
		fuse_reply_err(req, -len);
	else
		ctl_reply(req, value, (size_t)len, size);
	return 1;
}

void fs_set_status_fn(struct fs *fs, fs_status_fn fn, void *arg)
{
	fs->status_fn = fn;
	fs->status_arg = arg;
}

void fs_set_after_init(struct fs *fs, fs_after_init_fn fn, void *arg)
{
	fs->after_init = fn;
	fs->after_init_arg = arg;
	atomic_store(&fs->after_init_due, fn != NULL);
}
