// SPDX-License-Identifier: MIT
/*
 * Option parsing.  One table describes every hoardfs option; each is
 * accepted as --name VALUE, --name=VALUE and -o name=VALUE (dashes become
 * underscores in the -o form, as in fstab).  -o values hoardfs does not own
 * are passed to libfuse only when they are known mount options; anything
 * else is refused with a message naming it, so a typo never mounts with a
 * silently ignored setting.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

static const char usage_text[] =
	"usage: hoardfs [options] obs://BUCKET[/PREFIX] MOUNTPOINT\n"
	"       (s3://BUCKET[/PREFIX] is the same)\n"
	"\n"
	"Mount a bucket read-only, caching every object read on local disk.\n"
	"\n"
	"Store:\n"
	"  --endpoint URL        http(s)://host[:port]; else OBS_ENDPOINT,\n"
	"                        AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or "
	"S3_ENDPOINT\n"
	"  --region NAME         signing region (default: from the endpoint,\n"
	"                        AWS_REGION, or us-east-1)\n"
	"  --path-style          path-style addressing (default: "
	"virtual-hosted,\n"
	"                        path style for IP and localhost endpoints)\n"
	"  --list-v2             ListObjectsV2 (default V1, which OBS always "
	"has)\n"
	"  --signature SCHEME    v4 (default), v2 or obs (native OBS "
	"signing)\n"
	"  --passwd-file FILE    AK:SK[:TOKEN] lines; refused unless mode "
	"0600\n"
	"  --ca-bundle FILE      CA certificates for https (else "
	"AWS_CA_BUNDLE)\n"
	"\n"
	"Cache:\n"
	"  --cache-dir DIR       default /cache/hoardfs if /cache exists, "
	"else\n"
	"                        ${XDG_CACHE_HOME:-~/.cache}/hoardfs\n"
	"  --cache-size SIZE     limit on the cache's own bytes, as bytes or "
	"a\n"
	"                        percentage of the cache filesystem (default:\n"
	"                        none)\n"
	"  --cache-min-free SIZE free space kept on the cache filesystem,\n"
	"                        bytes or percentage (default 5%)\n"
	"  --ephemeral           empty the cache at unmount\n"
	"  --part-size BYTES     bytes per ranged GET (default 8MiB)\n"
	"  --parallel N          ranged GETs in flight (default 16)\n"
	"  --metadata-ttl SEC    how long listings and attributes are "
	"trusted,\n"
	"                        or 'forever' (default 60)\n"
	"  --negative-ttl SEC    how long a missing name is remembered\n"
	"                        (default: the metadata TTL)\n"
	"  --prefetch-dir N      after a file is opened, fetch the next N "
	"files\n"
	"                        of its directory (default 0, at most 256)\n"
	"  --max-read-ahead-kb N kernel read-ahead of the mount in KiB\n"
	"                        (default 1024; 0 keeps the kernel's)\n"
	"\n"
	"Files:\n"
	"  --uid N, --gid N      owner of every file (default: the mounting "
	"user)\n"
	"  --umask MODE          octal; files 0666&~MODE, dirs 0777&~MODE\n"
	"                        (default: files 0444, dirs 0555)\n"
	"  --file-mode MODE      octal permission bits of files\n"
	"  --dir-mode MODE       octal permission bits of directories\n"
	"\n"
	"Process:\n"
	"  -f, --foreground      stay in the foreground, log to stderr\n"
	"  -d, --debug           foreground with debug logging and FUSE "
	"tracing\n"
	"  --log-level LEVEL     error, warn, info (default) or debug\n"
	"  --metrics-file PATH   write Prometheus text metrics to PATH every "
	"5 s\n"
	"                        and at exit (node_exporter textfile style)\n"
	"  -o OPT[,OPT...]       the options above as name=value "
	"(cache_dir=DIR,\n"
	"                        path_style, ...) and FUSE mount options\n"
	"                        (allow_other, allow_root, "
	"default_permissions,\n"
	"                        auto_unmount, max_read=N, nosuid, nodev, "
	"...)\n"
	"  -h, --help            this text\n"
	"  -V, --version         the version\n"
	"\n"
	"Credentials, first found: --passwd-file; OBS_ACCESS_KEY_ID,\n"
	"OBS_SECRET_ACCESS_KEY, OBS_SECURITY_TOKEN; AWS_ACCESS_KEY_ID,\n"
	"AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; ACCESS_KEY_ID,\n"
	"SECRET_ACCESS_KEY, SECURITY_TOKEN (MoXing); the AWS_PROFILE profile "
	"of\n"
	"~/.aws/credentials (or AWS_SHARED_CREDENTIALS_FILE); the temporary "
	"keys\n"
	"of the ECS metadata service, renewed before they expire.\n"
	"\n"
	"Exit status: 0 unmounted cleanly, 1 runtime error, 2 usage error.\n"
	"\n"
	"Commands for a running mount (each has --help):\n"
	"  hoardfs warm PATH... [--jobs N] [--shard K/N] [--background]\n"
	"  hoardfs status MOUNTPOINT [--json]\n"
	"  hoardfs evict PATH... | hoardfs evict --all MOUNTPOINT\n";

const char *cli_usage(void)
{
	return usage_text;
}

enum opt_id {
	OPT_ENDPOINT,
	OPT_REGION,
	OPT_PATH_STYLE,
	OPT_LIST_V2,
	OPT_SIGNATURE,
	OPT_RESOLVE,
	OPT_PASSWD_FILE,
	OPT_CA_BUNDLE,
	OPT_CACHE_DIR,
	OPT_CACHE_SIZE,
	OPT_CACHE_MIN_FREE,
	OPT_EPHEMERAL,
	OPT_PART_SIZE,
	OPT_PARALLEL,
	OPT_METADATA_TTL,
	OPT_NEGATIVE_TTL,
	OPT_PREFETCH_DIR,
	OPT_READ_AHEAD,
	OPT_UID,
	OPT_GID,
	OPT_UMASK,
	OPT_FILE_MODE,
	OPT_DIR_MODE,
	OPT_FOREGROUND,
	OPT_DEBUG,
	OPT_LOG_LEVEL,
	OPT_METRICS_FILE,
	OPT_HELP,
	OPT_VERSION,
};

/* One hoardfs option: its long name (the -o name swaps '-' for '_'). */
struct opt_def {
	const char *name; /* long form without the dashes */
	char short_name;  /* single-letter form, or 0 */
	int has_arg;	  /* takes a value */
	enum opt_id id;
};

