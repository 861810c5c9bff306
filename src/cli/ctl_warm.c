// SPDX-License-Identifier: MIT
/*
 * hoardfs warm: find the files under the given paths, keep this node's
 * shard, and have the daemon cache each one through getxattr
 * "user.hoardfs.warm", --jobs at a time.  The daemon does the fetching
 * (its scheduler, its single flight with readers, its cache limits); this
 * process only walks, asks and reports.  A file whose state is already
 * "cached" is skipped without asking, so a rerun resumes where the last
 * one stopped.
 *
 * Threads: the main thread walks, starts the workers, then draws progress
 * until they are done.  Workers take the next file index atomically and
 * record results in atomics; failures go to a list under a mutex.
 * --background forks once before the walk; the child leaves the session
 * and logs to syslog.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/ctl.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

#define WARM_XATTR_STATE "user.hoardfs.state"
#define WARM_XATTR_WARM	 "user.hoardfs.warm"
#define WARM_TTY_MS	 200   /* progress bar redraw period */
#define WARM_LINE_MS	 5000  /* plain progress line period */
#define WARM_SYSLOG_MS	 30000 /* progress line period in syslog */
#define WARM_MAX_SHOWN	 100   /* failures listed one by one */
#define WARM_BAR_WIDTH	 24

enum warm_output {
	WARM_OUT_TTY,	 /* a redrawn bar on stderr */
	WARM_OUT_LINES,	 /* a line on stderr every WARM_LINE_MS */
	WARM_OUT_SYSLOG, /* --background: lines to syslog */
};

struct warm_failure {
	size_t file; /* index into files */
	int err;     /* errno */
};

struct warm {
	const struct ctl_files *files;	    /* selected files */
	uint64_t total_bytes;		    /* their sizes */
	atomic_size_t next;		    /* next index to take */
	atomic_size_t done;		    /* files finished, any outcome */
	atomic_uint_fast64_t done_bytes;    /* their sizes */
	atomic_size_t fetched;		    /* files cached by this run */
	atomic_uint_fast64_t fetched_bytes; /* their sizes */
	atomic_size_t already;		    /* files found cached */
	pthread_mutex_t lock;		    /* guards the failure list */
	struct warm_failure *fail;	    /* lock */
	size_t nfail, fail_cap;		    /* lock */
};

static void warm_failed(struct warm *w, size_t i, int err)
{
	pthread_mutex_lock(&w->lock);
	if (w->nfail == w->fail_cap) {
		size_t cap = w->fail_cap ? 2 * w->fail_cap : 16;
		struct warm_failure *v = realloc(w->fail, cap * sizeof(*v));

		if (v) {
			w->fail = v;
			w->fail_cap = cap;
		}
	}
	if (w->nfail < w->fail_cap)
		w->fail[w->nfail++] = (struct warm_failure){i, err};
	pthread_mutex_unlock(&w->lock);
}

/* Warm file @i; returns nothing, records the outcome. */
static void warm_one(struct warm *w, size_t i)
{
	const struct ctl_file *f = &w->files->v[i];
	char v[128];
	ssize_t n;

	n = getxattr(f->path, WARM_XATTR_STATE, v, sizeof(v) - 1);
	if (n == 6 && memcmp(v, "cached", 6) == 0) {
		atomic_fetch_add(&w->already, 1);
	} else {
		/* Blocks until the daemon has the whole object on disk. */
		n = getxattr(f->path, WARM_XATTR_WARM, v, sizeof(v) - 1);
		if (n < 0) {
			warm_failed(w, i, errno);
		} else {
			atomic_fetch_add(&w->fetched, 1);
			atomic_fetch_add(&w->fetched_bytes, f->size);
		}
	}
	atomic_fetch_add(&w->done_bytes, f->size);
	atomic_fetch_add(&w->done, 1);
}

static void *warm_worker(void *arg)
{
	struct warm *w = arg;
	size_t i;

	while ((i = atomic_fetch_add(&w->next, 1)) < w->files->n)
		warm_one(w, i);
	return NULL;
}

static double elapsed_sec(int64_t t0_ms)
{
	int64_t ms = util_mono_ms() - t0_ms;

	return ms > 0 ? (double)ms / 1000.0 : 0.001;
}

/* "1:02:03" or "2:03" for an ETA in seconds; "?" when unknown. */
static void format_eta(double sec, char *buf, size_t cap)
{
	long s = (long)(sec + 0.5);

	if (sec < 0 || sec > 1e8)
		snprintf(buf, cap, "?");
	else if (s >= 3600)
		snprintf(buf, cap, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60,
			 s % 60);
	else
		snprintf(buf, cap, "%ld:%02ld", s / 60, s % 60);
}

