// SPDX-License-Identifier: MIT
/*
 * The inode table and the directory listings behind it.
 *
 * DESIGN
 *
 * Directories are implied by key prefixes: the children of directory key
 * "a/" are what ListObjects with prefix "a/" and delimiter "/" returns,
 * keys becoming files and common prefixes becoming directories, so no
 * marker object is needed.  A listing is fetched whole (every page) and
 * kept on its directory inode until the metadata TTL passes; lookups and
 * readdirplus answer from it, so `ls -l` costs one LIST per 1000 entries
 * and no HEAD.  Names a POSIX directory cannot hold (empty, ".", "..",
 * longer than NAME_MAX) are skipped with one warning each.  A name that is
 * both a key and a prefix shows as the directory.
 *
 * Locks.  fs->lock guards the table, every inode's mutable fields and
 * listing reference counts.  A LIST runs without it; listing_busy on the
 * directory makes concurrent callers wait on fs->list_cond for that one
 * fetch instead of sending their own.
 *
 * Inode numbers are the inode's address (the root is FUSE_ROOT_ID); the
 * key table maps a key back to its live inode so one key keeps one number
 * while the kernel remembers it.  An inode is freed when the kernel's
 * lookup count drops to zero.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs_int.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

/* Seconds the kernel may cache an entry when the TTL is "forever". */
#define FS_TTL_FOREVER_SEC (365.0 * 24 * 3600)

static size_t key_hash(const char *key)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a 64 offset basis */

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ull; /* FNV-1a 64 prime */
	return (size_t)(h % FS_TABLE_SIZE);
}

double fs_ttl_sec(const struct fs *fs)
{
	if (fs->cfg.metadata_ttl_sec < 0)
		return FS_TTL_FOREVER_SEC;
	return (double)fs->cfg.metadata_ttl_sec;
}

double fs_negative_ttl_sec(const struct fs *fs)
{
	if (fs->cfg.negative_ttl_sec < 0)
		return FS_TTL_FOREVER_SEC;
	return (double)fs->cfg.negative_ttl_sec;
}

struct fs_inode *fs_inode_of(struct fs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return fs->root;
	return (struct fs_inode *)(uintptr_t)ino;
}

static void child_clear(struct fs_child *c)
{
	free(c->name);
	free(c->etag);
}

void fs_listing_put(struct fs *fs, struct fs_listing *l)
{
	int last;

	if (!l)
		return;
	pthread_mutex_lock(&fs->lock);
	last = --l->refs == 0;
	pthread_mutex_unlock(&fs->lock);
	if (!last)
		return;
	for (size_t i = 0; i < l->n; i++)
		child_clear(&l->v[i]);
	free(l->v);
	free(l);
}

static int child_cmp(const void *a, const void *b)
{
	const struct fs_child *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	/* Equal names: the directory first, so dedup keeps it. */
	return c ? c : y->is_dir - x->is_dir;
}

const struct fs_child *fs_listing_find(const struct fs_listing *l,
				       const char *name)
{
	struct fs_child probe = {.name = (char *)name, .is_dir = 1};
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->v[mid].name, probe.name);

		if (c == 0)
			return &l->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Whether @name (of @len bytes) can be a directory entry.  Keys with empty,
 * "." or ".." segments, or segments over NAME_MAX bytes, cannot be shown
 * (shared/cases/edge-cases.md B03, B04).
 */
static int name_ok(struct fs *fs, const char *key, const char *name, size_t len)
{
	const char *why = NULL;

	if (len == 0)
		why = "empty path segment";
	else if ((len == 1 && name[0] == '.') ||
		 (len == 2 && name[0] == '.' && name[1] == '.'))
		why = "'.' or '..' path segment";
	else if (len > FS_NAME_MAX)
		why = "path segment longer than 255 bytes";
	else if (memchr(name, '/', len))
		why = "unexpected '/' in a listed name";
	if (!why)
		return 1;
	log_warn("skipping s3://%s/%s: %s", fs->cfg.bucket, key, why);
	return 0;
}

