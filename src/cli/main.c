// SPDX-License-Identifier: MIT
/*
 * The hoardfs daemon: parse options, find credentials, check that the
 * bucket answers and the cache dir is usable, mount, daemonize, and run
 * the multi-threaded FUSE loop until unmounted (fusermount3 -u, SIGINT,
 * SIGTERM or SIGHUP).  Every failure before the mount appears exits with
 * one line naming the cause: 2 for usage, 1 for everything else.
 * "hoardfs warm|status|evict ..." are commands for a running mount
 * instead (ctl.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "cli/cli.h"
#include "cli/ctl.h"
#include "cli/monitor.h"
#include "hoardfs/client.h"
#include "hoardfs/fs.h"
#include "hoardfs/idx.h"
#include "hoardfs/log.h"
#include "hoardfs/sched.h"
#include "hoardfs/store.h"

/* FUSE worker threads: readers block in read() while parts arrive, so
 * allow many more than cores; libfuse starts them only on demand. */
#define MAIN_MAX_FUSE_THREADS 64

/* Everything main() sets up, torn down in reverse by teardown(). */
struct daemon {
	struct cli_options opt;
	struct cli_credentials creds;
	struct client *client;
	struct store *store;
	struct idx *idx;
	struct fs *fs;
	struct sched *sched;
	struct monitor *mon; /* status, metrics file, SIGUSR1 */
	struct fuse_session *se;
	int mounted;
	int mounted_once; /* the mount appeared at some point */
	int signals_set;
	struct fuse_args args;
	char *db_path;		    /* <cache_dir>/index.db */
	uint64_t cache_limit_bytes; /* --cache-size, resolved */
	uint64_t min_free_bytes;    /* --cache-min-free, resolved */
	char *mountpoint_real;	    /* the mountpoint, canonical */
};

/* --ephemeral: the cache's life is the mount's.  Runs after the index is
 * closed; the lock file goes last, with the process. */
static void wipe_cache(struct daemon *d)
{
	static const char *const suffixes[] = {"", "-wal", "-shm"};
	char path[PATH_MAX];
	int rc = store_wipe(d->store);

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", d->db_path, suffixes[i]);
		if (unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = -errno;
	}
	if (rc != 0)
		log_error("ephemeral cache %s: not fully removed: %s",
			  d->opt.cache_dir, strerror(-rc));
	else
		log_info("ephemeral cache %s emptied", d->opt.cache_dir);
}

/* One line of the client's counters at unmount (not after a failed
 * start, which says why in one line and nothing else). */
static void log_client_summary(struct client *c)
{
	struct client_stats st;

	client_get_stats(c, &st);
	log_info("client: %" PRIu64 " requests, %" PRIu64 " attempts, %" PRIu64
		 " retries (%" PRIu64 " resumed bodies), %" PRIu64
		 " throttled, %" PRIu64 " failed, %" PRIu64
		 " credential refreshes; in-flight cap %u, lowest %u; clock "
		 "offset %" PRId64 " s",
		 st.requests, st.attempts, st.retries, st.resumed, st.throttled,
		 st.failed, st.refreshes, st.inflight_cap, st.inflight_cap_min,
		 st.clock_offset_sec);
}

static void teardown(struct daemon *d)
{
	if (d->mounted)
		fuse_session_unmount(d->se);
	if (d->signals_set)
		fuse_remove_signal_handlers(d->se);
	if (d->se)
		fuse_session_destroy(d->se);
	monitor_free(d->mon); /* writes the metrics file a last time */
	sched_free(d->sched);
	if (d->client && d->mounted_once)
		log_client_summary(d->client);
	fs_free(d->fs);
	idx_close(d->idx);
	if (d->opt.ephemeral && d->store && d->db_path && d->mounted_once)
		wipe_cache(d);
	free(d->db_path);
	free(d->mountpoint_real);
	store_free(d->store);
	client_free(d->client);
	client_global_cleanup();
	fuse_opt_free_args(&d->args);
	cli_credentials_free(&d->creds);
	cli_options_free(&d->opt);
}