/* One progress report in the chosen form. */
static void warm_progress(struct warm *w, enum warm_output out, int64_t t0_ms,
			  int final)
{
	size_t done = atomic_load(&w->done), n = w->files->n;
	uint64_t done_bytes = atomic_load(&w->done_bytes);
	uint64_t fetched_bytes = atomic_load(&w->fetched_bytes);
	double rate = (double)fetched_bytes / elapsed_sec(t0_ms), eta = -1;
	char db[32], tb[32], rb[32], eb[32], bar[WARM_BAR_WIDTH + 1];

	if (rate > 0)
		eta = (double)(w->total_bytes - done_bytes) / rate;
	else if (done == n)
		eta = 0;
	ctl_format_bytes(done_bytes, db, sizeof(db));
	ctl_format_bytes(w->total_bytes, tb, sizeof(tb));
	ctl_format_bytes((uint64_t)rate, rb, sizeof(rb));
	format_eta(eta, eb, sizeof(eb));
	if (out == WARM_OUT_TTY) {
		size_t fill = n ? done * WARM_BAR_WIDTH / n : WARM_BAR_WIDTH;

		memset(bar, '#', fill);
		memset(bar + fill, '.', WARM_BAR_WIDTH - fill);
		bar[WARM_BAR_WIDTH] = '\0';
		fprintf(stderr,
			"\r\033[Kwarm [%s] %zu/%zu files  %s/%s  %s/s  ETA "
			"%s%s",
			bar, done, n, db, tb, rb, eb, final ? "\n" : "");
	} else if (out == WARM_OUT_LINES) {
		fprintf(stderr,
			"hoardfs warm: %zu/%zu files, %s of %s, %s/s, ETA %s\n",
			done, n, db, tb, rb, eb);
	} else {
		log_info("warm: %zu/%zu files, %s of %s, %s/s, ETA %s", done, n,
			 db, tb, rb, eb);
	}
}

/* Wait for the workers to finish the list, reporting progress. */
static void warm_watch(struct warm *w, enum warm_output out, int64_t t0_ms)
{
	long period = out == WARM_OUT_TTY     ? WARM_TTY_MS
		      : out == WARM_OUT_LINES ? WARM_LINE_MS
					      : WARM_SYSLOG_MS;
	int64_t last = util_mono_ms();

	while (atomic_load(&w->done) < w->files->n) {
		struct timespec ts = {0, 50 * 1000000L}; /* 50 ms */

		nanosleep(&ts, NULL);
		if (util_mono_ms() - last >= period) {
			warm_progress(w, out, t0_ms, 0);
			last = util_mono_ms();
		}
	}
	if (out == WARM_OUT_TTY)
		warm_progress(w, out, t0_ms, 1);
}

/* The result: a summary line, and each failure with its error. */
static int warm_report(struct warm *w, const struct ctl_args *a,
		       enum warm_output out, size_t walked, int64_t t0_ms)
{
	char head[96], tb[32], fb[32], rb[32];
	double sec = elapsed_sec(t0_ms);
	uint64_t fetched_bytes = atomic_load(&w->fetched_bytes);

	ctl_format_bytes(w->total_bytes, tb, sizeof(tb));
	if (a->shard_n)
		snprintf(head, sizeof(head),
			 "shard %u/%u: %zu of %zu files (%s)", a->shard_k,
			 a->shard_n, w->files->n, walked, tb);
	else
		snprintf(head, sizeof(head), "%zu files (%s)", w->files->n, tb);
	ctl_format_bytes(fetched_bytes, fb, sizeof(fb));
	ctl_format_bytes((uint64_t)((double)fetched_bytes / sec), rb,
			 sizeof(rb));
	for (size_t i = 0; i < w->nfail; i++) {
		const struct ctl_file *f = &w->files->v[w->fail[i].file];

		if (i == WARM_MAX_SHOWN) {
			if (out == WARM_OUT_SYSLOG)
				log_error("warm: ... and %zu more failures",
					  w->nfail - i);
			else
				fprintf(stderr,
					"hoardfs warm: ... and %zu more "
					"failures\n",
					w->nfail - i);
			break;
		}
		if (out == WARM_OUT_SYSLOG)
			log_error("warm: failed: %s (key %s): %s", f->path,
				  f->key, strerror(w->fail[i].err));
		else
			fprintf(stderr,
				"hoardfs warm: failed: %s (key %s): %s\n",
				f->path, f->key, strerror(w->fail[i].err));
	}
	if (out == WARM_OUT_SYSLOG) {
		log_info("warm: %s in %.1f s: %zu fetched (%s at %s/s), %zu "
			 "already cached, %zu failed",
			 head, sec, atomic_load(&w->fetched), fb, rb,
			 atomic_load(&w->already), w->nfail);
	} else {
		printf("%s in %.1f s: %zu fetched (%s at %s/s), %zu already "
		       "cached, %zu failed\n",
		       head, sec, atomic_load(&w->fetched), fb, rb,
		       atomic_load(&w->already), w->nfail);
		fflush(stdout);
		if (w->nfail)
			fprintf(stderr,
				"hoardfs warm: %zu of %zu files failed\n",
				w->nfail, w->files->n);
	}
	return w->nfail ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
}