/* Append one listed entry to the growing child array. */
static int listing_add(struct fs *fs, struct fs_listing *l, size_t *cap,
		       const char *dir_key, const struct client_list_entry *e)
{
	size_t plen = strlen(dir_key), len;
	const char *name;
	struct fs_child *c;

	if (strncmp(e->name, dir_key, plen) != 0)
		return 0; /* outside the prefix: a server bug, ignore */
	name = e->name + plen;
	len = strlen(name);
	if (e->is_prefix) {
		if (len == 0 || name[len - 1] != '/')
			return 0;
		len--; /* the delimiter */
	} else if (len == 0) {
		return 0; /* the directory's own marker object (B09) */
	} else if (name[len - 1] == '/') {
		return 0; /* a nested "d/" marker: seen as a prefix too */
	}
	if (!name_ok(fs, e->name, name, len))
		return 0;
	if (l->n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 64;
		struct fs_child *v = realloc(l->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		*cap = ncap;
	}
	c = &l->v[l->n];
	memset(c, 0, sizeof(*c));
	c->name = strndup(name, len);
	if (!c->name)
		return -ENOMEM;
	c->is_dir = e->is_prefix;
	if (!e->is_prefix) {
		c->size = e->size;
		c->mtime_sec = e->mtime_sec;
		c->etag = strdup(e->etag);
		if (!c->etag) {
			free(c->name);
			return -ENOMEM;
		}
	}
	l->n++;
	return 0;
}

/* Sort and drop duplicate names, keeping directories over files. */
static void listing_finish(struct fs *fs, const char *dir_key,
			   struct fs_listing *l)
{
	size_t out = 0;

	if (l->n > 1) /* an empty listing has v == NULL: UB for qsort */
		qsort(l->v, l->n, sizeof(*l->v), child_cmp);
	for (size_t i = 0; i < l->n; i++) {
		if (out > 0 && strcmp(l->v[out - 1].name, l->v[i].name) == 0) {
			log_warn("s3://%s/%s%s is both an object and a prefix; "
				 "showing the directory",
				 fs->cfg.bucket, dir_key, l->v[i].name);
			child_clear(&l->v[i]);
			continue;
		}
		l->v[out++] = l->v[i];
	}
	l->n = out;
}

/* Fetch every page of the listing of @dir_key.  Runs without fs->lock. */
static int listing_fetch(struct fs *fs, const char *dir_key,
			 struct fs_listing **out)
{
	struct fs_listing *l = calloc(1, sizeof(*l));
	char *start = NULL;
	size_t cap = 0;
	int rc = 0;

	if (!l)
		return -ENOMEM;
	l->refs = 1;
	l->fetched_ms = util_mono_ms();
	do {
		struct client_list_page page = {0};

		rc = client_list(fs->client, dir_key, "/", start, 1000, &page,
				 NULL);
		for (size_t i = 0; rc == 0 && i < page.n; i++)
			rc = listing_add(fs, l, &cap, dir_key, &page.v[i]);
		free(start);
		start = NULL;
		if (rc == 0 && page.truncated) {
			start = page.next;
			page.next = NULL;
		}
		client_list_page_clear(&page);
	} while (rc == 0 && start);
	if (rc != 0) {
		l->refs = 1;
		fs_listing_put(fs, l);
		return rc;
	}
	listing_finish(fs, dir_key, l);
	*out = l;
	return 0;
}

/*
 * The listing cache in the index: a body is LISTING_MAGIC, then per child
 * a u8 is_dir, u64 size, i64 mtime, u16 name length, the name, u16 ETag
 * length and the ETag, in host byte order (the cache never leaves this
 * machine).
 */
#define LISTING_MAGIC "HFL1"

struct wbuf {
	char *p;
	size_t len, cap;
	int failed;
};

static void wput(struct wbuf *b, const void *data, size_t n)
{
	if (b->failed || n == 0) /* n == 0 may come with data == NULL */
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void wstr(struct wbuf *b, const char *s)
{
	uint16_t n = (uint16_t)(s ? strlen(s) : 0);

	wput(b, &n, sizeof(n));
	wput(b, s, n);
}

/* Store @l for a remount; a failure only costs a LIST later. */
static void listing_save(struct fs *fs, const char *dir_key,
			 const struct fs_listing *l, int64_t fetched_sec)
{
	struct wbuf b = {0};

	wput(&b, LISTING_MAGIC, 4);
	for (size_t i = 0; i < l->n; i++) {
		const struct fs_child *c = &l->v[i];
		uint8_t dir = (uint8_t)c->is_dir;

		wput(&b, &dir, 1);
		wput(&b, &c->size, sizeof(c->size));
		wput(&b, &c->mtime_sec, sizeof(c->mtime_sec));
		wstr(&b, c->name);
		wstr(&b, c->etag);
	}
	if (!b.failed && fs->idx &&
	    idx_listing_put(fs->idx, fs->cfg.bucket, dir_key, fetched_sec, b.p,
			    b.len) != 0)
		log_debug("listing of s3://%s/%s not stored", fs->cfg.bucket,
			  dir_key);
	free(b.p);
}

/* Read a counted string at *@p (below @end) into a new allocation. */
static char *rstr(const char **p, const char *end)
{
	uint16_t n;
	char *s;

	if ((size_t)(end - *p) < sizeof(n))
		return NULL;
	memcpy(&n, *p, sizeof(n));
	*p += sizeof(n);
	if ((size_t)(end - *p) < n)
		return NULL;
	s = strndup(*p, n);
	*p += n;
	return s;
}

/* Decode a stored listing; NULL when malformed or out of memory. */
static struct fs_listing *listing_decode(const char *p, size_t len)
{
	const char *end = p + len;
	struct fs_listing *l;
	size_t cap = 0;

	if (len < 4 || memcmp(p, LISTING_MAGIC, 4) != 0)
		return NULL;
	p += 4;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->refs = 1;
	while (p < end) {
		struct fs_child c = {0};
		uint8_t dir;

		if ((size_t)(end - p) <
		    1 + sizeof(c.size) + sizeof(c.mtime_sec))
			goto bad;
		memcpy(&dir, p, 1);
		memcpy(&c.size, p + 1, sizeof(c.size));
		memcpy(&c.mtime_sec, p + 1 + sizeof(c.size),
		       sizeof(c.mtime_sec));
		p += 1 + sizeof(c.size) + sizeof(c.mtime_sec);
		c.is_dir = dir;
		c.name = rstr(&p, end);
		c.etag = rstr(&p, end);
		if (c.etag && !c.etag[0]) {
			free(c.etag);
			c.etag = NULL;
		}
		if (l->n == cap) {
			struct fs_child *v;

			cap = cap ? 2 * cap : 64;
			v = realloc(l->v, cap * sizeof(*v));
			if (!v) {
				child_clear(&c);
				goto bad;
			}
			l->v = v;
		}
		l->v[l->n++] = c;
		if (!c.name || (!c.is_dir && !c.etag))
			goto bad;
	}
	return l;
bad:
	for (size_t i = 0; i < l->n; i++)
		child_clear(&l->v[i]);
	free(l->v);
	free(l);
	return NULL;
}

/* The stored listing of @dir_key when it is younger than the TTL. */
static struct fs_listing *listing_load(struct fs *fs, const char *dir_key)
{
	struct fs_listing *l;
	int64_t fetched = 0, age;
	void *body = NULL;
	size_t len = 0;

	if (!fs->idx || fs->cfg.metadata_ttl_sec == 0 ||
	    idx_listing_get(fs->idx, fs->cfg.bucket, dir_key, &fetched, &body,
			    &len) != 0)
		return NULL;
	age = util_now_sec() - fetched;
	if (age < 0 ||
	    (fs->cfg.metadata_ttl_sec > 0 && age >= fs->cfg.metadata_ttl_sec)) {
		free(body);
		return NULL;
	}
	l = listing_decode(body, len);
	free(body);
	if (l)
		l->fetched_ms = util_mono_ms() - age * 1000;
	return l;
}

static int listing_fresh(const struct fs *fs, const struct fs_listing *l)
{
	if (!l)
		return 0;
	if (fs->cfg.metadata_ttl_sec < 0)
		return 1;
	return util_mono_ms() - l->fetched_ms < fs->cfg.metadata_ttl_sec * 1000;
}

int fs_listing_get(struct fs *fs, struct fs_inode *dir, int may_fetch,
		   struct fs_listing **out)
{
	struct fs_listing *l = NULL, *old;
	int rc;

	pthread_mutex_lock(&fs->lock);
	for (;;) {
		if (listing_fresh(fs, dir->listing)) {
			dir->listing->refs++;
			*out = dir->listing;
			pthread_mutex_unlock(&fs->lock);
			return 0;
		}
		if (!dir->listing_busy)
			break;
		pthread_cond_wait(&fs->list_cond, &fs->lock);
	}
	dir->listing_busy = 1;
	pthread_mutex_unlock(&fs->lock);

	/* Not in memory: a remount may find it in the index. */
	l = dir->listing ? NULL : listing_load(fs, dir->key);
	if (l) {
		rc = 0;
	} else if (!may_fetch) {
		rc = -EAGAIN;
	} else {
		int64_t fetched_sec = util_now_sec();

		rc = listing_fetch(fs, dir->key, &l);
		if (rc == 0)
			listing_save(fs, dir->key, l, fetched_sec);
	}

	pthread_mutex_lock(&fs->lock);
	dir->listing_busy = 0;
	pthread_cond_broadcast(&fs->list_cond);
	old = NULL;
	if (rc == 0) {
		old = dir->listing;
		dir->listing = l;
		l->refs++; /* one for the inode, one for the caller */
		*out = l;
	}
	pthread_mutex_unlock(&fs->lock);
	fs_listing_put(fs, old);
	return rc;
}

/*
 * Find @name in a directory that has no listing yet, with two small
 * requests instead of listing the whole directory (mountpoint-s3 does the
 * same): a LIST of "name/" with max-keys 1 says whether it is a directory
 * (a marker object or any key below), else a HEAD says whether it is a
 * file.  A deep path on a cold mount then costs two requests per level,
 * however large each parent directory is.
 */
static int lookup_targeted(struct fs *fs, struct fs_inode *dir,
			   const char *name, struct fs_inode **out)
{
	struct client_list_page page = {0};
	struct client_object_meta meta;
	struct fs_child c = {.name = (char *)name};
	char *key = NULL, *prefix = NULL;
	int rc;

	if (asprintf(&key, "%s%s", dir->key, name) < 0 ||
	    asprintf(&prefix, "%s%s/", dir->key, name) < 0) {
		free(key);
		return -ENOMEM;
	}
	rc = client_list(fs->client, prefix, "/", NULL, 1, &page, NULL);
	if (rc == 0 && page.n > 0) {
		c.is_dir = 1;
	} else if (rc == 0) {
		rc = client_head(fs->client, key, &meta, NULL);
		if (rc == 0) {
			c.size = meta.size;
			c.mtime_sec = meta.mtime_sec;
			c.etag = meta.etag;
		}
	}
	client_list_page_clear(&page);
	if (rc == 0) {
		*out = fs_inode_ref(fs, dir, util_mono_ms(), &c);
		rc = *out ? 0 : -ENOMEM;
	}
	free(key);
	free(prefix);
	return rc;
}

int fs_lookup(struct fs *fs, struct fs_inode *dir, const char *name,
	      struct fs_inode **out)
{
	const struct fs_child *c;
	struct fs_listing *l;
	int may_target, rc;

	/* The first lookup in a directory with no listing is targeted;
	 * after that a loader is walking it, and one listing per 1000 names
	 * is cheaper than two requests per name. */
	pthread_mutex_lock(&fs->lock);
	may_target = !dir->listing && dir->targeted < FS_TARGETED_LOOKUPS;
	if (may_target)
		dir->targeted++;
	pthread_mutex_unlock(&fs->lock);
	rc = fs_listing_get(fs, dir, !may_target, &l);
	if (rc == -EAGAIN)
		return lookup_targeted(fs, dir, name, out);
	if (rc != 0)
		return rc;
	c = fs_listing_find(l, name);
	*out = c ? fs_inode_ref(fs, dir, l->fetched_ms, c) : NULL;
	rc = !c ? -ENOENT : *out ? 0 : -ENOMEM;
	fs_listing_put(fs, l);
	return rc;
}

static void inode_free(struct fs *fs, struct fs_inode *ino)
{
	fs_listing_put(fs, ino->listing);
	free(ino->key);
	free(ino->etag);
	free(ino->opened_etag);
	free(ino);
}

static char *child_key(const struct fs_inode *dir, const struct fs_child *c)
{
	size_t dlen = strlen(dir->key), nlen = strlen(c->name);
	char *key = malloc(dlen + nlen + 2);

	if (!key)
		return NULL;
	memcpy(key, dir->key, dlen);
	memcpy(key + dlen, c->name, nlen);
	if (c->is_dir)
		key[dlen + nlen++] = '/';
	key[dlen + nlen] = '\0';
	return key;
}

struct fs_inode *fs_inode_ref(struct fs *fs, struct fs_inode *dir,
			      int64_t listed_ms, const struct fs_child *c)
{
	char *key = child_key(dir, c), *etag = NULL;
	struct fs_inode *ino;
	size_t h;

	if (!key)
		return NULL;
	if (c->etag && !(etag = strdup(c->etag))) {
		free(key);
		return NULL;
	}
	h = key_hash(key);
	pthread_mutex_lock(&fs->lock);
	for (ino = fs->table[h]; ino; ino = ino->table_next)
		if (strcmp(ino->key, key) == 0)
			break;
	if (!ino) {
		ino = calloc(1, sizeof(*ino));
		if (!ino) {
			pthread_mutex_unlock(&fs->lock);
			free(key);
			free(etag);
			return NULL;
		}
		ino->ino = (fuse_ino_t)(uintptr_t)ino;
		ino->key = key;
		ino->is_dir = c->is_dir;
		ino->table_next = fs->table[h];
		fs->table[h] = ino;
		key = NULL;
	}
	ino->size = c->size;
	ino->mtime_sec = c->mtime_sec;
	ino->listed_ms = listed_ms;
	ino->parent = dir;
	free(ino->etag);
	ino->etag = etag;
	ino->nlookup++;
	pthread_mutex_unlock(&fs->lock);
	free(key);
	return ino;
}

void fs_inode_forget(struct fs *fs, fuse_ino_t ino_nr, uint64_t n)
{
	struct fs_inode *ino = fs_inode_of(fs, ino_nr), **pp;

	if (ino == fs->root)
		return;
	pthread_mutex_lock(&fs->lock);
	if (ino->nlookup > n) {
		ino->nlookup -= n;
		pthread_mutex_unlock(&fs->lock);
		return;
	}
	for (pp = &fs->table[key_hash(ino->key)]; *pp != ino;
	     pp = &(*pp)->table_next)
		;
	*pp = ino->table_next;
	pthread_mutex_unlock(&fs->lock);
	inode_free(fs, ino);
}

void fs_attr_locked(const struct fs *fs, const struct fs_inode *ino,
		    struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino->ino;
	st->st_uid = fs->cfg.uid;
	st->st_gid = fs->cfg.gid;
	/* A large block size invites large reads; 1 MiB is one FUSE read. */
	st->st_blksize = 1 << 20;
	if (ino->is_dir) {
		st->st_mode = S_IFDIR | fs->cfg.dir_mode;
		st->st_nlink = 2;
		st->st_mtime = st->st_ctime = st->st_atime = fs->start_sec;
		return;
	}
	st->st_mode = S_IFREG | fs->cfg.file_mode;
	st->st_nlink = 1;
	st->st_size = (off_t)ino->size;
	/* st_blocks counts 512-byte units whatever st_blksize is (B32). */
	st->st_blocks = (blkcnt_t)((ino->size + 511) / 512);
	st->st_mtime = st->st_ctime = st->st_atime = ino->mtime_sec;
}

int fs_new(const struct fs_config *cfg, struct client *client,
	   struct store *store, struct idx *idx, struct fs **out)
{
	struct fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	fs->cfg = *cfg;
	fs->cfg.bucket = strdup(cfg->bucket);
	fs->cfg.prefix = strdup(cfg->prefix);
	fs->client = client;
	fs->store = store;
	fs->idx = idx;
	fs->start_sec = util_now_sec();
	fs->table = calloc(FS_TABLE_SIZE, sizeof(*fs->table));
	fs->root = calloc(1, sizeof(*fs->root));
	pthread_mutex_init(&fs->lock, NULL);
	pthread_cond_init(&fs->list_cond, NULL);
	if (!fs->cfg.bucket || !fs->cfg.prefix || !fs->table || !fs->root ||
	    !(fs->root->key = strdup(cfg->prefix))) {
		fs_free(fs);
		return -ENOMEM;
	}
	fs->root->ino = FUSE_ROOT_ID;
	fs->root->is_dir = 1;
	fs->root->nlookup = 1;
	*out = fs;
	return 0;
}

void fs_set_sched(struct fs *fs, struct sched *sched)
{
	fs->sched = sched;
}

void fs_free(struct fs *fs)
{
	if (!fs)
		return;
	for (size_t h = 0; fs->table && h < FS_TABLE_SIZE; h++) {
		while (fs->table[h]) {
			struct fs_inode *ino = fs->table[h];

			fs->table[h] = ino->table_next;
			inode_free(fs, ino);
		}
	}
	if (fs->root)
		inode_free(fs, fs->root);
	pthread_cond_destroy(&fs->list_cond);
	pthread_mutex_destroy(&fs->lock);
	free(fs->table);
	free((char *)fs->cfg.bucket);
	free((char *)fs->cfg.prefix);
	free(fs);
}

int fs_inode_revalidate(struct fs *fs, struct fs_inode *ino)
{
	struct client_object_meta meta;
	int64_t now = util_mono_ms();
	char *etag;
	int rc;

	pthread_mutex_lock(&fs->lock);
	rc = fs->cfg.metadata_ttl_sec < 0 ||
	     now - ino->listed_ms < fs->cfg.metadata_ttl_sec * 1000;
	pthread_mutex_unlock(&fs->lock);
	if (rc)
		return 0;
	rc = client_head(fs->client, ino->key, &meta, NULL);
	if (rc == -ENOENT)
		return rc;
	if (rc != 0) {
		log_warn("s3://%s/%s: cannot revalidate (%s); using the "
			 "version listed last",
			 fs->cfg.bucket, ino->key, strerror(-rc));
		return 0;
	}
	etag = strdup(meta.etag);
	if (!etag)
		return 0;
	pthread_mutex_lock(&fs->lock);
	free(ino->etag);
	ino->etag = etag;
	ino->size = meta.size;
	ino->mtime_sec = meta.mtime_sec;
	ino->listed_ms = now;
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

/* Name of the last path segment of @key (a file key: no trailing '/'). */
static const char *key_base(const char *key)
{
	const char *slash = strrchr(key, '/');

	return slash ? slash + 1 : key;
}

void fs_prefetch_after(struct fs *fs, struct fs_inode *ino)
{
	struct {
		char *key, *etag;
		uint64_t size;
		int64_t mtime_sec;
	} next[FS_PREFETCH_MAX];
	struct fs_listing *l;
	const struct fs_child *c;
	size_t n = 0, i, end;

	if (!fs->cfg.prefetch_dir || !ino->parent)
		return;
	pthread_mutex_lock(&fs->lock);
	l = ino->parent->listing;
	c = l ? fs_listing_find(l, key_base(ino->key)) : NULL;
	if (!c) {
		pthread_mutex_unlock(&fs->lock);
		return;
	}
	/* Each child is handed over once per listing, however many of the
	 * files before it are opened. */
	i = (size_t)(c - l->v) + 1;
	end = i + fs->cfg.prefetch_dir;
	if (end > l->n)
		end = l->n;
	if (i < l->prefetched_upto)
		i = l->prefetched_upto;
	if (end > l->prefetched_upto)
		l->prefetched_upto = end;
	for (; i < end && n < FS_PREFETCH_MAX; i++) {
		if (l->v[i].is_dir)
			continue;
		if (asprintf(&next[n].key, "%s%s", ino->parent->key,
			     l->v[i].name) < 0)
			break;
		next[n].etag = strdup(l->v[i].etag);
		next[n].size = l->v[i].size;
		next[n].mtime_sec = l->v[i].mtime_sec;
		n++;
	}
	pthread_mutex_unlock(&fs->lock);
	for (i = 0; i < n; i++) {
		struct sched_obj *o;

		/* Opening queues every missing part as read-ahead; the
		 * queue keeps the object alive after this put. */
		if (next[i].etag &&
		    sched_obj_open(fs->sched, next[i].key, next[i].etag,
				   next[i].size, next[i].mtime_sec, &o) == 0)
			sched_obj_put(o);
		free(next[i].key);
		free(next[i].etag);
	}
}
