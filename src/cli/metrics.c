// SPDX-License-Identifier: MIT
/*
 * A mount's figures as JSON (jansson), Prometheus text and one log line.
 * Only formatting lives here: no thread, no I/O.  Field names are
 * documented in the man page (TALKING TO A RUNNING MOUNT) and are an
 * interface: scripts and dashboards read them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/metrics.h"

static const char *const kind_names[CLIENT_KIND_COUNT] = {"HEAD", "GET",
							  "LIST"};

static uint64_t bytes_from_store(const struct metrics_snapshot *m)
{
	return m->sched.bytes_served_fetched + m->sched.bytes_served_direct;
}

double metrics_hit_ratio(const struct metrics_snapshot *m)
{
	uint64_t cached = m->sched.bytes_served_cached;
	uint64_t total = cached + bytes_from_store(m);

	return total ? (double)cached / (double)total : -1.0;
}

static uint64_t sum_kinds(const uint64_t *v)
{
	uint64_t s = 0;

	for (int k = 0; k < CLIENT_KIND_COUNT; k++)
		s += v[k];
	return s;
}

/* json_integer of a counter; counters never reach INT64_MAX. */
static json_t *jint(uint64_t v)
{
	return json_integer((json_int_t)v);
}

/* json_string of a borrowed string that may be NULL. */
static json_t *jstr(const char *s)
{
	return json_string(s ? s : "");
}

/* Add @key = @value to @obj, taking the reference; remembers a failure. */
static void jset(json_t *obj, const char *key, json_t *value, int *bad)
{
	if (!value || json_object_set_new(obj, key, value) != 0)
		*bad = 1;
}

static json_t *json_requests(const struct metrics_snapshot *m, int *bad)
{
	json_t *req = json_object();

	if (!req) {
		*bad = 1;
		return NULL;
	}
	for (int k = 0; k < CLIENT_KIND_COUNT; k++) {
		json_t *one = json_object();

		if (one) {
			jset(one, "sent", jint(m->client.attempts[k]), bad);
			jset(one, "retries", jint(m->client.retries[k]), bad);
			jset(one, "failed", jint(m->client.failed[k]), bad);
		}
		jset(req, kind_names[k], one, bad);
	}
	jset(req, "failed", jint(sum_kinds(m->client.failed)), bad);
	jset(req, "retries", jint(sum_kinds(m->client.retries)), bad);
	jset(req, "get_bytes", jint(m->client.get_bytes), bad);
	jset(req, "throttled", jint(m->client_totals.throttled), bad);
	jset(req, "resumed", jint(m->client_totals.resumed), bad);
	jset(req, "inflight_cap", jint(m->client_totals.inflight_cap), bad);
	jset(req, "inflight_cap_min", jint(m->client_totals.inflight_cap_min),
	     bad);
	jset(req, "credential_refreshes", jint(m->client_totals.refreshes),
	     bad);
	return req;
}

int metrics_json(const struct metrics_snapshot *m, char **out, size_t *len)
{
	json_t *root = json_object(), *cache = json_object();
	json_t *reads = json_object(), *fetch = json_object();
	double hit = metrics_hit_ratio(m);
	int bad = !root;
	char *text;

	if (root) {
		jset(root, "version", jstr(m->version), &bad);
		jset(root, "pid", json_integer(m->pid), &bad);
		jset(root, "bucket", jstr(m->bucket), &bad);
		jset(root, "prefix", jstr(m->prefix), &bad);
		jset(root, "endpoint", jstr(m->endpoint), &bad);
		jset(root, "mountpoint", jstr(m->mountpoint), &bad);
		jset(root, "cache_dir", jstr(m->cache_dir), &bad);
		jset(root, "uptime_sec", json_integer(m->uptime_sec), &bad);
	}
	if (cache) {
		jset(cache, "used_bytes", jint(m->sched.cached_bytes), &bad);
		jset(cache, "limit_bytes", jint(m->cache_limit_bytes), &bad);
		jset(cache, "min_free_bytes", jint(m->cache_min_free_bytes),
		     &bad);
		jset(cache, "fs_free_bytes", jint(m->cache_fs_free_bytes),
		     &bad);
		jset(cache, "objects", jint(m->cache_objects), &bad);
		jset(cache, "evictions", jint(m->sched.evictions), &bad);
		jset(cache, "evicted_bytes", jint(m->sched.bytes_evicted),
		     &bad);
	}
	if (reads) {
		jset(reads, "bytes_from_cache",
		     jint(m->sched.bytes_served_cached), &bad);
		jset(reads, "bytes_from_store", jint(bytes_from_store(m)),
		     &bad);
		jset(reads, "bytes_direct", jint(m->sched.bytes_served_direct),
		     &bad);
		jset(reads, "hit_ratio", hit < 0 ? json_null() : json_real(hit),
		     &bad);
	}
	if (fetch) {
		jset(fetch, "parts", jint(m->sched.parts_fetched), &bad);
		jset(fetch, "bytes", jint(m->sched.bytes_fetched), &bad);
		jset(fetch, "errors", jint(m->sched.fetch_errors), &bad);
		jset(fetch, "verify_failures", jint(m->sched.verify_failures),
		     &bad);
		jset(fetch, "throughput_bytes_per_sec",
		     json_real(m->fetch_bytes_per_sec), &bad);
	}
	if (root) {
		jset(root, "cache", cache, &bad);
		jset(root, "reads", reads, &bad);
		jset(root, "fetch", fetch, &bad);
		jset(root, "requests", json_requests(m, &bad), &bad);
	} else {
		json_decref(cache);
		json_decref(reads);
		json_decref(fetch);
	}
	text = bad ? NULL
		   : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER |
					      JSON_REAL_PRECISION(6));
	json_decref(root);
	if (!text)
		return -ENOMEM;
	*out = text;
	*len = strlen(text);
	return 0;
}