/* Say why the bucket could not be listed, in one line, and return 1. */
static int probe_failed(const struct daemon *d, int rc,
			const struct client_error *err)
{
	const char *code = err->code[0] ? err->code : NULL;
	const char *what;

	switch (rc) {
	case -ENOENT:
		what = "the bucket does not exist";
		break;
	case -EACCES:
		what = "access denied: check the access key and secret key";
		break;
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ETIMEDOUT:
		what = "the endpoint cannot be reached";
		break;
	default:
		what = "listing the bucket failed";
		break;
	}
	fprintf(stderr, "hoardfs: %s (s3://%s at %s): %s%s%s%s%s\n", what,
		d->opt.bucket, d->opt.endpoint, code ? code : strerror(-rc),
		err->message[0] ? ": " : "", err->message,
		err->request_id[0] ? " request-id=" : "", err->request_id);
	return CLI_EXIT_RUNTIME;
}

static int setup_client(struct daemon *d)
{
	struct client_config cfg = {
		.endpoint = d->opt.endpoint,
		.region = d->opt.region,
		.bucket = d->opt.bucket,
		.path_style = d->opt.path_style,
		.list_v2 = d->opt.list_v2,
		.signature = d->opt.signature,
		.creds = {.access_key = d->creds.access_key,
			  .secret_key = d->creds.secret_key,
			  .security_token = d->creds.security_token,
			  .expires_sec = d->creds.expires_sec},
		.max_connections = d->opt.parallel + 4, /* GETs + listings */
		.connect_timeout_ms = 10000,
		.low_speed_time_sec = 30,
		.max_retries = 8, /* in a row without progress [P §5] */
		.ca_file = d->opt.ca_bundle,
		.ssl_verify = 1,
		.resolve = d->opt.resolve,
		.refresh = d->creds.refresh,
		.refresh_arg = &d->creds,
	};
	struct client_list_page page = {0};
	struct client_error err = {0};
	enum log_level level;
	int rc;

	if (client_global_init() != 0) {
		fprintf(stderr, "hoardfs: cannot initialise libcurl\n");
		return CLI_EXIT_RUNTIME;
	}
	rc = client_new(&cfg, &d->client);
	if (rc != 0) {
		fprintf(stderr, "hoardfs: endpoint %s: %s\n", d->opt.endpoint,
			strerror(-rc));
		return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
	}
	/* One small LIST proves endpoint, bucket and keys before mounting.
	 * Its failure is reported below in one line, so the client's own
	 * log line is muted. */
	level = log_set_level(LOG_LEVEL_OFF);
	rc = client_list(d->client, d->opt.prefix, "/", NULL, 1, &page, &err);
	log_set_level(level);
	client_list_page_clear(&page);
	return rc == 0 ? 0 : probe_failed(d, rc, &err);
}

/*
 * The index cannot be read: keep it aside for a post-mortem and start an
 * empty one.  The data files it described become orphans, which the
 * scheduler's janitor removes in the background; nothing wrong is served,
 * since an empty index claims no bytes.
 */
static int replace_index(struct daemon *d)
{
	static const char *const side[] = {"-wal", "-shm"};
	char aside[PATH_MAX], path[PATH_MAX];

	snprintf(aside, sizeof(aside), "%s.corrupt-%lld", d->db_path,
		 (long long)time(NULL));
	if (rename(d->db_path, aside) != 0)
		return -errno;
	for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", d->db_path, side[i]);
		(void)unlink(path);
	}
	log_warn("cache index %s is corrupt: moved to %s, starting an empty "
		 "index (cached data will be fetched again)",
		 d->db_path, aside);
	return idx_open(d->db_path, &d->idx);
}

static int setup_cache(struct daemon *d)
{
	uint64_t fs_bytes = 0;
	struct statvfs fs;
	long holder = 0;
	int rc;

	if (!d->opt.cache_dir) {
		d->opt.cache_dir = cli_default_cache_dir();
		if (!d->opt.cache_dir) {
			fprintf(stderr, "hoardfs: no cache dir: give "
					"--cache-dir DIR (HOME is not set)\n");
			return CLI_EXIT_USAGE;
		}
	}
	rc = store_open(d->opt.cache_dir, &d->store);
	if (rc != 0) {
		fprintf(stderr, "hoardfs: cache dir %s: %s\n", d->opt.cache_dir,
			strerror(-rc));
		return CLI_EXIT_RUNTIME;
	}
	/* Before the index is touched: one daemon per cache dir. */
	rc = store_lock(d->store, &holder);
	if (rc == -EBUSY) {
		fprintf(stderr,
			"hoardfs: cache dir %s is in use by another hoardfs "
			"(pid %ld); give each mount its own --cache-dir\n",
			d->opt.cache_dir, holder);
		return CLI_EXIT_RUNTIME;
	}
	if (rc != 0) {
		fprintf(stderr, "hoardfs: cache dir %s: cannot lock: %s\n",
			d->opt.cache_dir, strerror(-rc));
		return CLI_EXIT_RUNTIME;
	}
	if (statvfs(d->opt.cache_dir, &fs) == 0)
		fs_bytes = (uint64_t)fs.f_blocks * fs.f_frsize;
	d->cache_limit_bytes = cli_size_resolve(&d->opt.cache_size, fs_bytes);
	d->min_free_bytes = cli_size_resolve(&d->opt.cache_min_free, fs_bytes);
	if (asprintf(&d->db_path, "%s/index.db", d->opt.cache_dir) < 0) {
		d->db_path = NULL;
		return CLI_EXIT_RUNTIME;
	}
	rc = idx_open(d->db_path, &d->idx);
	if (rc == -EIO)
		rc = replace_index(d);
	if (rc != 0)
		fprintf(stderr, "hoardfs: cache index %s: %s\n", d->db_path,
			strerror(-rc));
	return rc == 0 ? 0 : CLI_EXIT_RUNTIME;
}