/* Keep only this node's shard of @all (moving entries into @mine). */
static int warm_select(struct ctl_files *all, const struct ctl_args *a,
		       struct ctl_files *mine)
{
	memset(mine, 0, sizeof(*mine));
	mine->v = calloc(all->n ? all->n : 1, sizeof(*mine->v));
	if (!mine->v)
		return -ENOMEM;
	mine->cap = all->n;
	for (size_t i = 0; i < all->n; i++) {
		if (ctl_shard_pick(all->v[i].key, a->shard_k, a->shard_n)) {
			mine->v[mine->n++] = all->v[i];
		} else {
			free(all->v[i].path);
			free(all->v[i].key);
		}
	}
	free(all->v);
	memset(all, 0, sizeof(*all));
	return 0;
}

/* The walk, the workers and the report; returns the exit status. */
static int warm_run(const struct ctl_args *a, enum warm_output out)
{
	struct ctl_files all, mine;
	struct warm w;
	pthread_t *threads;
	unsigned started = 0;
	int64_t t0 = util_mono_ms();
	char err[512];
	size_t walked;
	int rc;

	rc = ctl_collect(a->paths, a->npaths, &all, err, sizeof(err));
	if (rc != 0) {
		if (out == WARM_OUT_SYSLOG)
			log_error("warm: %s",
				  rc == -ENOMEM ? "out of memory" : err);
		else
			fprintf(stderr, "hoardfs warm: %s\n",
				rc == -ENOMEM ? "out of memory" : err);
		return rc == -ENOTSUP ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
	}
	walked = all.n;
	if (warm_select(&all, a, &mine) != 0) {
		ctl_files_free(&all);
		fprintf(stderr, "hoardfs warm: out of memory\n");
		return CLI_EXIT_RUNTIME;
	}
	memset(&w, 0, sizeof(w));
	w.files = &mine;
	pthread_mutex_init(&w.lock, NULL);
	for (size_t i = 0; i < mine.n; i++)
		w.total_bytes += mine.v[i].size;
	threads = calloc(a->jobs, sizeof(*threads));
	for (unsigned i = 0; threads && i < a->jobs && i < mine.n; i++) {
		if (pthread_create(&threads[i], NULL, warm_worker, &w) != 0)
			break;
		started++;
	}
	if (started == 0) /* no thread (or nothing to do): work here */
		warm_worker(&w);
	else
		warm_watch(&w, out, t0);
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	rc = warm_report(&w, a, out, walked, t0);
	pthread_mutex_destroy(&w.lock);
	free(w.fail);
	ctl_files_free(&mine);
	return rc;
}

/* Fork a detached child that warms with output to syslog. */
static int warm_background(const struct ctl_args *a)
{
	pid_t pid;
	int fd;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "hoardfs warm: cannot fork: %s\n",
			strerror(errno));
		return CLI_EXIT_RUNTIME;
	}
	if (pid > 0) {
		printf("hoardfs warm: warming in the background as pid %ld; "
		       "progress and the result go to syslog\n",
		       (long)pid);
		return CLI_EXIT_OK;
	}
	/* The child: out of the terminal's session, no stdio. */
	(void)setsid();
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		(void)dup2(fd, STDIN_FILENO);
		(void)dup2(fd, STDOUT_FILENO);
		(void)dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	log_init(LOG_LEVEL_INFO, 1);
	log_info("warm: started in the background for %zu path(s)%s", a->npaths,
		 a->shard_n ? " (sharded)" : "");
	_exit(warm_run(a, WARM_OUT_SYSLOG));
}

int ctl_warm(const struct ctl_args *a)
{
	char key[2048], err[512];

	/* Refuse a bad PATH now, in the terminal, even with --background. */
	for (size_t i = 0; i < a->npaths; i++) {
		int rc = ctl_check_path(a->paths[i], key, sizeof(key), err,
					sizeof(err));

		if (rc != 0) {
			fprintf(stderr, "hoardfs warm: %s\n", err);
			return CLI_EXIT_USAGE;
		}
	}
	if (a->background)
		return warm_background(a);
	return warm_run(a,
			isatty(STDERR_FILENO) ? WARM_OUT_TTY : WARM_OUT_LINES);
}