void metrics_label_escape(const char *in, char *out, size_t cap)
{
	size_t j = 0;

	for (const char *p = in ? in : ""; *p && j + 3 < cap; p++) {
		if (*p == '\\' || *p == '"') {
			out[j++] = '\\';
			out[j++] = *p;
		} else if (*p == '\n') {
			out[j++] = '\\';
			out[j++] = 'n';
		} else {
			out[j++] = *p;
		}
	}
	if (cap)
		out[j < cap ? j : cap - 1] = '\0';
}

/* HELP and TYPE of one metric family. */
static void prom_family(FILE *f, const char *name, const char *type,
			const char *help)
{
	fprintf(f, "# HELP hoardfs_%s %s\n# TYPE hoardfs_%s %s\n", name, help,
		name, type);
}

/* One sample; @labels is the pre-escaped mountpoint label, @extra another
 * label pair ("op=\"GET\"") or NULL. */
static void prom_u64(FILE *f, const char *name, const char *labels,
		     const char *extra, uint64_t v)
{
	fprintf(f, "hoardfs_%s{%s%s%s} %" PRIu64 "\n", name, labels,
		extra ? "," : "", extra ? extra : "", v);
}

/* A family with a single sample. */
static void prom_one(FILE *f, const char *name, const char *type,
		     const char *help, const char *labels, uint64_t v)
{
	prom_family(f, name, type, help);
	prom_u64(f, name, labels, NULL, v);
}

/* A family with one sample per request kind. */
static void prom_kinds(FILE *f, const char *name, const char *help,
		       const char *labels, const uint64_t *v)
{
	char op[32];

	prom_family(f, name, "counter", help);
	for (int k = 0; k < CLIENT_KIND_COUNT; k++) {
		snprintf(op, sizeof(op), "op=\"%s\"", kind_names[k]);
		prom_u64(f, name, labels, op, v[k]);
	}
}

