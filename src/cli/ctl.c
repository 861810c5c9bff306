// SPDX-License-Identifier: MIT
/*
 * hoardfs status and evict, the argument parsing of every command for a
 * running mount, and the tree walk that warm and evict share.  These
 * commands never open the cache dir or signal the daemon: they use the
 * control attributes of the mount (src/fs/ctl.c), so they work from a
 * sidecar container that shares only the mountpoint.  warm itself is in
 * ctl_warm.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/ctl.h"

#define CTL_XATTR_KEY	    "user.hoardfs.key"
#define CTL_XATTR_EVICT	    "user.hoardfs.evict"
#define CTL_XATTR_EVICT_ALL "user.hoardfs.evict_all"
#define CTL_XATTR_STATUS    "user.hoardfs.status"
/* The largest value getxattr(2) can return on Linux (XATTR_SIZE_MAX). */
#define CTL_XATTR_MAX 65536
/* An object key is at most 1024 bytes; room for the NUL and slack. */
#define CTL_KEY_MAX 2048

static const char *const cmd_names[] = {"warm", "status", "evict"};

static const char warm_usage[] =
	"usage: hoardfs warm PATH... [--jobs N] [--shard K/N] [--background]\n"
	"\n"
	"Fetch every file at or under each PATH (files or directories of a\n"
	"hoardfs mount) into the mount's cache, through the running daemon.\n"
	"Files already cached cost nothing, so running it again resumes.\n"
	"\n"
	"  -j, --jobs N      files warmed at once, 1 to 32 (default 8)\n"
	"  --shard K/N       warm only shard K (0-based) of N: the files "
	"whose\n"
	"                    object key's FNV-1a 64-bit hash is K modulo N, "
	"so\n"
	"                    N nodes running K = 0..N-1 warm every file once\n"
	"  --background      return at once; a detached process does the work\n"
	"                    and logs progress and the result to syslog\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit status: 0 every file cached, 1 some failed (each is named with\n"
	"its error), 2 usage error or a PATH not on a hoardfs mount.\n";

static const char status_usage[] =
	"usage: hoardfs status MOUNTPOINT [--json]\n"
	"\n"
	"Show a running mount's cache use, hit ratio, requests, errors,\n"
	"fetch throughput and uptime.\n"
	"\n"
	"  --json            the daemon's status document as it is (JSON)\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit status: 0 shown, 1 the daemon did not answer, 2 usage error or\n"
	"MOUNTPOINT is not the root of a hoardfs mount.\n";

static const char evict_usage[] =
	"usage: hoardfs evict PATH...\n"
	"       hoardfs evict --all MOUNTPOINT\n"
	"\n"
	"Drop the cached bytes of every file at or under each PATH, or with\n"
	"--all of every object of the mount's bucket in its cache.  Files\n"
	"that are open or being fetched are kept and reported as busy.\n"
	"\n"
	"  --all             every cached object of the mount's bucket\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit status: 0 everything named was dropped, 1 some file was busy or\n"
	"failed, 2 usage error or a PATH not on a hoardfs mount.\n";

int ctl_is_command(const char *word)
{
	for (size_t i = 0; i < sizeof(cmd_names) / sizeof(cmd_names[0]); i++)
		if (strcmp(word, cmd_names[i]) == 0)
			return 1;
	return 0;
}

const char *ctl_usage(enum ctl_cmd cmd)
{
	switch (cmd) {
	case CTL_CMD_WARM:
		return warm_usage;
	case CTL_CMD_STATUS:
		return status_usage;
	case CTL_CMD_EVICT:
		return evict_usage;
	}
	return "";
}

static int ctl_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int ctl_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A whole decimal number from 0 to @max. */
static int parse_unsigned(const char *text, unsigned max, unsigned *out)
{
	unsigned long v;
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

int ctl_shard_parse(const char *text, unsigned *k, unsigned *n)
{
	const char *slash = strchr(text, '/');
	char left[16];

	if (!slash || (size_t)(slash - text) >= sizeof(left))
		return -EINVAL;
	memcpy(left, text, (size_t)(slash - text));
	left[slash - text] = '\0';
	if (parse_unsigned(left, CTL_MAX_SHARDS, k) != 0 ||
	    parse_unsigned(slash + 1, CTL_MAX_SHARDS, n) != 0 || *n == 0 ||
	    *k >= *n)
		return -EINVAL;
	return 0;
}

uint64_t ctl_key_hash(const char *key)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a 64 offset basis */

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ull; /* FNV-1a 64 prime */
	return h;
}