/* Append -ofsname=@source, escaping the ',' and '\\' that libfuse's option
 * parser would otherwise split on or eat. */
static int add_fsname(struct fuse_args *args, const char *source)
{
	size_t len = strlen(source), j = 0;
	char *a = malloc(2 * len + sizeof("-ofsname="));
	int rc;

	if (!a)
		return -1;
	j = (size_t)sprintf(a, "-ofsname=");
	for (size_t i = 0; i < len; i++) {
		if (source[i] == ',' || source[i] == '\\')
			a[j++] = '\\';
		a[j++] = source[i];
	}
	a[j] = '\0';
	rc = fuse_opt_add_arg(args, a);
	free(a);
	return rc;
}

/* Append "-o" followed by @opt to the FUSE arguments. */
static int add_o(struct fuse_args *args, const char *opt)
{
	char *a = NULL;
	int rc;

	if (asprintf(&a, "-o%s", opt) < 0)
		return -1;
	rc = fuse_opt_add_arg(args, a);
	free(a);
	return rc;
}

/*
 * Refuse a mountpoint that is missing, not a directory, or already a mount
 * (a live mount, or a crashed one: its stat fails with ENOTCONN), and a
 * cache dir at or under the mountpoint, whose every access would then go
 * through the mount being served and hang.  Runs before the cache dir is
 * created, so a bad mountpoint leaves nothing behind.
 */
static int check_mountpoint(struct daemon *d)
{
	char *mnt = realpath(d->opt.mountpoint, NULL), *cache = NULL, *up;
	struct stat st, parent;
	size_t len;
	int rc = CLI_EXIT_RUNTIME;

	if (!mnt || stat(mnt, &st) != 0) {
		fprintf(stderr, "hoardfs: mountpoint %s: %s%s\n",
			d->opt.mountpoint, strerror(errno),
			errno == ENOTCONN ? " (a crashed mount: fusermount3 "
					    "-u it first)"
					  : "");
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "hoardfs: mountpoint %s: not a directory\n",
			d->opt.mountpoint);
		goto out;
	}
	if (asprintf(&up, "%s/..", mnt) >= 0) {
		if (stat(up, &parent) == 0 && parent.st_dev != st.st_dev &&
		    strcmp(mnt, "/") != 0) {
			fprintf(stderr,
				"hoardfs: mountpoint %s is already mounted; "
				"unmount it first (fusermount3 -u %s)\n",
				d->opt.mountpoint, d->opt.mountpoint);
			free(up);
			goto out;
		}
		free(up);
	}
	if (!d->opt.cache_dir)
		d->opt.cache_dir = cli_default_cache_dir();
	cache = d->opt.cache_dir ? realpath(d->opt.cache_dir, NULL) : NULL;
	if (!cache && d->opt.cache_dir)
		cache = strdup(d->opt.cache_dir);
	len = strlen(mnt);
	if (cache && strncmp(cache, mnt, len) == 0 &&
	    (cache[len] == '\0' || cache[len] == '/' ||
	     strcmp(mnt, "/") == 0)) {
		fprintf(stderr,
			"hoardfs: cache dir %s is inside the mountpoint %s; "
			"give a --cache-dir outside it\n",
			d->opt.cache_dir, d->opt.mountpoint);
		goto out;
	}
	d->mountpoint_real = mnt;
	mnt = NULL;
	rc = 0;
out:
	free(cache);
	free(mnt);
	return rc;
}

