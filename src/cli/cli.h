/* SPDX-License-Identifier: MIT */
/*
 * Command-line and configuration parsing for the hoardfs daemon: options
 * in long form (--cache-dir DIR) and fstab form (-o cache_dir=DIR), the
 * obs:// or s3:// source, the environment's endpoint, region and
 * credentials.  Nothing here mounts or sends a request.
 */
#ifndef HOARDFS_CLI_H
#define HOARDFS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "hoardfs/client.h"

/* Exit statuses (sysexits-like but as the brief and s3fs users expect). */
#define CLI_EXIT_OK	 0
#define CLI_EXIT_RUNTIME 1 /* bucket, credentials, endpoint, mount */
#define CLI_EXIT_USAGE	 2 /* a bad option or argument */

/* Defaults, documented in --help, README and the man page. */
#define CLI_DEFAULT_PART_SIZE                                                  \
	(8ull << 20)		    /* 8 MiB: S3's advised range               \
				     * size [P §7] */
#define CLI_DEFAULT_PARALLEL	 16 /* GETs in flight */
#define CLI_DEFAULT_METADATA_TTL 60 /* seconds, as mountpoint-s3 --cache */
#define CLI_MAX_PARALLEL	 256
/* KiB of kernel read-ahead: two READ requests of FS_MAX_READ_BYTES ahead
 * (warm 256 MiB read 1.8-2.1 GB/s at the kernel's 128, 2.9-3.0 GB/s at
 * 1024 on the bench machine, docs/BENCHMARKS.md). */
#define CLI_DEFAULT_READ_AHEAD_KIB 1024
#define CLI_MAX_READ_AHEAD_KIB	   (64 << 10)

#define CLI_DEFAULT_MIN_FREE_PCT 5 /* as mountpoint-s3 keeps free */

/* A size given in bytes or as a percentage of the cache filesystem. */
struct cli_size {
	uint64_t bytes; /* when pct == 0 */
	unsigned pct;	/* 1..100, or 0 for bytes */
};

/* Everything the command line and environment decided.  Strings are owned
 * and freed by cli_options_free(). */
struct cli_options {
	char *bucket; /* from obs://BUCKET[/PREFIX] */
	char *prefix; /* "" or "a/b/" (always ends with '/') */
	char *source; /* the source as given, for the mount table */
	char *mountpoint;
	char *endpoint;	   /* http(s)://host[:port] */
	char *region;	   /* NULL: derive from the endpoint or us-east-1 */
	int path_style;	   /* --path-style */
	int list_v2;	   /* --list-v2 */
	int signature;	   /* --signature: enum client_signature, V4 default */
	char *resolve;	   /* --resolve HOST:PORT:ADDRESS, or NULL */
	char *cache_dir;   /* NULL: the default, see cli_default_cache_dir() */
	char *passwd_file; /* --passwd-file */
	char *ca_bundle;   /* --ca-bundle, else AWS_CA_BUNDLE */
	int foreground;	   /* -f or -d */
	int debug;	   /* -d: FUSE debug and log level debug */
	int log_level;	   /* enum log_level */

	char *metrics_file; /* --metrics-file: Prometheus text, or NULL */

	struct cli_size cache_size;	/* --cache-size; 0 bytes for no limit */
	struct cli_size cache_min_free; /* --cache-min-free */
	int ephemeral;		  /* --ephemeral: empty the cache at unmount */
	uint64_t part_size;	  /* bytes */
	unsigned parallel;	  /* GETs in flight */
	int64_t metadata_ttl_sec; /* -1 forever */
	int64_t negative_ttl_sec; /* -1 forever, -2 unset: the metadata TTL */
	unsigned prefetch_dir;	  /* --prefetch-dir N */
	unsigned read_ahead_kib;  /* --max-read-ahead-kb; 0: kernel default */
	uid_t uid;
	gid_t gid;
	mode_t file_mode; /* permission bits */
	mode_t dir_mode;
	char **fuse_opts; /* "-o" values passed through to libfuse */
	size_t nfuse_opts;
	int help;    /* --help: print usage and exit 0 */
	int version; /* --version */
};

/*
 * cli_parse - parse @argv into @o (which is first reset to the defaults).
 * Environment (endpoint, region, CA bundle) is read here too.  On error
 * writes one line naming the bad option or argument into @err (@errlen
 * bytes) and returns -EINVAL; -ENOMEM when out of memory.  Returns 0 on
 * success, also for --help and --version (check o->help, o->version).
 */
int cli_parse(int argc, char **argv, struct cli_options *o, char *err,
	      size_t errlen) __attribute__((warn_unused_result));

/*
 * cli_size_resolve - @sz in bytes for a filesystem of @fs_bytes.
 */
uint64_t cli_size_resolve(const struct cli_size *sz, uint64_t fs_bytes);

/*
 * cli_mount_bdi - the backing device "MAJOR:MINOR" of the mount at
 * @mountpoint (a canonical absolute path) in @mountinfo, read to its end
 * in /proc/PID/mountinfo format (proc(5): field 3 the device, field 5 the
 * mount point with octal escapes); the last match wins, as the newest
 * mount hides older ones on the same path.  Writes it into @out (@outlen
 * bytes).  Returns 0, -ENOENT when no line names @mountpoint, or
 * -ENAMETOOLONG when @out is too small.
 */
int cli_mount_bdi(FILE *mountinfo, const char *mountpoint, char *out,
		  size_t outlen) __attribute__((warn_unused_result));