int ctl_shard_pick(const char *key, unsigned k, unsigned n)
{
	return n == 0 || ctl_key_hash(key) % n == k;
}

void ctl_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const units[] = {"B",   "KiB", "MiB",
					    "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, cap, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, "%.1f %s", v, units[u]);
}

/*
 * One option of a command: its long name, single letter (or 0), whether
 * it takes a value, and which commands accept it.
 */
struct ctl_opt {
	const char *name;
	char short_name;
	int has_arg;
	unsigned cmds; /* bit (1 << enum ctl_cmd) */
};

#define CMD_BIT(c) (1u << (c))

static const struct ctl_opt ctl_opts[] = {
	{"jobs", 'j', 1, CMD_BIT(CTL_CMD_WARM)},
	{"shard", 0, 1, CMD_BIT(CTL_CMD_WARM)},
	{"background", 0, 0, CMD_BIT(CTL_CMD_WARM)},
	{"json", 0, 0, CMD_BIT(CTL_CMD_STATUS)},
	{"all", 0, 0, CMD_BIT(CTL_CMD_EVICT)},
	{"help", 'h', 0,
	 CMD_BIT(CTL_CMD_WARM) | CMD_BIT(CTL_CMD_STATUS) |
		 CMD_BIT(CTL_CMD_EVICT)},
};

static int apply_opt(struct ctl_args *a, const struct ctl_opt *o,
		     const char *value, const char *shown, char *err,
		     size_t errlen)
{
	if (strcmp(o->name, "jobs") == 0) {
		if (parse_unsigned(value, CTL_MAX_JOBS, &a->jobs) != 0 ||
		    a->jobs == 0)
			return ctl_fail(err, errlen,
					"%s: '%s' is not a number from 1 to %d",
					shown, value, CTL_MAX_JOBS);
	} else if (strcmp(o->name, "shard") == 0) {
		if (ctl_shard_parse(value, &a->shard_k, &a->shard_n) != 0)
			return ctl_fail(err, errlen,
					"%s: '%s' is not K/N with 0 <= K < N "
					"(K counts from 0)",
					shown, value);
	} else if (strcmp(o->name, "background") == 0) {
		a->background = 1;
	} else if (strcmp(o->name, "json") == 0) {
		a->json = 1;
	} else if (strcmp(o->name, "all") == 0) {
		a->all = 1;
	} else {
		a->help = 1;
	}
	return 0;
}

