// SPDX-License-Identifier: MIT
/*
 * The S3/OBS client (include/hoardfs/client.h): a pool of libcurl easy
 * handles, request building and signing, retries, and the mapping of every
 * failure to a negative errno.  Signing, XML and response validation are
 * pure functions in sigv4.c, sigv2.c, listxml.c and resp.c.  This file
 * holds the handle pool and client_new/free; creds.c the credential sets
 * and their renewal; request.c the attempts, retries and the three
 * operations (shapes in client_int.h).
 *
 * DESIGN
 * Threads: any number of threads call client_head/get/list at once.  Each
 * attempt borrows one easy handle from the pool and returns it when the
 * exchange ends, before any backoff sleep, so a request that waits to
 * retry holds neither a connection nor an in-flight slot.  Each handle's
 * keep-alive connection is reused by whoever borrows it next.  Handles are
 * created lazily, the first time the free list is empty and fewer than
 * max_connections exist.  One more thread, started on demand, renews
 * temporary credentials in the background (see Credentials).
 * Locks: c->lock (with c->cond) guards the free list, the in-flight cap
 * and the statistics; c->cred_lock (with c->cred_cond) guards the current
 * credentials and the refresh state.  Neither is held across network I/O,
 * and neither is taken while holding the other.  The CURLSH that shares
 * the DNS cache and TLS sessions between handles has one mutex per curl
 * lock-data kind, taken by curl through share_lock/share_unlock.  The rest
 * of struct client is immutable after client_new(), except the learned
 * clock offset, which is read and written atomically.
 * Backpressure (AIMD): at most c->cap attempts are on the wire; callers
 * wait on c->cond for a slot.  The cap starts at max_connections.  A 429
 * or 503 halves it (floor 1), once per window: only an attempt that
 * started after the last cut can cut again, so one burst of SlowDowns
 * answering requests already in flight counts once.  Every c->cap
 * successes in a row raise it by one, back up to max_connections.
 * Retries: transport failures, 408, 429, 500, 502, 503 and 504 are retried
 * with full-jitter exponential backoff (100 ms base, 5 s cap), or after
 * the server's Retry-After (capped at 20 s) plus jitter, re-signed with a
 * fresh date each time.  max_retries bounds failed attempts in a row that
 * brought no new bytes; the retry deadline bounds the time since the last
 * progress; before the endpoint has ever answered, connect failures get
 * only CLIENT_FIRST_RETRIES (a wrong endpoint should fail a mount fast).  A
 * GET broken midway resumes from the last byte it delivered, pinned to the
 * first response's ETag with If-Match.  Two answers get one immediate
 * extra attempt of their own: RequestTimeTooSkewed (the offset to the
 * server's Date is learned and used by every later signature) and, with a
 * refresher, credentials reported expired (they are renewed first).
 * Credentials: a reference-counted set, swapped atomically by
 * client_set_credentials(); an attempt signs with the set it took at its
 * start.  When a set has an expiry and a refresher exists, the first
 * attempt after its refresh time starts the background refresh thread
 * and goes on with the old set; an attempt that finds the set already
 * expired waits for the refresh.  At most one refresh runs at a time
 * (refresh_busy); a failed background refresh is retried 30 s later.  A
 * process that forked (the daemon does, after the mount probe) forgets a
 * refresh thread of its parent by pid.
 * Secrets: the secret key and token are copied, never logged, and wiped
 * when their set is freed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <libxml/parser.h>

#include "client/buf.h"
#include "client/client_int.h"
#include "client/endpoint.h"
#include "client/sigv2.h"
#include "hoardfs/client.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

/* ---- small helpers ---------------------------------------------------- */

