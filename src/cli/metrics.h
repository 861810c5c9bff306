/* SPDX-License-Identifier: MIT */
/*
 * One snapshot of a running mount's figures, and the three ways it is
 * written out: the status JSON (user.hoardfs.status, `hoardfs status`),
 * Prometheus text exposition (--metrics-file) and the one log line SIGUSR1
 * asks for.  Pure functions of the snapshot, so they are unit-tested; the
 * daemon thread that takes snapshots is monitor.c.
 */
#ifndef HOARDFS_CLI_METRICS_H
#define HOARDFS_CLI_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "hoardfs/client.h"
#include "hoardfs/sched.h"

/* Everything the outputs show.  Strings are borrowed. */
struct metrics_snapshot {
	const char *version;	       /* hoardfs version */
	const char *bucket;	       /* mounted bucket */
	const char *prefix;	       /* mounted prefix, "" or ending in '/' */
	const char *endpoint;	       /* store endpoint URL */
	const char *mountpoint;	       /* where the daemon mounted it */
	const char *cache_dir;	       /* cache directory */
	long pid;		       /* daemon pid */
	int64_t uptime_sec;	       /* since the mount started serving */
	uint64_t cache_limit_bytes;    /* --cache-size resolved; 0: none */
	uint64_t cache_min_free_bytes; /* --cache-min-free resolved */
	uint64_t cache_fs_free_bytes;  /* free on the cache filesystem now */
	uint64_t cache_objects;	       /* object versions in the index */
	double fetch_bytes_per_sec;    /* bytes fetched per second lately */
	struct sched_stats sched;      /* scheduler counters */
	struct client_op_stats client; /* requests by kind */
	struct client_stats client_totals; /* throttling, resumes, credential
					    * refreshes, in-flight cap */
};

/* The share of read bytes served from the cache, 0..1, or -1 when nothing
 * was read yet. */
double metrics_hit_ratio(const struct metrics_snapshot *m);

/*
 * metrics_json - the status document (compact JSON, keys in a fixed
 * order; see the man page) into *@out (malloc'd, NUL-terminated) and its
 * length into *@len.  Returns 0 or -ENOMEM.
 */
int metrics_json(const struct metrics_snapshot *m, char **out, size_t *len)
	__attribute__((warn_unused_result));

/*
 * metrics_prometheus - the same figures in Prometheus text exposition
 * format 0.0.4: HELP and TYPE lines, names prefixed hoardfs_, counters
 * ending _total, every sample labelled with the mountpoint so that several
 * mounts' files can sit in one node_exporter textfile directory.  Into
 * *@out (malloc'd) and *@len.  Returns 0 or -ENOMEM.
 */
int metrics_prometheus(const struct metrics_snapshot *m, char **out,
		       size_t *len) __attribute__((warn_unused_result));

/* metrics_log_line - one "status: key=value ..." line into @buf (@cap
 * bytes, truncated to fit). */
void metrics_log_line(const struct metrics_snapshot *m, char *buf, size_t cap);

/* metrics_label_escape - @in as a Prometheus label value (backslash,
 * double quote and newline escaped) into @out of @cap bytes (truncated to
 * fit, always NUL-terminated). */
void metrics_label_escape(const char *in, char *out, size_t cap);

#endif