/* Handle argv[*i], which starts with '-'; may take argv[*i + 1]. */
static int parse_dash(struct ctl_args *a, int argc, char **argv, int *i,
		      char *err, size_t errlen)
{
	const char *arg = argv[*i], *eq = NULL, *value = NULL;
	const struct ctl_opt *o = NULL;
	size_t len;
	char shown[64];

	if (arg[1] == '-') {
		eq = strchr(arg, '=');
		len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
		for (size_t k = 0; k < sizeof(ctl_opts) / sizeof(ctl_opts[0]);
		     k++)
			if (strlen(ctl_opts[k].name) == len &&
			    strncmp(ctl_opts[k].name, arg + 2, len) == 0)
				o = &ctl_opts[k];
		snprintf(shown, sizeof(shown), "%.*s",
			 (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
	} else if (arg[2] == '\0') {
		for (size_t k = 0; k < sizeof(ctl_opts) / sizeof(ctl_opts[0]);
		     k++)
			if (ctl_opts[k].short_name == arg[1])
				o = &ctl_opts[k];
		snprintf(shown, sizeof(shown), "%s", arg);
	} else {
		snprintf(shown, sizeof(shown), "%s", arg);
	}
	if (!o || !(o->cmds & CMD_BIT(a->cmd)))
		return ctl_fail(err, errlen, "unknown option '%s'", shown);
	if (eq && !o->has_arg)
		return ctl_fail(err, errlen, "%s takes no value", shown);
	if (o->has_arg) {
		value = eq ? eq + 1 : NULL;
		if (!value && *i + 1 >= argc)
			return ctl_fail(err, errlen, "%s needs a value", shown);
		if (!value)
			value = argv[++*i];
	}
	return apply_opt(a, o, value, shown, err, errlen);
}

int ctl_parse(int argc, char **argv, struct ctl_args *a, char *err,
	      size_t errlen)
{
	const char *name = argc > 0 ? argv[0] : "";
	int dashdash = 0, rc = 0;

	memset(a, 0, sizeof(*a));
	err[0] = '\0';
	a->jobs = CTL_DEFAULT_JOBS;
	if (strcmp(name, "warm") == 0)
		a->cmd = CTL_CMD_WARM;
	else if (strcmp(name, "status") == 0)
		a->cmd = CTL_CMD_STATUS;
	else if (strcmp(name, "evict") == 0)
		a->cmd = CTL_CMD_EVICT;
	else
		return ctl_fail(err, errlen, "unknown command '%s'", name);
	a->paths = calloc(argc > 0 ? (size_t)argc : 1, sizeof(*a->paths));
	if (!a->paths)
		return -ENOMEM;
	for (int i = 1; i < argc && rc == 0; i++) {
		if (!dashdash && strcmp(argv[i], "--") == 0)
			dashdash = 1;
		else if (!dashdash && argv[i][0] == '-' && argv[i][1])
			rc = parse_dash(a, argc, argv, &i, err, errlen);
		else
			a->paths[a->npaths++] = argv[i];
	}
	if (rc != 0 || a->help)
		return rc;
	switch (a->cmd) {
	case CTL_CMD_WARM:
		if (a->npaths == 0)
			return ctl_fail(err, errlen,
					"expected at least one PATH (see "
					"hoardfs warm --help)");
		break;
	case CTL_CMD_STATUS:
		if (a->npaths != 1)
			return ctl_fail(err, errlen,
					"expected one MOUNTPOINT (see hoardfs "
					"status --help)");
		break;
	case CTL_CMD_EVICT:
		if (a->all && a->npaths != 1)
			return ctl_fail(err, errlen,
					"--all: expected one MOUNTPOINT (see "
					"hoardfs evict --help)");
		if (a->npaths == 0)
			return ctl_fail(err, errlen,
					"expected PATH... or --all MOUNTPOINT "
					"(see hoardfs evict --help)");
		break;
	}
	return 0;
}

void ctl_args_free(struct ctl_args *a)
{
	free(a->paths);
	memset(a, 0, sizeof(*a));
}

/* ---- finding the files ------------------------------------------------ */

int ctl_check_path(const char *path, char *key, size_t cap, char *err,
		   size_t errlen)
{
	ssize_t n = getxattr(path, CTL_XATTR_KEY, key, cap - 1);
	int e = errno;

	if (n >= 0) {
		key[n] = '\0';
		return 0;
	}
	if (e == ENOENT || e == ENOTDIR) {
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (e == ENODATA || e == ENOTSUP) {
		snprintf(err, errlen,
			 "%s: not on a hoardfs mount (it has no %s attribute)",
			 path, CTL_XATTR_KEY);
		return -ENOTSUP;
	}
	snprintf(err, errlen, "%s: reading %s: %s", path, CTL_XATTR_KEY,
		 strerror(e));
	return -e;
}

static int files_add(struct ctl_files *f, const char *path, const char *key,
		     uint64_t size)
{
	struct ctl_file *x;

	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 256;
		struct ctl_file *v = realloc(f->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	x = &f->v[f->n];
	x->path = strdup(path);
	x->key = strdup(key);
	x->size = size;
	if (!x->path || !x->key) {
		free(x->path);
		free(x->key);
		return -ENOMEM;
	}
	f->n++;
	return 0;
}

/* Add every regular file under directory @path, whose key is @key (ends
 * in '/' or is the mount's empty root key). */
static int walk_dir(struct ctl_files *f, const char *path, const char *key,
		    char *err, size_t errlen)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	while (rc == 0 && (errno = 0, e = readdir(d))) {
		char *sub = NULL, *subkey = NULL;
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		    0) {
			rc = -errno;
			snprintf(err, errlen, "%s/%s: %s", path, e->d_name,
				 strerror(-rc));
			break;
		}
		if (asprintf(&sub, "%s/%s", path, e->d_name) < 0) {
			sub = NULL;
			rc = -ENOMEM;
			break;
		}
		if (asprintf(&subkey, "%s%s%s", key, e->d_name,
			     S_ISDIR(st.st_mode) ? "/" : "") < 0) {
			subkey = NULL;
			rc = -ENOMEM;
		} else if (S_ISDIR(st.st_mode)) {
			rc = walk_dir(f, sub, subkey, err, errlen);
		} else if (S_ISREG(st.st_mode)) {
			rc = files_add(f, sub, subkey, (uint64_t)st.st_size);
		}
		free(sub);
		free(subkey);
	}
	if (rc == 0 && errno != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
	}
	closedir(d);
	return rc;
}

static int file_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ctl_file *)a)->key,
		      ((const struct ctl_file *)b)->key);
}