/* A uniformly distributed 64-bit number (splitmix64); thread-safe. */
uint64_t client_random(struct client *c)
{
	uint64_t z = __atomic_add_fetch(&c->rng, 0x9E3779B97F4A7C15ull,
					__ATOMIC_RELAXED);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void client_sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- the shared DNS/TLS cache --------------------------------------- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access,
		       void *userptr)
{
	struct client *c = userptr;

	(void)h;
	(void)access;
	if ((unsigned)data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *userptr)
{
	struct client *c = userptr;

	(void)h;
	if ((unsigned)data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&c->share_locks[data]);
}

/* ---- the handle pool and the in-flight cap ----------------------------- */

/* How an attempt ended, for the AIMD cap. */
/*
 * Borrow a handle and an in-flight slot, waiting while the cap is reached
 * or all max handles are busy.  *@epoch receives the cut epoch the attempt
 * starts in (see DESIGN).
 */
int client_pool_get(struct client *c, CURL **out, uint64_t *epoch)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->lock);
	while (c->in_flight >= c->cap ||
	       (c->n_idle == 0 && c->n_created >= c->max))
		pthread_cond_wait(&c->cond, &c->lock);
	c->in_flight++;
	c->stats.attempts++;
	*epoch = c->cut_epoch;
	if (c->n_idle) {
		h = c->idle[--c->n_idle];
		pthread_mutex_unlock(&c->lock);
		*out = h;
		return 0;
	}
	c->n_created++;
	pthread_mutex_unlock(&c->lock);

	h = curl_easy_init();
	if (!h) {
		pthread_mutex_lock(&c->lock);
		c->n_created--;
		c->in_flight--;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

/*
 * Return a borrowed handle and its slot; its connection stays open for the
 * next user.  @how adjusts the cap: multiplicative decrease on throttling
 * (once per window), additive increase after a window of successes.
 */
void client_pool_put(struct client *c, CURL *h, enum pool_outcome how,
		     uint64_t epoch)
{
	unsigned old_cap, new_cap;

	pthread_mutex_lock(&c->lock);
	c->idle[c->n_idle++] = h;
	c->in_flight--;
	old_cap = c->cap;
	if (how == POOL_THROTTLED) {
		c->stats.throttled++;
		if (epoch == c->cut_epoch) {
			c->cap = c->cap > 1 ? c->cap / 2 : 1;
			c->cut_epoch++;
			c->ok_streak = 0;
		}
	} else if (how == POOL_OK && c->cap < c->max &&
		   ++c->ok_streak >= c->cap) {
		c->cap++;
		c->ok_streak = 0;
	}
	if (c->cap < c->stats.inflight_cap_min)
		c->stats.inflight_cap_min = c->cap;
	c->stats.inflight_cap = new_cap = c->cap;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (new_cap < old_cap)
		log_debug(
			"client: throttled by the server: at most %u requests "
			"in flight (was %u)",
			new_cap, old_cap);
}

/* ---- client_new / client_free ----------------------------------------- */

const char *client_bucket(const struct client *c)
{
	return c->bucket;
}

/* Nonzero when @v is "HOST:PORT:ADDRESS" as CURLOPT_RESOLVE wants it. */
static int client_resolve_ok(const char *v)
{
	const char *p = strchr(v, ':'), *q;
	unsigned long port = 0;

	if (!p || p == v || strpbrk(v, " \t\r\n"))
		return 0;
	for (q = p + 1; *q >= '0' && *q <= '9'; q++)
		port = port * 10 + (unsigned long)(*q - '0');
	return q > p + 1 && q - p <= 6 && port >= 1 && port <= 65535 &&
	       *q == ':' && q[1] != '\0';
}

int client_new(const struct client_config *cfg, struct client **out)
{
	struct client *c = NULL;
	int rc = -EINVAL;

	*out = NULL;
	if (!cfg || !cfg->endpoint || !cfg->bucket || !cfg->bucket[0] ||
	    !cfg->creds.access_key || !cfg->creds.access_key[0] ||
	    !cfg->creds.secret_key || !cfg->creds.secret_key[0] ||
	    cfg->max_connections < 1)
		return -EINVAL;
	if (strpbrk(cfg->bucket, "/?#@: \t\r\n"))
		return -EINVAL;
	if (cfg->signature != CLIENT_SIG_V4 &&
	    cfg->signature != CLIENT_SIG_V2 && cfg->signature != CLIENT_SIG_OBS)
		return -EINVAL; /* not a scheme at all; all three are built */
	if (cfg->resolve && cfg->resolve[0] && !client_resolve_ok(cfg->resolve))
		return -EINVAL;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = client_endpoint_parse(cfg->endpoint, &c->ep);
	if (rc)
		goto out;
	rc = -ENOMEM;
	c->sig = cfg->signature;
	c->path_style = client_path_style(c->ep.host, cfg->path_style);
	c->list_v2 = cfg->list_v2 != 0;
	c->ssl_verify = cfg->ssl_verify != 0;
	c->connect_timeout_ms =
		cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 0;
	c->low_speed_time_sec = cfg->low_speed_time_sec > 0
					? cfg->low_speed_time_sec
					: CLIENT_LOW_SPEED_DEFAULT_SEC;
	c->max_retries = cfg->max_retries;
	c->retry_deadline_ms = cfg->retry_deadline_ms > 0
				       ? cfg->retry_deadline_ms
				       : CLIENT_RETRY_DEADLINE_MS;
	c->max = cfg->max_connections;
	c->cap = c->max;
	c->stats.inflight_cap = c->stats.inflight_cap_min = c->max;
	c->refresh = cfg->refresh;
	c->refresh_arg = cfg->refresh_arg;
	atomic_store(&c->skew_logged_sec, INT64_MIN);
	c->rng = (uint64_t)util_mono_ms() ^ ((uint64_t)getpid() << 32) ^
		 (uint64_t)(uintptr_t)c;
	c->bucket = strdup(cfg->bucket);
	if (!c->bucket)
		goto out;
	pthread_mutex_init(&c->cred_lock, NULL);
	pthread_cond_init(&c->cred_cond, NULL);
	c->cred_ready = 1;
	rc = client_creds_new(&cfg->creds, &c->creds);
	if (rc)
		goto out;
	c->creds->gen = c->cred_gen = 1;
	rc = -ENOMEM;
	if (cfg->ca_file && cfg->ca_file[0]) {
		c->ca_file = strdup(cfg->ca_file);
		if (!c->ca_file)
			goto out;
	}
	if (cfg->resolve && cfg->resolve[0]) {
		c->resolve = curl_slist_append(NULL, cfg->resolve);
		if (!c->resolve)
			goto out;
	}
	rc = client_region(cfg->region, c->ep.host, &c->region);
	if (rc)
		goto out;
	rc = client_authority(&c->ep, c->path_style ? NULL : c->bucket,
			      &c->authority);
	if (rc)
		goto out;
	rc = -ENOMEM;
	if (asprintf(&c->base_url, "%s://%s", c->ep.https ? "https" : "http",
		     c->authority) < 0) {
		c->base_url = NULL;
		goto out;
	}
	if (asprintf(&c->bucket_prefix, "%s%s", c->path_style ? "/" : "",
		     c->path_style ? c->bucket : "") < 0) {
		c->bucket_prefix = NULL;
		goto out;
	}
	if (!c->path_style && c->ep.https && strchr(c->bucket, '.'))
		log_warn("bucket %s has dots: virtual-hosted HTTPS will fail "
			 "certificate checks; consider path-style addressing",
			 c->bucket);

	c->idle = calloc(c->max, sizeof(*c->idle));
	if (!c->idle)
		goto out;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_locks[i], NULL);
	c->share_locks_ready = 1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->pool_ready = 1;
	c->share = curl_share_init();
	if (!c->share)
		goto out;
	if (curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) ||
	    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
	    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) ||
	    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
	    curl_share_setopt(c->share, CURLSHOPT_SHARE,
			      CURL_LOCK_DATA_SSL_SESSION)) {
		rc = -EIO;
		goto out;
	}
	log_debug("client: %s bucket %s, %s style, region %s, sig %s%s%s",
		  c->base_url, c->bucket, c->path_style ? "path" : "virtual",
		  c->region,
		  c->sig == CLIENT_SIG_V4   ? "v4"
		  : c->sig == CLIENT_SIG_V2 ? "v2"
					    : "obs",
		  c->resolve ? ", resolve " : "",
		  c->resolve ? cfg->resolve : "");
	*out = c;
	c = NULL;
	rc = 0;
