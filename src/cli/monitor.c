// SPDX-License-Identifier: MIT
/*
 * The daemon's monitor thread and status provider.
 *
 * DESIGN
 *
 * Threads.  One monitor thread sleeps in poll(2) on the read end of a
 * self-pipe with a one-second timeout.  Each wake-up it samples the
 * scheduler's fetched-bytes counter into a small ring (the fetch rate is
 * the slope over the last MONITOR_RATE_WINDOW_MS), and every
 * MONITOR_METRICS_PERIOD_MS it rewrites the metrics file.  The SIGUSR1
 * handler does only what is async-signal-safe: write(2) one byte to the
 * pipe (non-blocking, errno saved); the thread then logs the status line
 * and rewrites the metrics file at once.  monitor_free() writes a stop
 * byte and joins.
 *
 * Locks.  m->lock guards the sample ring, which FUSE threads read when
 * they build the status document; everything else the monitor reads
 * (scheduler, client, index) has its own locking.
 *
 * Files.  The metrics file is written whole to PATH.tmp and renamed over
 * PATH, as node_exporter's textfile collector requires, so a scrape never
 * sees half a file.  A failure is logged once, and again when it recovers.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli/metrics.h"
#include "cli/monitor.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

#define MONITOR_TICK_MS	       1000 /* sampling period */
#define MONITOR_RATE_WINDOW_MS 5000 /* "lately" for the fetch rate */
/* Samples kept: one per tick over the window, plus the oldest edge. */
#define MONITOR_RING (MONITOR_RATE_WINDOW_MS / MONITOR_TICK_MS + 1)

/* The write end of the self-pipe, for the signal handler; -1 when no
 * monitor runs.  One daemon runs one monitor. */
static volatile sig_atomic_t monitor_sig_fd = -1;

struct rate_sample {
	int64_t at_ms;	/* util_mono_ms() */
	uint64_t bytes; /* sched bytes_fetched then */
};

struct monitor {
	struct monitor_config cfg; /* strings owned */
	struct sched *sched;	   /* borrowed */
	struct client *client;	   /* borrowed */
	int64_t start_ms;	   /* util_mono_ms() at start */
	int pipe_fd[2];		   /* self-pipe: [0] read, [1] write */
	pthread_t thread;
	int thread_started;
	int usr1_set;	      /* SIGUSR1 is ours; ignored again at free */
	pthread_mutex_t lock; /* guards the ring */
	struct rate_sample ring[MONITOR_RING]; /* lock: oldest first */
	unsigned nring;			       /* lock: samples held */
	int metrics_failing; /* thread only: the last write failed */
};

static void monitor_on_usr1(int sig)
{
	int saved = errno, fd = monitor_sig_fd;

	(void)sig;
	if (fd >= 0 && write(fd, "u", 1) < 0) {
		/* A full pipe already holds a request: nothing is lost. */
	}
	errno = saved;
}

/* Record the fetched-bytes counter now. */
static void monitor_sample(struct monitor *m)
{
	struct sched_stats st;
	struct rate_sample now;

	sched_stats_get(m->sched, &st);
	now.at_ms = util_mono_ms();
	now.bytes = st.bytes_fetched;
	pthread_mutex_lock(&m->lock);
	if (m->nring == MONITOR_RING) {
		memmove(m->ring, m->ring + 1,
			sizeof(m->ring[0]) * (MONITOR_RING - 1));
		m->nring--;
	}
	m->ring[m->nring++] = now;
	pthread_mutex_unlock(&m->lock);
}

/* Bytes per second from the oldest sample in the window to @now_bytes. */
static double monitor_rate(struct monitor *m, int64_t now_ms,
			   uint64_t now_bytes)
{
	double rate = 0;

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < m->nring; i++) {
		const struct rate_sample *r = &m->ring[i];

		if (now_ms - r->at_ms >
		    MONITOR_RATE_WINDOW_MS + MONITOR_TICK_MS)
			continue; /* older than the window */
		/* Under half a second is too short to mean anything. */
		if (now_ms - r->at_ms >= 500 && now_bytes >= r->bytes)
			rate = (double)(now_bytes - r->bytes) * 1000.0 /
			       (double)(now_ms - r->at_ms);
		break;
	}
	pthread_mutex_unlock(&m->lock);
	return rate;
}

static void monitor_snapshot(struct monitor *m, struct metrics_snapshot *snap)
{
	struct statvfs fs;
	int64_t now = util_mono_ms();

	memset(snap, 0, sizeof(*snap));
	snap->version = m->cfg.version;
	snap->bucket = m->cfg.bucket;
	snap->prefix = m->cfg.prefix;
	snap->endpoint = m->cfg.endpoint;
	snap->mountpoint = m->cfg.mountpoint;
	snap->cache_dir = m->cfg.cache_dir;
	snap->pid = (long)getpid();
	snap->uptime_sec = (now - m->start_ms) / 1000;
	snap->cache_limit_bytes = m->cfg.cache_limit_bytes;
	snap->cache_min_free_bytes = m->cfg.min_free_bytes;
	if (statvfs(m->cfg.cache_dir, &fs) == 0)
		snap->cache_fs_free_bytes = (uint64_t)fs.f_bavail * fs.f_frsize;
	if (sched_index_objects(m->sched, &snap->cache_objects) != 0)
		snap->cache_objects = 0;
	sched_stats_get(m->sched, &snap->sched);
	client_op_stats_get(m->client, &snap->client);
	client_get_stats(m->client, &snap->client_totals);
	snap->fetch_bytes_per_sec =
		monitor_rate(m, now, snap->sched.bytes_fetched);
}