int ctl_collect(const char *const *paths, size_t npaths, struct ctl_files *out,
		char *err, size_t errlen)
{
	char key[CTL_KEY_MAX];
	size_t keep = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < npaths && rc == 0; i++) {
		char *path = strdup(paths[i]);
		size_t len;
		struct stat st;

		if (!path)
			return -ENOMEM;
		/* "dir/" and "dir" name the same tree: print paths once. */
		len = strlen(path);
		while (len > 1 && path[len - 1] == '/')
			path[--len] = '\0';
		rc = ctl_check_path(path, key, sizeof(key), err, errlen);
		if (rc == 0 && stat(path, &st) != 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		}
		if (rc == 0 && S_ISDIR(st.st_mode))
			rc = walk_dir(out, path, key, err, errlen);
		else if (rc == 0 && S_ISREG(st.st_mode))
			rc = files_add(out, path, key, (uint64_t)st.st_size);
		free(path);
	}
	if (rc != 0) {
		ctl_files_free(out);
		return rc;
	}
	/* One entry per object, in key order: overlapping PATHs warm once,
	 * and every run walks the same order. */
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), file_cmp);
	for (size_t i = 0; i < out->n; i++) {
		if (keep && strcmp(out->v[keep - 1].key, out->v[i].key) == 0) {
			free(out->v[i].path);
			free(out->v[i].key);
			continue;
		}
		out->v[keep++] = out->v[i];
	}
	out->n = keep;
	return 0;
}

void ctl_files_free(struct ctl_files *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->v[i].path);
		free(f->v[i].key);
	}
	free(f->v);
	memset(f, 0, sizeof(*f));
}

/* ---- status -------------------------------------------------------------- */

/* The value of control attribute @name of @path, malloc'd and
 * NUL-terminated, or NULL with errno set. */
static char *ctl_get(const char *path, const char *name)
{
	char *buf = malloc(CTL_XATTR_MAX + 1);
	ssize_t n;
	int e;

	if (!buf)
		return NULL;
	n = getxattr(path, name, buf, CTL_XATTR_MAX);
	if (n < 0) {
		e = errno;
		free(buf);
		errno = e;
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

static uint64_t jget_u64(const json_t *obj, const char *a, const char *b)
{
	const json_t *v = json_object_get(obj, a);

	if (b)
		v = json_object_get(v, b);
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint64_t)json_integer_value(v);
	if (json_is_real(v) && json_real_value(v) > 0)
		return (uint64_t)json_real_value(v);
	return 0;
}

static const char *jget_str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "?";
}

static void print_duration(int64_t sec)
{
	if (sec >= 86400)
		printf("%" PRId64 "d %02" PRId64 "h %02" PRId64 "m\n",
		       sec / 86400, sec % 86400 / 3600, sec % 3600 / 60);
	else if (sec >= 3600)
		printf("%" PRId64 "h %02" PRId64 "m %02" PRId64 "s\n",
		       sec / 3600, sec % 3600 / 60, sec % 60);
	else if (sec >= 60)
		printf("%" PRId64 "m %02" PRId64 "s\n", sec / 60, sec % 60);
	else
		printf("%" PRId64 "s\n", sec);
}