static const struct opt_def opt_defs[] = {
	{"endpoint", 0, 1, OPT_ENDPOINT},
	{"region", 0, 1, OPT_REGION},
	{"path-style", 0, 0, OPT_PATH_STYLE},
	{"list-v2", 0, 0, OPT_LIST_V2},
	{"signature", 0, 1, OPT_SIGNATURE},
	/* Not in --help (a test and private-DNS aid); in the man page. */
	{"resolve", 0, 1, OPT_RESOLVE},
	{"passwd-file", 0, 1, OPT_PASSWD_FILE},
	{"ca-bundle", 0, 1, OPT_CA_BUNDLE},
	{"cache-dir", 0, 1, OPT_CACHE_DIR},
	{"cache-size", 0, 1, OPT_CACHE_SIZE},
	{"cache-min-free", 0, 1, OPT_CACHE_MIN_FREE},
	{"ephemeral", 0, 0, OPT_EPHEMERAL},
	{"part-size", 0, 1, OPT_PART_SIZE},
	{"parallel", 0, 1, OPT_PARALLEL},
	{"metadata-ttl", 0, 1, OPT_METADATA_TTL},
	{"negative-ttl", 0, 1, OPT_NEGATIVE_TTL},
	{"prefetch-dir", 0, 1, OPT_PREFETCH_DIR},
	{"max-read-ahead-kb", 0, 1, OPT_READ_AHEAD},
	{"uid", 0, 1, OPT_UID},
	{"gid", 0, 1, OPT_GID},
	{"umask", 0, 1, OPT_UMASK},
	{"file-mode", 0, 1, OPT_FILE_MODE},
	{"dir-mode", 0, 1, OPT_DIR_MODE},
	{"foreground", 'f', 0, OPT_FOREGROUND},
	{"debug", 'd', 0, OPT_DEBUG},
	{"log-level", 0, 1, OPT_LOG_LEVEL},
	{"metrics-file", 0, 1, OPT_METRICS_FILE},
	{"help", 'h', 0, OPT_HELP},
	{"version", 'V', 0, OPT_VERSION},
};