out:
	client_free(c);
	return rc;
}

void client_get_stats(struct client *c, struct client_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->stats;
	pthread_mutex_unlock(&c->lock);
	st->clock_offset_sec = atomic_load(&c->clock_offset_sec);
}

void client_free(struct client *c)
{
	int join = 0;

	if (!c)
		return;
	if (c->cred_ready) {
		pthread_mutex_lock(&c->cred_lock);
		join = c->refresher_started && c->refresher_pid == getpid();
		c->refresher_started = 0;
		pthread_mutex_unlock(&c->cred_lock);
		if (join)
			pthread_join(c->refresher, NULL);
	}
	if (c->pool_ready) {
		pthread_mutex_lock(&c->lock);
		while (c->n_idle < c->n_created)
			pthread_cond_wait(&c->cond, &c->lock);
		pthread_mutex_unlock(&c->lock);
	}
	for (unsigned i = 0; i < c->n_idle; i++)
		curl_easy_cleanup(c->idle[i]);
	if (c->share)
		curl_share_cleanup(c->share);
	if (c->pool_ready) {
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->lock);
	}
	if (c->share_locks_ready)
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_destroy(&c->share_locks[i]);
	if (c->cred_ready) {
		client_creds_free(
			c->creds); /* no attempt holds a reference now */
		pthread_cond_destroy(&c->cred_cond);
		pthread_mutex_destroy(&c->cred_lock);
	}
	curl_slist_free_all(c->resolve);
	free(c->idle);
	client_endpoint_clear(&c->ep);
	free(c->bucket);
	free(c->region);
	free(c->authority);
	free(c->base_url);
	free(c->bucket_prefix);
	free(c->ca_file);
	free(c);
}

/* ---- process-wide setup ------------------------------------------------ */

int client_global_init(void)
{
	/*
	 * With CURLOPT_NOSIGNAL, libcurl leaves SIGPIPE alone, and a TLS write
	 * to a connection the server closed would kill the process.
	 */
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -EIO;
	xmlInitParser();
	return 0;
}

void client_global_cleanup(void)
{
	xmlCleanupParser();
	curl_global_cleanup();
}