int metrics_prometheus(const struct metrics_snapshot *m, char **out,
		       size_t *len)
{
	char mnt[1024], labels[1100], esc[4][1024];
	const struct sched_stats *s = &m->sched;
	char *buf = NULL;
	size_t size = 0;
	FILE *f;

	metrics_label_escape(m->mountpoint, mnt, sizeof(mnt));
	snprintf(labels, sizeof(labels), "mountpoint=\"%s\"", mnt);
	metrics_label_escape(m->version, esc[0], sizeof(esc[0]));
	metrics_label_escape(m->bucket, esc[1], sizeof(esc[1]));
	metrics_label_escape(m->prefix, esc[2], sizeof(esc[2]));
	metrics_label_escape(m->endpoint, esc[3], sizeof(esc[3]));
	f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;
	prom_family(f, "info", "gauge", "What is mounted where; always 1.");
	fprintf(f,
		"hoardfs_info{%s,version=\"%s\",bucket=\"%s\",prefix=\"%s\","
		"endpoint=\"%s\"} 1\n",
		labels, esc[0], esc[1], esc[2], esc[3]);
	prom_one(f, "uptime_seconds", "gauge",
		 "Seconds since the mount started serving.", labels,
		 (uint64_t)(m->uptime_sec > 0 ? m->uptime_sec : 0));
	prom_one(f, "cache_used_bytes", "gauge", "Bytes held in the cache.",
		 labels, s->cached_bytes);
	prom_one(f, "cache_limit_bytes", "gauge",
		 "The cache size limit (--cache-size); 0 for none.", labels,
		 m->cache_limit_bytes);
	prom_one(f, "cache_min_free_bytes", "gauge",
		 "Free space kept on the cache filesystem (--cache-min-free).",
		 labels, m->cache_min_free_bytes);
	prom_one(f, "cache_fs_free_bytes", "gauge",
		 "Free space on the cache filesystem.", labels,
		 m->cache_fs_free_bytes);
	prom_one(f, "cache_objects", "gauge",
		 "Object versions recorded in the cache index.", labels,
		 m->cache_objects);
	prom_family(f, "read_bytes_total", "counter",
		    "Bytes read through the mount, by where they came from.");
	prom_u64(f, "read_bytes_total", labels, "source=\"cache\"",
		 s->bytes_served_cached);
	prom_u64(f, "read_bytes_total", labels, "source=\"store\"",
		 bytes_from_store(m));
	prom_one(f, "read_direct_bytes_total", "counter",
		 "Bytes read from the store without caching them (cache "
		 "full); part of source=\"store\".",
		 labels, s->bytes_served_direct);
	prom_one(f, "fetched_bytes_total", "counter",
		 "Bytes fetched from the store into the cache.", labels,
		 s->bytes_fetched);
	prom_one(f, "fetched_parts_total", "counter",
		 "Ranged GETs that filled a part of a cache file.", labels,
		 s->parts_fetched);
	prom_one(f, "fetch_errors_total", "counter",
		 "Parts whose fetch failed after retries.", labels,
		 s->fetch_errors);
	prom_one(f, "verify_failures_total", "counter",
		 "Objects whose bytes did not match their MD5 ETag.", labels,
		 s->verify_failures);
	prom_family(f, "fetch_throughput_bytes_per_second", "gauge",
		    "Bytes fetched per second over the last few seconds.");
	fprintf(f, "hoardfs_fetch_throughput_bytes_per_second{%s} %.1f\n",
		labels, m->fetch_bytes_per_sec);
	prom_kinds(f, "requests_total",
		   "HTTP requests sent to the store, retries included.", labels,
		   m->client.attempts);
	prom_kinds(f, "request_retries_total",
		   "Requests sent again after a failed attempt.", labels,
		   m->client.retries);
	prom_kinds(f, "request_failures_total",
		   "Requests that failed for good after retries.", labels,
		   m->client.failed);
	prom_one(f, "requests_throttled_total", "counter",
		 "Answers 429 or 503 (SlowDown): the store asked to slow down.",
		 labels, m->client_totals.throttled);
	prom_one(f, "get_resumed_total", "counter",
		 "GET attempts that resumed a body broken midway.", labels,
		 m->client_totals.resumed);
	prom_one(f, "requests_inflight_cap", "gauge",
		 "Current cap on requests on the wire (halved on throttling).",
		 labels, m->client_totals.inflight_cap);
	prom_one(f, "credential_refreshes_total", "counter",
		 "Temporary credentials renewed.", labels,
		 m->client_totals.refreshes);
	prom_one(f, "get_received_bytes_total", "counter",
		 "GET body bytes received from the store.", labels,
		 m->client.get_bytes);
	prom_one(f, "evictions_total", "counter",
		 "Objects evicted from the cache (LRU or on request).", labels,
		 s->evictions);
	prom_one(f, "evicted_bytes_total", "counter",
		 "Cached bytes dropped by evictions.", labels,
		 s->bytes_evicted);
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = size;
	return 0;
}

void metrics_log_line(const struct metrics_snapshot *m, char *buf, size_t cap)
{
	double hit = metrics_hit_ratio(m);
	char ratio[16] = "-";

	if (hit >= 0)
		snprintf(ratio, sizeof(ratio), "%.3f", hit);
	snprintf(buf, cap,
		 "status: uptime_sec=%" PRId64 " cache_used_bytes=%" PRIu64
		 " cache_limit_bytes=%" PRIu64 " cache_objects=%" PRIu64
		 " read_cache_bytes=%" PRIu64 " read_store_bytes=%" PRIu64
		 " hit_ratio=%s fetched_bytes=%" PRIu64
		 " fetch_bytes_per_sec=%.0f GET=%" PRIu64 " HEAD=%" PRIu64
		 " LIST=%" PRIu64 " failed=%" PRIu64 " retries=%" PRIu64
		 " throttled=%" PRIu64 " fetch_errors=%" PRIu64
		 " evictions=%" PRIu64,
		 m->uptime_sec, m->sched.cached_bytes, m->cache_limit_bytes,
		 m->cache_objects, m->sched.bytes_served_cached,
		 bytes_from_store(m), ratio, m->sched.bytes_fetched,
		 m->fetch_bytes_per_sec, m->client.attempts[CLIENT_KIND_GET],
		 m->client.attempts[CLIENT_KIND_HEAD],
		 m->client.attempts[CLIENT_KIND_LIST],
		 sum_kinds(m->client.failed), sum_kinds(m->client.retries),
		 m->client_totals.throttled, m->sched.fetch_errors,
		 m->sched.evictions);
}