/* The human-readable status table from the daemon's JSON. */
static int print_status_table(const char *doc, const char *mnt)
{
	char b[6][32];
	json_error_t jerr;
	json_t *root = json_loads(doc, 0, &jerr);
	const json_t *hit;
	uint64_t limit;

	if (!json_is_object(root)) {
		fprintf(stderr,
			"hoardfs status: %s: the status document is not JSON "
			"(%s); try --json\n",
			mnt, jerr.text);
		json_decref(root);
		return CLI_EXIT_RUNTIME;
	}
	printf("%-11s s3://%s/%s on %s (pid %" PRIu64 ", hoardfs %s)\n",
	       "mount", jget_str(root, "bucket"), jget_str(root, "prefix"),
	       jget_str(root, "mountpoint"), jget_u64(root, "pid", NULL),
	       jget_str(root, "version"));
	printf("%-11s %s\n", "endpoint", jget_str(root, "endpoint"));
	printf("%-11s %s\n", "cache dir", jget_str(root, "cache_dir"));
	printf("%-11s ", "uptime");
	print_duration((int64_t)jget_u64(root, "uptime_sec", NULL));
	ctl_format_bytes(jget_u64(root, "cache", "used_bytes"), b[0], 32);
	limit = jget_u64(root, "cache", "limit_bytes");
	if (limit)
		ctl_format_bytes(limit, b[1], 32);
	else
		snprintf(b[1], 32, "none");
	ctl_format_bytes(jget_u64(root, "cache", "min_free_bytes"), b[2], 32);
	ctl_format_bytes(jget_u64(root, "cache", "fs_free_bytes"), b[3], 32);
	printf("%-11s %s used, limit %s, keeps %s free (%s free now); "
	       "%" PRIu64 " objects\n",
	       "cache", b[0], b[1], b[2], b[3],
	       jget_u64(root, "cache", "objects"));
	ctl_format_bytes(jget_u64(root, "reads", "bytes_from_cache"), b[0], 32);
	ctl_format_bytes(jget_u64(root, "reads", "bytes_from_store"), b[1], 32);
	hit = json_object_get(json_object_get(root, "reads"), "hit_ratio");
	if (json_is_number(hit))
		snprintf(b[2], 32, "%.1f%%", 100.0 * json_number_value(hit));
	else
		snprintf(b[2], 32, "-");
	printf("%-11s %s from cache, %s from the store (hit ratio %s)\n",
	       "reads", b[0], b[1], b[2]);
	ctl_format_bytes(jget_u64(root, "fetch", "bytes"), b[0], 32);
	ctl_format_bytes(jget_u64(root, "fetch", "throughput_bytes_per_sec"),
			 b[1], 32);
	printf("%-11s %" PRIu64 " parts, %s; %s/s now; %" PRIu64
	       " errors, %" PRIu64 " verify failures\n",
	       "fetched", jget_u64(root, "fetch", "parts"), b[0], b[1],
	       jget_u64(root, "fetch", "errors"),
	       jget_u64(root, "fetch", "verify_failures"));
	{
		const json_t *rq = json_object_get(root, "requests");

		ctl_format_bytes(jget_u64(rq, "get_bytes", NULL), b[0], 32);
		printf("%-11s GET %" PRIu64 ", HEAD %" PRIu64 ", LIST %" PRIu64
		       " sent; %" PRIu64 " retries, %" PRIu64
		       " failed; %s received\n",
		       "requests", jget_u64(rq, "GET", "sent"),
		       jget_u64(rq, "HEAD", "sent"),
		       jget_u64(rq, "LIST", "sent"),
		       jget_u64(rq, "retries", NULL),
		       jget_u64(rq, "failed", NULL), b[0]);
		printf("%-11s %" PRIu64 " throttled (429/503), %" PRIu64
		       " resumed GETs; in-flight cap %" PRIu64
		       " (lowest %" PRIu64 ")\n",
		       "", jget_u64(rq, "throttled", NULL),
		       jget_u64(rq, "resumed", NULL),
		       jget_u64(rq, "inflight_cap", NULL),
		       jget_u64(rq, "inflight_cap_min", NULL));
	}
	ctl_format_bytes(jget_u64(root, "cache", "evicted_bytes"), b[0], 32);
	printf("%-11s %" PRIu64 " objects, %s\n", "evictions",
	       jget_u64(root, "cache", "evictions"), b[0]);
	json_decref(root);
	return CLI_EXIT_OK;
}

/* Check that @mnt is a hoardfs mount root; prints why not. */
static int check_root(const char *cmd, const char *mnt, char **doc)
{
	char key[CTL_KEY_MAX], err[512];

	if (ctl_check_path(mnt, key, sizeof(key), err, sizeof(err)) != 0) {
		fprintf(stderr, "hoardfs %s: %s\n", cmd, err);
		return CLI_EXIT_USAGE;
	}
	*doc = ctl_get(mnt, CTL_XATTR_STATUS);
	if (*doc)
		return 0;
	if (errno == ENODATA) {
		fprintf(stderr,
			"hoardfs %s: %s: not the root of a hoardfs mount\n",
			cmd, mnt);
		return CLI_EXIT_USAGE;
	}
	fprintf(stderr, "hoardfs %s: %s: reading %s: %s\n", cmd, mnt,
		CTL_XATTR_STATUS, strerror(errno));
	return CLI_EXIT_RUNTIME;
}