int monitor_status(void *arg, char **out, size_t *len)
{
	struct metrics_snapshot snap;

	monitor_snapshot(arg, &snap);
	return metrics_json(&snap, out, len);
}

/* Write @len bytes of @text to @path.tmp and rename it over @path. */
static int write_atomically(const char *path, const char *text, size_t len)
{
	char *tmp = NULL;
	size_t done = 0;
	int fd, rc = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	while (done < len && rc == 0) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			done += (size_t)n;
	}
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc != 0)
		(void)unlink(tmp);
out:
	free(tmp);
	return rc;
}

int monitor_metrics_file_check(const char *path)
{
	return write_atomically(path, "", 0);
}

static void monitor_write_metrics(struct monitor *m)
{
	struct metrics_snapshot snap;
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!m->cfg.metrics_file)
		return;
	monitor_snapshot(m, &snap);
	rc = metrics_prometheus(&snap, &text, &len);
	if (rc == 0)
		rc = write_atomically(m->cfg.metrics_file, text, len);
	free(text);
	if (rc != 0 && !m->metrics_failing)
		log_warn("metrics file %s: cannot write: %s",
			 m->cfg.metrics_file, strerror(-rc));
	else if (rc == 0 && m->metrics_failing)
		log_info("metrics file %s: written again", m->cfg.metrics_file);
	m->metrics_failing = rc != 0;
}

static void monitor_log_status(struct monitor *m)
{
	struct metrics_snapshot snap;
	char line[1024];

	monitor_snapshot(m, &snap);
	metrics_log_line(&snap, line, sizeof(line));
	log_always("%s", line);
}

static void *monitor_main(void *arg)
{
	struct monitor *m = arg;
	int64_t last_write = util_mono_ms();
	struct pollfd p = {.fd = m->pipe_fd[0], .events = POLLIN};
	int stop = 0;

	monitor_write_metrics(m);
	while (!stop) {
		char cmds[16];
		ssize_t n;

		if (poll(&p, 1, MONITOR_TICK_MS) < 0 && errno != EINTR)
			break;
		monitor_sample(m);
		n = p.revents & POLLIN ? read(m->pipe_fd[0], cmds, sizeof(cmds))
				       : 0;
		for (ssize_t i = 0; i < n; i++) {
			if (cmds[i] == 'q') {
				stop = 1;
			} else if (cmds[i] == 'u') {
				monitor_log_status(m);
				monitor_write_metrics(m);
				last_write = util_mono_ms();
			}
		}
		if (util_mono_ms() - last_write >= MONITOR_METRICS_PERIOD_MS) {
			monitor_write_metrics(m);
			last_write = util_mono_ms();
		}
	}
	monitor_write_metrics(m); /* the figures at exit */
	return NULL;
}

/* Duplicate every string of @in into @out; returns 0 or -ENOMEM. */
static int config_copy(struct monitor_config *out,
		       const struct monitor_config *in)
{
	const char *const *src[] = {&in->version,     &in->bucket,
				    &in->prefix,      &in->endpoint,
				    &in->mountpoint,  &in->cache_dir,
				    &in->metrics_file};
	const char **dst[] = {&out->version,	 &out->bucket,
			      &out->prefix,	 &out->endpoint,
			      &out->mountpoint,	 &out->cache_dir,
			      &out->metrics_file};

	*out = *in;
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++) {
		*dst[i] = NULL;
		if (*src[i] && !(*dst[i] = strdup(*src[i])))
			return -ENOMEM;
	}
	return 0;
}

static void config_clear(struct monitor_config *c)
{
	free((char *)c->version);
	free((char *)c->bucket);
	free((char *)c->prefix);
	free((char *)c->endpoint);
	free((char *)c->mountpoint);
	free((char *)c->cache_dir);
	free((char *)c->metrics_file);
}

int monitor_start(const struct monitor_config *cfg, struct sched *s,
		  struct client *c, struct monitor **out)
{
	struct sigaction sa;
	struct monitor *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	m->pipe_fd[0] = m->pipe_fd[1] = -1;
	m->sched = s;
	m->client = c;
	m->start_ms = util_mono_ms();
	pthread_mutex_init(&m->lock, NULL);
	rc = config_copy(&m->cfg, cfg);
	if (rc != 0)
		goto fail;
	if (pipe2(m->pipe_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		goto fail;
	}
	monitor_sig_fd = m->pipe_fd[1];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = monitor_on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0) {
		rc = -errno;
		goto fail;
	}
	m->usr1_set = 1;
	monitor_sample(m);
	rc = -pthread_create(&m->thread, NULL, monitor_main, m);
	if (rc != 0)
		goto fail;
	m->thread_started = 1;
	*out = m;
	return 0;
fail:
	monitor_free(m);
	return rc;
}

void monitor_free(struct monitor *m)
{
	if (!m)
		return;
	if (m->thread_started) {
		/* Blocking write: the stop byte must get through. */
		while (write(m->pipe_fd[1], "q", 1) < 0 && errno == EAGAIN)
			usleep(1000);
		pthread_join(m->thread, NULL);
	}
	/* Ignored, not the default (which kills): a late SIGUSR1 must not
	 * cut the rest of the teardown short. */
	if (m->usr1_set)
		signal(SIGUSR1, SIG_IGN);
	monitor_sig_fd = -1;
	if (m->pipe_fd[0] >= 0)
		close(m->pipe_fd[0]);
	if (m->pipe_fd[1] >= 0)
		close(m->pipe_fd[1]);
	pthread_mutex_destroy(&m->lock);
	config_clear(&m->cfg);
	free(m);
}