/* --max-read-ahead-kb, once the kernel has applied INIT (which sets the
 * mount's read-ahead from libfuse's reply). */
static void tune_read_ahead(void *arg)
{
	const struct daemon *d = arg;
	int rc = cli_set_read_ahead(d->mountpoint_real, d->opt.read_ahead_kib);

	if (rc != 0)
		log_info("kernel read-ahead of %s left at its default: %s",
			 d->opt.mountpoint, strerror(-rc));
}

static int setup_session(struct daemon *d)
{
	struct fs_config cfg = {
		.bucket = d->opt.bucket,
		.prefix = d->opt.prefix,
		.metadata_ttl_sec = d->opt.metadata_ttl_sec,
		.negative_ttl_sec = d->opt.negative_ttl_sec == -2
					    ? d->opt.metadata_ttl_sec
					    : d->opt.negative_ttl_sec,
		.prefetch_dir = d->opt.prefetch_dir,
		.uid = d->opt.uid,
		.gid = d->opt.gid,
		.file_mode = d->opt.file_mode,
		.dir_mode = d->opt.dir_mode,
	};
	int rc;

	rc = fs_new(&cfg, d->client, d->store, d->idx, &d->fs);
	if (rc != 0)
		return CLI_EXIT_RUNTIME;
	/* Read-only, checked by the kernel; named as the source in the
	 * mount table, typed fuse.hoardfs. */
	if (fuse_opt_add_arg(&d->args, "hoardfs") != 0 ||
	    add_fsname(&d->args, d->opt.source) != 0 ||
	    fuse_opt_add_arg(&d->args, "-osubtype=hoardfs") != 0 ||
	    fuse_opt_add_arg(&d->args, "-oro,default_permissions") != 0 ||
	    (d->opt.debug && fuse_opt_add_arg(&d->args, "-d") != 0))
		return CLI_EXIT_RUNTIME;
	for (size_t i = 0; i < d->opt.nfuse_opts; i++)
		if (add_o(&d->args, d->opt.fuse_opts[i]) != 0)
			return CLI_EXIT_RUNTIME;
	d->se = fuse_session_new(&d->args, fs_ops(),
				 sizeof(struct fuse_lowlevel_ops), d->fs);
	if (!d->se) {
		fprintf(stderr, "hoardfs: cannot start the FUSE session\n");
		return CLI_EXIT_RUNTIME;
	}
	if (fuse_set_signal_handlers(d->se) != 0)
		return CLI_EXIT_RUNTIME;
	d->signals_set = 1;
	if (fuse_session_mount(d->se, d->opt.mountpoint) != 0) {
		fprintf(stderr,
			"hoardfs: cannot mount on %s (is /dev/fuse "
			"there and fusermount3 installed?)\n",
			d->opt.mountpoint);
		return CLI_EXIT_RUNTIME;
	}
	d->mounted = d->mounted_once = 1;
	if (d->opt.read_ahead_kib)
		fs_set_after_init(d->fs, tune_read_ahead, d);
	return 0;
}

/* The status document, the metrics file and SIGUSR1 (after the fork). */
static int start_monitor(struct daemon *d)
{
	struct monitor_config mcfg = {
		.version = HOARDFS_VERSION,
		.bucket = d->opt.bucket,
		.prefix = d->opt.prefix,
		.endpoint = d->opt.endpoint,
		.mountpoint = d->opt.mountpoint,
		.cache_dir = d->opt.cache_dir,
		.metrics_file = d->opt.metrics_file,
		.cache_limit_bytes = d->cache_limit_bytes,
		.min_free_bytes = d->min_free_bytes,
	};
	int rc = monitor_start(&mcfg, d->sched, d->client, &d->mon);

	if (rc != 0) {
		log_error("cannot start the monitor thread: %s", strerror(-rc));
		return CLI_EXIT_RUNTIME;
	}
	fs_set_status_fn(d->fs, monitor_status, d->mon);
	return 0;
}

/* A --metrics-file that cannot be written fails the start, in the
 * terminal, rather than a warning in syslog later.  A relative path is
 * made absolute first: the daemon changes to / when it forks. */