static int ctl_status(const struct ctl_args *a)
{
	char *doc = NULL;
	int rc = check_root("status", a->paths[0], &doc);

	if (rc != 0)
		return rc;
	if (a->json)
		printf("%s\n", doc);
	else
		rc = print_status_table(doc, a->paths[0]);
	free(doc);
	return rc;
}

/* ---- evict --------------------------------------------------------------- */

static int ctl_evict_all(const char *mnt)
{
	uint64_t bytes = 0, objects = 0, busy = 0;
	char *doc = NULL, *v, b[32];
	int rc = check_root("evict", mnt, &doc);

	free(doc);
	if (rc != 0)
		return rc;
	v = ctl_get(mnt, CTL_XATTR_EVICT_ALL);
	if (!v) {
		fprintf(stderr, "hoardfs evict: %s: %s\n", mnt,
			strerror(errno));
		return CLI_EXIT_RUNTIME;
	}
	if (sscanf(v, "evicted %" SCNu64 " objects %" SCNu64 " busy %" SCNu64,
		   &bytes, &objects, &busy) != 3) {
		fprintf(stderr, "hoardfs evict: %s: unexpected answer '%s'\n",
			mnt, v);
		free(v);
		return CLI_EXIT_RUNTIME;
	}
	free(v);
	ctl_format_bytes(bytes, b, sizeof(b));
	printf("evicted %s (%" PRIu64 " bytes) of %" PRIu64 " objects; %" PRIu64
	       " busy (open or being fetched) and kept\n",
	       b, bytes, objects, busy);
	return busy ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}

static int ctl_evict(const struct ctl_args *a)
{
	uint64_t bytes = 0, files = 0, busy = 0, failed = 0;
	struct ctl_files f;
	char err[512], b[32];
	int rc;

	if (a->all)
		return ctl_evict_all(a->paths[0]);
	rc = ctl_collect(a->paths, a->npaths, &f, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "hoardfs evict: %s\n",
			rc == -ENOMEM ? "out of memory" : err);
		return rc == -ENOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE;
	}
	for (size_t i = 0; i < f.n; i++) {
		char *v = ctl_get(f.v[i].path, CTL_XATTR_EVICT);
		uint64_t n = 0;

		if (!v && errno == EBUSY) {
			busy++;
			fprintf(stderr,
				"hoardfs evict: busy (open or being fetched), "
				"kept: %s\n",
				f.v[i].path);
			continue;
		}
		if (!v || sscanf(v, "evicted %" SCNu64, &n) != 1) {
			failed++;
			fprintf(stderr, "hoardfs evict: failed: %s: %s\n",
				f.v[i].path, v ? v : strerror(errno));
			free(v);
			continue;
		}
		free(v);
		bytes += n;
		files += n > 0;
	}
	ctl_format_bytes(bytes, b, sizeof(b));
	printf("evicted %s (%" PRIu64 " bytes) of %" PRIu64 " files out of %zu;"
	       " %" PRIu64 " busy, %" PRIu64 " failed\n",
	       b, bytes, files, f.n, busy, failed);
	ctl_files_free(&f);
	return busy || failed ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}

int ctl_main(int argc, char **argv)
{
	struct ctl_args a;
	char err[512];
	int rc = ctl_parse(argc, argv, &a, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "hoardfs %s: %s\n", argv[0],
			rc == -ENOMEM ? "out of memory" : err);
		ctl_args_free(&a);
		return rc == -ENOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE;
	}
	if (a.help) {
		fputs(ctl_usage(a.cmd), stdout);
		ctl_args_free(&a);
		return CLI_EXIT_OK;
	}
	switch (a.cmd) {
	case CTL_CMD_WARM:
		rc = ctl_warm(&a);
		break;
	case CTL_CMD_STATUS:
		rc = ctl_status(&a);
		break;
	case CTL_CMD_EVICT:
		rc = ctl_evict(&a);
		break;
	}
	ctl_args_free(&a);
	return rc;
}
