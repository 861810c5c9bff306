/* SPDX-License-Identifier: MIT */
/*
 * Internal shapes of the FUSE layer, shared by inode.c (inode table and
 * directory listings) and ops.c (the handlers).
 */
#ifndef HOARDFS_FS_INT_H
#define HOARDFS_FS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hoardfs/fs.h"

/* Longest name one directory entry may have (Linux NAME_MAX). */
#define FS_NAME_MAX 255

/* Lookups in a directory without a listing answered by a LIST of the
 * name and a HEAD before the whole directory is listed instead: one, so a
 * deep path costs two requests per level, and a directory a loader walks
 * is listed from its second name on. */
#define FS_TARGETED_LOOKUPS 1

/* Buckets of the key -> inode table; chains grow past this gracefully. */
#define FS_TABLE_SIZE 65536

/* One entry of a directory listing, as the server listed it. */
struct fs_child {
	char *name;	   /* entry name, no '/'; owned */
	int is_dir;	   /* from a common prefix (or a "name/" marker) */
	uint64_t size;	   /* object size; 0 for directories */
	int64_t mtime_sec; /* LastModified; 0 for directories */
	char *etag;	   /* quoted ETag, owned; NULL for directories */
};

/*
 * A directory's children at one moment, shared by the directory inode and
 * every open directory handle that read it.
 * Invariant: v sorted by strcmp(name), names unique.
 */
struct fs_listing {
	unsigned refs;		/* fs->lock */
	size_t n;		/* children */
	struct fs_child *v;	/* owned array */
	int64_t fetched_ms;	/* util_mono_ms() when the LIST began */
	size_t prefetched_upto; /* fs->lock: children before this index were
				 * handed to --prefetch-dir */
};

/*
 * One inode.  The kernel names it by ino, which is the pointer itself (as
 * libfuse's passthrough_ll does) except for the root, FUSE_ROOT_ID; it
 * stays valid while nlookup > 0.  Fields marked fs->lock need the lock.
 */
struct fs_inode {
	fuse_ino_t ino; /* FUSE_ROOT_ID or (fuse_ino_t)this */
	char *key;	/* object key; directories end in '/' (root: prefix) */
	int is_dir;	/* directory or file */
	uint64_t size;	/* fs->lock: object size in bytes */
	int64_t mtime_sec; /* fs->lock: Last-Modified */
	int64_t listed_ms; /* fs->lock: util_mono_ms() of the listing (or
			    * HEAD) the attributes came from */
	char *etag;	   /* fs->lock: current ETag, owned; NULL for dirs */
	char *opened_etag; /* fs->lock: ETag at the last open, for keep_cache */
	uint64_t nlookup;  /* fs->lock: the kernel's lookup count */
	struct fs_listing *listing; /* fs->lock: cached listing or NULL */
	int listing_busy;  /* fs->lock: a LIST for this dir is in flight */
	unsigned targeted; /* fs->lock: targeted lookups done in this dir */
	struct fs_inode *parent;     /* the directory it was looked up in; the
				      * kernel keeps it alive while this is */
	struct fs_inode *table_next; /* fs->lock: hash chain by key */
};

struct fs {
	struct fs_config cfg;  /* strings owned (bucket, prefix) */
	struct client *client; /* borrowed */
	struct store *store;   /* borrowed */
	struct idx *idx;       /* borrowed: listings survive a remount there */
	struct sched *sched;   /* borrowed, set before the loop */
	pthread_mutex_t lock;  /* the table, inode fields, listings */
	pthread_cond_t list_cond;    /* lock: some listing_busy was cleared */
	struct fs_inode *root;	     /* FUSE_ROOT_ID */
	struct fs_inode **table;     /* FS_TABLE_SIZE chains by key */
	int64_t start_sec;	     /* mount time: the mtime of directories */
	fs_status_fn status_fn;	     /* user.hoardfs.status provider, or NULL;
				      * set before the loop */
	void *status_arg;	     /* its argument */
	fs_after_init_fn after_init; /* see fs_set_after_init(), or NULL */
	void *after_init_arg;	     /* its argument */
	atomic_int after_init_due;   /* set until after_init has run */
};

