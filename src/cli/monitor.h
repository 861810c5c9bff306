/* SPDX-License-Identifier: MIT */
/*
 * The daemon's monitor: one thread that samples the fetch rate every
 * second, rewrites the --metrics-file every MONITOR_METRICS_PERIOD_MS and
 * at exit, and writes a status line to the log on SIGUSR1; plus the status
 * provider that answers user.hoardfs.status.  See monitor.c.
 */
#ifndef HOARDFS_CLI_MONITOR_H
#define HOARDFS_CLI_MONITOR_H

#include <stdint.h>

#include "hoardfs/client.h"
#include "hoardfs/sched.h"

/* How often the metrics file is rewritten: a Prometheus scrape every
 * 15 s or more sees figures at most this old. */
#define MONITOR_METRICS_PERIOD_MS 5000

/* What the monitor reports about; strings are copied. */
struct monitor_config {
	const char *version;	  /* hoardfs version */
	const char *bucket;	  /* mounted bucket */
	const char *prefix;	  /* mounted prefix */
	const char *endpoint;	  /* store endpoint */
	const char *mountpoint;	  /* where it is mounted */
	const char *cache_dir;	  /* cache directory */
	const char *metrics_file; /* --metrics-file, or NULL */
	uint64_t cache_limit_bytes;
	uint64_t min_free_bytes;
};

struct monitor;

/*
 * monitor_start - start the thread and catch SIGUSR1 (a self-pipe: the
 * handler only writes one byte).  @s and @c are borrowed and must outlive
 * the monitor.  Call after daemonizing.  Returns 0 with *@out owning it,
 * -ENOMEM, or -errno from pipe(2)/sigaction(2)/pthread_create(3).
 */
int monitor_start(const struct monitor_config *cfg, struct sched *s,
		  struct client *c, struct monitor **out)
	__attribute__((warn_unused_result));

/*
 * monitor_free - stop the thread, write the metrics file a last time,
 * ignore SIGUSR1 from then on and free @m (NULL is a no-op).  Call before
 * the scheduler and client are freed.
 */
void monitor_free(struct monitor *m);

/* monitor_status - an fs_status_fn: the status JSON of @arg (a struct
 * monitor).  Thread-safe; does not block on the network. */
int monitor_status(void *arg, char **out, size_t *len);

/*
 * monitor_metrics_file_check - whether @path can be written the way the
 * monitor writes it (@path.tmp created, then renamed): tried once before
 * mounting, so a bad --metrics-file fails at start, not silently later.
 * Returns 0 or -errno.
 */
int monitor_metrics_file_check(const char *path);

#endif