/*
 * Mount options handed to libfuse as they are.  fstab-only words (_netdev,
 * nofail, x-systemd.*, ...) are accepted and dropped: mount(8) and systemd
 * read them, the filesystem must not choke on them.
 */
static const char *const fuse_pass[] = {
	"allow_other",	"allow_root", "default_permissions",
	"auto_unmount", "ro",	      "nosuid",
	"suid",		"nodev",      "dev",
	"noexec",	"exec",	      "noatime",
	"atime",	"relatime",   "nodiratime",
	"sync",		"async",      "dirsync",
};
static const char *const fuse_pass_value[] = {
	"max_read=", "fsname=", "subtype="};
static const char *const fstab_only[] = {"_netdev", "defaults", "auto",
					 "noauto",  "nofail",	"user",
					 "nouser",  "users",	"owner"};
static const char *const fstab_only_prefix[] = {"x-", "comment="};

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int set_str(char **dst, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static int parse_uint(const char *text, int base, unsigned long max,
		      unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!text[0] || text[0] == '-' || text[0] == '+')
		return -EINVAL;
	errno = 0;
	v = strtoul(text, &end, base);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "4GiB" or "50%" (a whole percentage, 0 to 100). */
static int parse_size(const char *text, struct cli_size *out)
{
	size_t len = strlen(text);
	unsigned long pct;
	char digits[8];

	if (len > 1 && text[len - 1] == '%') {
		if (len - 1 >= sizeof(digits))
			return -EINVAL;
		memcpy(digits, text, len - 1);
		digits[len - 1] = '\0';
		if (parse_uint(digits, 10, 100, &pct) != 0)
			return -EINVAL;
		out->pct = (unsigned)pct;
		out->bytes = 0;
		return 0;
	}
	out->pct = 0;
	return util_parse_bytes(text, &out->bytes);
}

uint64_t cli_size_resolve(const struct cli_size *sz, uint64_t fs_bytes)
{
	return sz->pct ? fs_bytes / 100 * sz->pct : sz->bytes;
}

/* Apply one hoardfs option; @shown is how the user wrote its name. */
static int apply(struct cli_options *o, const struct opt_def *d,
		 const char *value, const char *shown, char *err, size_t errlen)
{
	unsigned long v;
	int rc = 0;

	switch (d->id) {
	case OPT_ENDPOINT:
		if (strncmp(value, "http://", 7) != 0 &&
		    strncmp(value, "https://", 8) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not an http:// or https:// "
				    "URL",
				    shown, value);
		return set_str(&o->endpoint, value);
	case OPT_REGION:
		if (!value[0])
			return fail(err, errlen, "%s: empty region", shown);
		return set_str(&o->region, value);
	case OPT_PATH_STYLE:
		o->path_style = 1;
		return 0;
	case OPT_LIST_V2:
		o->list_v2 = 1;
		return 0;
	case OPT_SIGNATURE:
		if (strcmp(value, "v4") == 0)
			o->signature = CLIENT_SIG_V4;
		else if (strcmp(value, "v2") == 0)
			o->signature = CLIENT_SIG_V2;
		else if (strcmp(value, "obs") == 0)
			o->signature = CLIENT_SIG_OBS;
		else
			return fail(err, errlen,
				    "%s: '%s' is not v4, v2 or obs", shown,
				    value);
		return 0;
	case OPT_RESOLVE:
		/* HOST:PORT:ADDRESS, as curl --resolve takes it. */
		if (!strchr(value, ':') ||
		    strspn(strchr(value, ':') + 1, "0123456789") == 0 ||
		    !strchr(strchr(value, ':') + 1, ':'))
			return fail(err, errlen,
				    "%s: '%s' is not HOST:PORT:ADDRESS", shown,
				    value);
		return set_str(&o->resolve, value);
	case OPT_PASSWD_FILE:
		return set_str(&o->passwd_file, value);
	case OPT_CA_BUNDLE:
		return set_str(&o->ca_bundle, value);
	case OPT_CACHE_DIR:
		if (!value[0])
			return fail(err, errlen, "%s: empty directory", shown);
		return set_str(&o->cache_dir, value);
	case OPT_CACHE_SIZE:
	case OPT_CACHE_MIN_FREE:
		if (parse_size(value, d->id == OPT_CACHE_SIZE
					      ? &o->cache_size
					      : &o->cache_min_free) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not a size (4GiB) or a "
				    "percentage (50%%)",
				    shown, value);
		return 0;
	case OPT_EPHEMERAL:
		o->ephemeral = 1;
		return 0;
	case OPT_PART_SIZE:
		/* Below 64 KiB the per-request cost dominates; above 1 GiB
		 * one part no longer fits a sane memory or retry budget. */
		if (util_parse_bytes(value, &o->part_size) != 0 ||
		    o->part_size < (64u << 10) || o->part_size > (1u << 30))
			return fail(err, errlen,
				    "%s: '%s' is not a size from 64KiB to 1GiB",
				    shown, value);
		return 0;
	case OPT_PARALLEL:
		if (parse_uint(value, 10, CLI_MAX_PARALLEL, &v) != 0 || v == 0)
			return fail(err, errlen,
				    "%s: '%s' is not a number from 1 to %d",
				    shown, value, CLI_MAX_PARALLEL);
		o->parallel = (unsigned)v;
		return 0;
	case OPT_NEGATIVE_TTL:
		if (util_parse_seconds(value, &o->negative_ttl_sec) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not a number of seconds or "
				    "'forever'",
				    shown, value);
		return 0;
	case OPT_PREFETCH_DIR:
		if (parse_uint(value, 10, 256, &v) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not a number from 0 to 256",
				    shown, value);
		o->prefetch_dir = (unsigned)v;
		return 0;
	case OPT_READ_AHEAD:
		if (parse_uint(value, 10, CLI_MAX_READ_AHEAD_KIB, &v) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not a number of KiB from 0 to "
				    "%u",
				    shown, value, CLI_MAX_READ_AHEAD_KIB);
		o->read_ahead_kib = (unsigned)v;
		return 0;
	case OPT_METADATA_TTL:
		if (util_parse_seconds(value, &o->metadata_ttl_sec) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not a number of seconds or "
				    "'forever'",
				    shown, value);
		return 0;
	case OPT_UID:
	case OPT_GID:
		if (parse_uint(value, 10, UINT_MAX - 1, &v) != 0)
			return fail(err, errlen, "%s: '%s' is not a numeric id",
				    shown, value);
		if (d->id == OPT_UID)
			o->uid = (uid_t)v;
		else
			o->gid = (gid_t)v;
		return 0;
	case OPT_UMASK:
	case OPT_FILE_MODE:
	case OPT_DIR_MODE:
		if (parse_uint(value, 8, 07777, &v) != 0)
			return fail(err, errlen,
				    "%s: '%s' is not an octal mode", shown,
				    value);
		if (d->id == OPT_UMASK) {
			o->file_mode = 0666 & ~(mode_t)v;
			o->dir_mode = 0777 & ~(mode_t)v;
		} else if (d->id == OPT_FILE_MODE) {
			o->file_mode = (mode_t)v;
		} else {
			o->dir_mode = (mode_t)v;
		}
		return 0;
	case OPT_FOREGROUND:
		o->foreground = 1;
		return 0;
	case OPT_DEBUG:
		o->debug = o->foreground = 1;
		o->log_level = LOG_LEVEL_DEBUG;
		return 0;
	case OPT_LOG_LEVEL:
		rc = log_level_parse(value);
		if (rc < 0)
			return fail(err, errlen,
				    "%s: '%s' is not error, warn, info or "
				    "debug",
				    shown, value);
		o->log_level = rc;
		return 0;
	case OPT_METRICS_FILE:
		if (!value[0])
			return fail(err, errlen, "%s: empty path", shown);
		return set_str(&o->metrics_file, value);
	case OPT_HELP:
		o->help = 1;
		return 0;
	case OPT_VERSION:
		o->version = 1;
		return 0;
	}
	return fail(err, errlen, "%s: unhandled option", shown);
}

static const struct opt_def *find_long(const char *name, size_t len,
				       int underscores)
{
	for (size_t i = 0; i < sizeof(opt_defs) / sizeof(opt_defs[0]); i++) {
		const char *n = opt_defs[i].name;
		size_t j;

		if (strlen(n) != len)
			continue;
		for (j = 0; j < len; j++) {
			char c = n[j] == '-' && underscores ? '_' : n[j];

			if (c != name[j])
				break;
		}
		if (j == len)
			return &opt_defs[i];
	}
	return NULL;
}

static int in_list(const char *word, const char *const *list, size_t n,
		   int prefix)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(list[i]);

		if (prefix ? strncmp(word, list[i], len) == 0
			   : strcmp(word, list[i]) == 0)
			return 1;
	}
	return 0;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int add_fuse_opt(struct cli_options *o, const char *word)
{
	char **v = realloc(o->fuse_opts, (o->nfuse_opts + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	o->fuse_opts = v;
	v[o->nfuse_opts] = strdup(word);
	if (!v[o->nfuse_opts])
		return -ENOMEM;
	o->nfuse_opts++;
	return 0;
}

/* One word of a -o list: a hoardfs option, a FUSE option, or an error. */
static int apply_o_word(struct cli_options *o, const char *word, char *err,
			size_t errlen)
{
	const char *eq = strchr(word, '=');
	size_t nlen = eq ? (size_t)(eq - word) : strlen(word);
	const struct opt_def *d = find_long(word, nlen, 1);
	char shown[128];

	if (!word[0])
		return 0;
	if (d) {
		snprintf(shown, sizeof(shown), "-o %.*s", (int)nlen, word);
		if (d->has_arg && !eq)
			return fail(err, errlen, "%s needs a value (%s=...)",
				    shown, shown + 3);
		if (!d->has_arg && eq)
			return fail(err, errlen, "%s takes no value", shown);
		return apply(o, d, eq ? eq + 1 : "", shown, err, errlen);
	}
	if (strcmp(word, "rw") == 0)
		return fail(err, errlen, "-o rw: hoardfs mounts are read-only");
	if (in_list(word, fstab_only, COUNT(fstab_only), 0) ||
	    in_list(word, fstab_only_prefix, COUNT(fstab_only_prefix), 1))
		return 0;
	if (in_list(word, fuse_pass, COUNT(fuse_pass), 0) ||
	    in_list(word, fuse_pass_value, COUNT(fuse_pass_value), 1))
		return add_fuse_opt(o, word);
	return fail(err, errlen, "unknown mount option '-o %s'", word);
}

static int apply_o_list(struct cli_options *o, const char *list, char *err,
			size_t errlen)
{
	char *copy = strdup(list), *save = NULL, *word;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (word = strtok_r(copy, ",", &save); word && rc == 0;
	     word = strtok_r(NULL, ",", &save))
		rc = apply_o_word(o, word, err, errlen);
	free(copy);
	return rc;
}

/* Split obs://BUCKET[/PREFIX] or s3://... into bucket and prefix. */
static int parse_source(struct cli_options *o, const char *src, char *err,
			size_t errlen)
{
	const char *rest, *slash;
	size_t blen, plen;

	if (strncmp(src, "obs://", 6) == 0)
		rest = src + 6;
	else if (strncmp(src, "s3://", 5) == 0)
		rest = src + 5;
	else
		return fail(err, errlen,
			    "source '%s' is not obs://BUCKET[/PREFIX] or "
			    "s3://BUCKET[/PREFIX]",
			    src);
	slash = strchr(rest, '/');
	blen = slash ? (size_t)(slash - rest) : strlen(rest);
	/* S3 and OBS bucket names: 3-63 of [a-z0-9.-]; Ceph and MinIO
	 * deployments also allow capitals and '_', so accept those. */
	if (blen < 3 || blen > 63 ||
	    strspn(rest, "abcdefghijklmnopqrstuvwxyz"
			 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < blen)
		return fail(err, errlen,
			    "source '%s': '%.*s' is not a valid bucket name",
			    src, (int)blen, rest);
	o->bucket = strndup(rest, blen);
	o->source = strdup(src);
	if (!o->bucket || !o->source)
		return -ENOMEM;
	rest = slash ? slash : "";
	while (*rest == '/')
		rest++;
	plen = strlen(rest);
	while (plen > 0 && rest[plen - 1] == '/')
		plen--;
	o->prefix = malloc(plen + 2);
	if (!o->prefix)
		return -ENOMEM;
	memcpy(o->prefix, rest, plen);
	if (plen)
		o->prefix[plen++] = '/';
	o->prefix[plen] = '\0';
	return 0;
}

/* The endpoint from the environment, in the order of [P §6.1]. */
static int endpoint_from_env(struct cli_options *o)
{
	static const char *const vars[] = {
		"OBS_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"};
	const char *v, *https;

	for (size_t i = 0; i < COUNT(vars); i++) {
		v = getenv(vars[i]);
		if (v && v[0])
			return set_str(&o->endpoint, v);
	}
	/* MoXing's S3_ENDPOINT may be a bare host; S3_USE_HTTPS=0 picks
	 * http:// for it. */
	v = getenv("S3_ENDPOINT");
	if (!v || !v[0])
		return 0;
	if (strstr(v, "://"))
		return set_str(&o->endpoint, v);
	https = getenv("S3_USE_HTTPS");
	if (asprintf(&o->endpoint, "%s://%s",
		     https && strcmp(https, "0") == 0 ? "http" : "https",
		     v) < 0) {
		o->endpoint = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void reset(struct cli_options *o)
{
	memset(o, 0, sizeof(*o));
	o->log_level = LOG_LEVEL_INFO;
	o->part_size = CLI_DEFAULT_PART_SIZE;
	o->cache_min_free.pct = CLI_DEFAULT_MIN_FREE_PCT;
	o->parallel = CLI_DEFAULT_PARALLEL;
	o->read_ahead_kib = CLI_DEFAULT_READ_AHEAD_KIB;
	o->metadata_ttl_sec = CLI_DEFAULT_METADATA_TTL;
	o->negative_ttl_sec = -2;
	o->uid = getuid();
	o->gid = getgid();
	o->file_mode = 0444;
	o->dir_mode = 0555;
}

/* Handle argv[*i], a word starting with '-'.  May consume argv[*i + 1]. */
static int parse_dash(struct cli_options *o, int argc, char **argv, int *i,
		      char *err, size_t errlen)
{
	const char *arg = argv[*i], *value = NULL, *eq;
	const struct opt_def *d = NULL;
	char shown[128];

	if (strncmp(arg, "-o", 2) == 0) {
		if (arg[2])
			return apply_o_list(o, arg + 2, err, errlen);
		if (*i + 1 >= argc)
			return fail(err, errlen, "-o needs a value");
		return apply_o_list(o, argv[++*i], err, errlen);
	}
	if (arg[1] == '-') {
		eq = strchr(arg, '=');
		d = find_long(arg + 2,
			      eq ? (size_t)(eq - arg - 2) : strlen(arg + 2), 0);
		if (!d)
			return fail(err, errlen, "unknown option '%.*s'",
				    eq ? (int)(eq - arg) : (int)strlen(arg),
				    arg);
		snprintf(shown, sizeof(shown), "--%s", d->name);
		if (eq && !d->has_arg)
			return fail(err, errlen, "%s takes no value", shown);
		value = eq ? eq + 1 : NULL;
	} else {
		for (size_t k = 0; k < COUNT(opt_defs) && arg[2] == '\0'; k++)
			if (opt_defs[k].short_name == arg[1])
				d = &opt_defs[k];
		if (!d)
			return fail(err, errlen, "unknown option '%s'", arg);
		snprintf(shown, sizeof(shown), "%s", arg);
	}
	if (d->has_arg && !value) {
		if (*i + 1 >= argc)
			return fail(err, errlen, "%s needs a value", shown);
		value = argv[++*i];
	}
	return apply(o, d, value ? value : "", shown, err, errlen);
}

/* Prefix the working directory to the relative path *@path. */
static int make_absolute(char **path)
{
	char *cwd = getcwd(NULL, 0), *abs = NULL;

	if (!cwd)
		return -errno;
	if (asprintf(&abs, "%s/%s", cwd, *path) < 0)
		abs = NULL;
	free(cwd);
	if (!abs)
		return -ENOMEM;
	free(*path);
	*path = abs;
	return 0;
}

int cli_parse(int argc, char **argv, struct cli_options *o, char *err,
	      size_t errlen)
{
	const char *positional[2];
	int npos = 0, rc = 0, dashdash = 0;
	const char *ca;

	reset(o);
	err[0] = '\0';
	for (int i = 1; i < argc && rc == 0; i++) {
		const char *arg = argv[i];

		if (!dashdash && strcmp(arg, "--") == 0) {
			dashdash = 1;
		} else if (!dashdash && arg[0] == '-' && arg[1]) {
			rc = parse_dash(o, argc, argv, &i, err, errlen);
		} else if (npos < 2) {
			positional[npos++] = arg;
		} else {
			rc = fail(err, errlen, "unexpected argument '%s'", arg);
		}
	}
	if (rc != 0 || o->help || o->version)
		return rc;
	if (npos < 2)
		return fail(err, errlen,
			    "expected obs://BUCKET[/PREFIX] and MOUNTPOINT "
			    "(see --help)");
	rc = parse_source(o, positional[0], err, errlen);
	if (rc == 0)
		rc = set_str(&o->mountpoint, positional[1]);
	if (rc == 0 && !o->endpoint)
		rc = endpoint_from_env(o);
	if (rc == 0 && !o->endpoint)
		return fail(err, errlen,
			    "no endpoint: give --endpoint URL or set "
			    "AWS_ENDPOINT_URL");
	if (rc == 0 && strncmp(o->endpoint, "http://", 7) != 0 &&
	    strncmp(o->endpoint, "https://", 8) != 0)
		return fail(err, errlen,
			    "endpoint '%s' is not an http:// or https:// URL",
			    o->endpoint);
	if (rc == 0 && !o->region) {
		const char *r = getenv("AWS_REGION");

		if (!r || !r[0])
			r = getenv("AWS_DEFAULT_REGION");
		if (r && r[0])
			rc = set_str(&o->region, r);
	}
	/* The daemon changes to / when it forks: keep paths meaningful. */
	/* libfuse unmounts by this path after the fork changed to /. */
	if (rc == 0 && o->mountpoint[0] != '/' &&
	    make_absolute(&o->mountpoint) != 0)
		return fail(err, errlen,
			    "mountpoint %s: cannot make it absolute: %s",
			    o->mountpoint, strerror(errno));
	if (rc == 0 && o->cache_dir && o->cache_dir[0] != '/' &&
	    make_absolute(&o->cache_dir) != 0)
		return fail(err, errlen,
			    "--cache-dir %s: cannot make it absolute: %s",
			    o->cache_dir, strerror(errno));
	ca = getenv("AWS_CA_BUNDLE");
	if (rc == 0 && !o->ca_bundle && ca && ca[0])
		rc = set_str(&o->ca_bundle, ca);
	return rc;
}

void cli_options_free(struct cli_options *o)
{
	free(o->bucket);
	free(o->prefix);
	free(o->source);
	free(o->mountpoint);
	free(o->endpoint);
	free(o->region);
	free(o->cache_dir);
	free(o->passwd_file);
	free(o->ca_bundle);
	free(o->metrics_file);
	free(o->resolve);
	for (size_t i = 0; i < o->nfuse_opts; i++)
		free(o->fuse_opts[i]);
	free(o->fuse_opts);
	memset(o, 0, sizeof(*o));
}

char *cli_default_cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	struct stat st;
	char *dir = NULL;
	int n;

	if (stat("/cache", &st) == 0 && S_ISDIR(st.st_mode))
		n = asprintf(&dir, "/cache/hoardfs");
	else if (xdg && xdg[0] == '/')
		n = asprintf(&dir, "%s/hoardfs", xdg);
	else if (home && home[0])
		n = asprintf(&dir, "%s/.cache/hoardfs", home);
	else
		return NULL;
	return n < 0 ? NULL : dir;
}