/* The inode behind @ino (no reference taken: the kernel holds one). */
struct fs_inode *fs_inode_of(struct fs *fs, fuse_ino_t ino);

/*
 * fs_listing_get - the listing of directory @dir, from the cache while it
 * is younger than the metadata TTL, else from the server (one LIST per
 * 1000 entries; concurrent callers share one fetch).  A listing stored in
 * the index younger than the TTL counts as cached.  Returns 0 with *@out
 * holding a reference (drop with fs_listing_put()), -EAGAIN when only a
 * LIST could answer and @may_fetch is 0, or -errno from the client.
 * Blocks on the network when the cache is stale.
 */
int fs_listing_get(struct fs *fs, struct fs_inode *dir, int may_fetch,
		   struct fs_listing **out);

/*
 * fs_lookup - the child @name of directory @dir, with its lookup count
 * raised by one, into *@out.  From the listing when there is one; the
 * first FS_TARGETED_LOOKUPS lookups in a directory without one use a LIST
 * of "name/" and a HEAD instead of listing the directory.
 * Returns 0, -ENOENT, -ENOMEM, or -errno from the client.
 */
int fs_lookup(struct fs *fs, struct fs_inode *dir, const char *name,
	      struct fs_inode **out);

/* fs_listing_put - drop a listing reference; NULL is a no-op. */
void fs_listing_put(struct fs *fs, struct fs_listing *l);

/* fs_listing_find - the child called @name in @l, or NULL. */
const struct fs_child *fs_listing_find(const struct fs_listing *l,
				       const char *name);

/*
 * fs_inode_ref - the inode of child @c of directory @dir, created if it is
 * new, with its attributes refreshed from @c and its lookup count raised
 * by one; @listed_ms is when @c was listed (util_mono_ms()).  Returns
 * NULL when out of memory.
 */
struct fs_inode *fs_inode_ref(struct fs *fs, struct fs_inode *dir,
			      int64_t listed_ms, const struct fs_child *c);

/*
 * fs_inode_revalidate - when the attributes of file @ino are older than
 * the metadata TTL, HEAD the object and take its current ETag, size and
 * mtime.  Returns 0 (also when fresh, or when the store cannot be reached:
 * the cached version is then used), or -ENOENT when the object is gone.
 */
int fs_inode_revalidate(struct fs *fs, struct fs_inode *ino);

/* Most files --prefetch-dir hands over per open (the option's limit). */
#define FS_PREFETCH_MAX 256

/*
 * fs_prefetch_after - with --prefetch-dir N, queue the fetch of the N
 * files that follow file @ino in its directory's listing (each only once
 * per listing), as epoch loaders read them next.  Blocks on the index.
 */
void fs_prefetch_after(struct fs *fs, struct fs_inode *ino);

/* fs_inode_forget - lower the lookup count by @n; frees at zero. */
void fs_inode_forget(struct fs *fs, fuse_ino_t ino, uint64_t n);

/* fs_attr - fill *@st for @ino from its fields (caller holds fs->lock). */
void fs_attr_locked(const struct fs *fs, const struct fs_inode *ino,
		    struct stat *st);

/* fs_errno - the positive errno to reply with for an internal -errno. */
int fs_errno(int rc);

/* fs_ttl_sec - the kernel entry/attr timeout for the metadata TTL. */
double fs_ttl_sec(const struct fs *fs);

/* fs_negative_ttl_sec - the kernel timeout of a negative entry. */
double fs_negative_ttl_sec(const struct fs *fs);

/*
 * fs_ctl_getxattr - answer @name on @ino when it is one of the control
 * attributes of ctl.c (warm, evict, evict_all, status, summary, and the
 * directory figures), replying to @req and returning 1; return 0 without
 * replying for any other name.  May block for a whole object's fetch.
 */
int fs_ctl_getxattr(fuse_req_t req, struct fs *fs, struct fs_inode *ino,
		    const char *name, size_t size);

#endif