/*
 * cli_set_read_ahead - set the kernel read-ahead of the mount at
 * @mountpoint (canonical absolute path) to @kib KiB
 * (/sys/class/bdi/MAJOR:MINOR/read_ahead_kb).  Sends no FUSE request, so
 * it may run on the mount's own FUSE threads; it must run after the
 * kernel applied the INIT reply, which resets the value.  Returns
 * 0, or -errno: -ENOENT when the mount is not in /proc/self/mountinfo,
 * -EACCES or -EROFS when sysfs refuses (not root, read-only /sys in a
 * container).  Blocks briefly on procfs and sysfs.
 */
int cli_set_read_ahead(const char *mountpoint, unsigned kib)
	__attribute__((warn_unused_result));

/* cli_options_free - free what @o owns and reset it. */
void cli_options_free(struct cli_options *o);

/* cli_usage - the --help text. */
const char *cli_usage(void);

/*
 * cli_default_cache_dir - /cache/hoardfs when /cache is a directory, else
 * ${XDG_CACHE_HOME:-$HOME/.cache}/hoardfs.  Returns a malloc'd string or
 * NULL when out of memory or neither HOME nor XDG_CACHE_HOME is set.
 */
char *cli_default_cache_dir(void);

/* Access keys found by cli_credentials_load(); strings owned. */
struct cli_credentials {
	char *access_key;
	char *secret_key;
	char *security_token; /* NULL when none */
	int64_t expires_sec;  /* temporary keys: when they expire; else 0 */
	const char *source;   /* where they came from, for the log (static) */
	char *metadata_url;   /* ECS keys: the service to renew them from */
	client_refresh_fn refresh; /* ECS keys: cli_credentials_refresh */
};

/* The ECS/CCE metadata service [P §6.2]; HOARDFS_ECS_METADATA_URL
 * overrides it ("off" skips that step). */
#define CLI_ECS_METADATA_URL "http://169.254.169.254"

/*
 * cli_credentials_load - the first credentials found in this order:
 * @passwd_file (when not NULL: lines "AK:SK[:TOKEN]" or s3fs's
 * "BUCKET:AK:SK" for @bucket, '#' comments, see cli_passwd_parse(); the
 * file must not be readable or writable by group or others),
 * OBS_ACCESS_KEY_ID / OBS_SECRET_ACCESS_KEY / OBS_SECURITY_TOKEN,
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
 * MoXing's ACCESS_KEY_ID / SECRET_ACCESS_KEY / SECURITY_TOKEN, the
 * profile AWS_PROFILE (else "default") of the shared credentials file
 * AWS_SHARED_CREDENTIALS_FILE (else ~/.aws/credentials), and last the
 * temporary keys of the ECS metadata service (HOARDFS_ECS_METADATA_URL,
 * else CLI_ECS_METADATA_URL), which come with c->refresh set so that the
 * client renews them [P §6.1, §6.2].
 * Returns 0, -ENOENT when none is found (or AWS_PROFILE names a profile
 * the file lacks), -EPERM for a passwd file with a too open mode, -EINVAL
 * for one without a valid line, -EACCES when the metadata service has no
 * agency to offer, -errno when a file cannot be read; @err gets one line
 * saying which (never a secret).  May block up to ~10 s on the metadata
 * service.
 */
int cli_credentials_load(const char *passwd_file, const char *bucket,
			 struct cli_credentials *c, char *err, size_t errlen)
	__attribute__((warn_unused_result));

/*
 * cli_credentials_refresh - a client_refresh_fn for keys from the
 * metadata service: @arg is the struct cli_credentials they were loaded
 * into (only its metadata_url is read, so it is safe from any thread);
 * fetches fresh keys and installs them with client_set_credentials().
 * Returns 0 or the -errno of client_ecs_credentials().
 */
int cli_credentials_refresh(void *arg, struct client *c);

/*
 * cli_aws_credentials_parse - the keys of [@profile] in an AWS shared
 * credentials file's text (@len bytes): aws_access_key_id,
 * aws_secret_access_key and aws_session_token (or the older
 * aws_security_token); '#' and ';' start comments; names and values are
 * trimmed [P §7].  Returns 0, -ENOENT when the profile is missing,
 * -EINVAL when it lacks a key or secret, -ENOMEM.
 */
int cli_aws_credentials_parse(const char *text, size_t len, const char *profile,
			      struct cli_credentials *c)
	__attribute__((warn_unused_result));

/* A temporary security token is hundreds of bytes (OBS and AWS STS); a
 * third field shorter than this is a secret key in s3fs's bucket form. */
#define CLI_MIN_TOKEN_LEN 100

/*
 * cli_passwd_parse - the first valid line of @text (@len bytes, need not
 * be NUL-terminated): "AK:SK", "AK:SK:TOKEN", or s3fs's "BUCKET:AK:SK"
 * when BUCKET is @bucket (may be NULL).  A three-field line for another
 * bucket (third field shorter than CLI_MIN_TOKEN_LEN) is skipped, so a
 * secret key is never sent as a token.  Whitespace around fields is
 * trimmed.  Returns 0, -EINVAL when no line is valid, -ENOMEM.
 */
int cli_passwd_parse(const char *text, size_t len, const char *bucket,
		     struct cli_credentials *c)
	__attribute__((warn_unused_result));

/* cli_credentials_free - wipe and free the strings in @c. */
void cli_credentials_free(struct cli_credentials *c);

#endif