static int check_metrics_file(struct daemon *d)
{
	char cwd[PATH_MAX], *abs = NULL;
	int rc;

	if (!d->opt.metrics_file)
		return 0;
	if (d->opt.metrics_file[0] != '/' && getcwd(cwd, sizeof(cwd)) &&
	    asprintf(&abs, "%s/%s", cwd, d->opt.metrics_file) > 0) {
		free(d->opt.metrics_file);
		d->opt.metrics_file = abs;
	}
	rc = monitor_metrics_file_check(d->opt.metrics_file);
	if (rc == 0)
		return 0;
	fprintf(stderr,
		"hoardfs: --metrics-file %s: cannot write %s.tmp and "
		"rename it: %s\n",
		d->opt.metrics_file, d->opt.metrics_file, strerror(-rc));
	return CLI_EXIT_RUNTIME;
}

/*
 * Each object being fetched or waiting for its group commit holds its data
 * file open, and a small-file epoch has thousands of them; the usual soft
 * limit of 1024 descriptors would make commits fail with EMFILE (and the
 * bytes be fetched again next epoch).  Take the hard limit, as rclone does.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		log_warn("cannot raise the open file limit: %s",
			 strerror(errno));
}

static int run(struct daemon *d)
{
	struct sched_config scfg = {
		.part_size = d->opt.part_size,
		.workers = d->opt.parallel,
		.cache_limit_bytes = d->cache_limit_bytes,
		.min_free_bytes = d->min_free_bytes,
		.verify_md5 = 1,
	};
	struct fuse_loop_config *loop;
	int rc;

	if (fuse_daemonize(d->opt.foreground) != 0)
		return CLI_EXIT_RUNTIME;
	if (!d->opt.foreground)
		log_init(d->opt.log_level, 1);
	/* The lock is inherited across the fork; name its new holder. */
	if (store_lock_pid(d->store) != 0)
		log_warn("cannot write the pid into %s/lock", d->opt.cache_dir);
	raise_fd_limit();
	/* Threads start only now: fuse_daemonize() forks. */
	rc = sched_new(&scfg, d->opt.bucket, d->client, d->store, d->idx,
		       &d->sched);
	if (rc != 0) {
		log_error("cannot start fetch workers: %s", strerror(-rc));
		return CLI_EXIT_RUNTIME;
	}
	fs_set_sched(d->fs, d->sched);
	rc = start_monitor(d);
	if (rc != 0)
		return rc;
	log_info("mounted s3://%s/%s at %s (endpoint %s, cache %s, "
		 "credentials from %s)",
		 d->opt.bucket, d->opt.prefix, d->opt.mountpoint,
		 d->opt.endpoint, d->opt.cache_dir, d->creds.source);
	loop = fuse_loop_cfg_create();
	if (!loop)
		return CLI_EXIT_RUNTIME;
	fuse_loop_cfg_set_max_threads(loop, MAIN_MAX_FUSE_THREADS);
	rc = fuse_session_loop_mt(d->se, loop);
	fuse_loop_cfg_destroy(loop);
	log_info("unmounting %s", d->opt.mountpoint);
	/* libfuse returns the signal number after SIGINT/SIGTERM/SIGHUP: that
	 * is a clean unmount too.  Only a negative value is an error. */
	return rc < 0 ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct daemon d = {.args = FUSE_ARGS_INIT(0, NULL)};
	char err[512];
	int rc;

	/* hoardfs warm|status|evict: commands for a running mount. */
	if (argc > 1 && ctl_is_command(argv[1]))
		return ctl_main(argc - 1, argv + 1);
	rc = cli_parse(argc, argv, &d.opt, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "hoardfs: %s\n",
			rc == -ENOMEM ? "out of memory" : err);
		teardown(&d);
		return rc == -ENOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_USAGE;
	}
	if (d.opt.help || d.opt.version) {
		if (d.opt.help)
			fputs(cli_usage(), stdout);
		else
			printf("hoardfs %s (libfuse %s)\n", HOARDFS_VERSION,
			       fuse_pkgversion());
		teardown(&d);
		return CLI_EXIT_OK;
	}
	log_init(d.opt.log_level, 0);
	/* Until the monitor catches it, SIGUSR1 must not kill the daemon. */
	signal(SIGUSR1, SIG_IGN);
	rc = cli_credentials_load(d.opt.passwd_file, d.opt.bucket, &d.creds,
				  err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "hoardfs: %s\n", err);
		teardown(&d);
		return CLI_EXIT_RUNTIME;
	}
	rc = check_metrics_file(&d);
	if (rc == 0)
		rc = check_mountpoint(&d);
	if (rc == 0)
		rc = setup_client(&d);
	if (rc == 0)
		rc = setup_cache(&d);
	if (rc == 0)
		rc = setup_session(&d);
	if (rc == 0)
		rc = run(&d);
	teardown(&d);
	return rc;
}
