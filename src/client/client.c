// SPDX-License-Identifier: MIT
/*
 * The S3/OBS client (include/hoardfs/client.h): a pool of libcurl easy
 * handles, request building and signing, retries, and the mapping of every
 * failure to a negative errno.  Signing, XML and response validation are
 * pure functions in sigv4.c, sigv2.c, listxml.c and resp.c; this file does
 * the I/O.
 *
 * DESIGN
 * Threads: any number of threads call client_head/get/list at once.  Each
 * request borrows one easy handle from the pool for its whole life, retries
 * included, and returns it at the end, so at most max_connections requests
 * are on the wire and each handle's keep-alive connection is reused by the
 * next request that borrows it.  Handles are created lazily, the first time
 * the free list is empty and fewer than max_connections exist.
 * Locks: c->lock (with c->cond) guards only the free list and counters;
 * nothing blocks on the network while holding it.  The CURLSH that shares
 * the DNS cache and TLS sessions between handles has one mutex per curl
 * lock-data kind, taken by curl through share_lock/share_unlock.  Everything
 * else in struct client is immutable after client_new().
 * Backpressure: a caller waits on c->cond while every handle is busy.
 * Retries: transport failures, 408, 429, 500, 502, 503 and 504 are retried
 * up to max_retries times with full-jitter exponential backoff (100 ms base,
 * 5 s cap) or the server's Retry-After (capped at 20 s), re-signed with a
 * fresh date each time.  A GET broken midway resumes from the last byte it
 * delivered, pinned to the first response's ETag with If-Match.
 * Secrets: the secret key and token are copied at client_new(), never
 * logged, and wiped at client_free().
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <libxml/parser.h>

#include "client/buf.h"
#include "client/endpoint.h"
#include "client/listxml.h"
#include "client/resp.h"
#include "client/sigv2.h"
#include "client/sigv4.h"
#include "hoardfs/client.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

#define CLIENT_KEY_MAX_BYTES	 1024	    /* S3/OBS limit on a key's length */
#define CLIENT_ERR_BODY_MAX	 65536	    /* error documents are ~1 KiB */
#define CLIENT_LOW_SPEED_BYTES	 1024	    /* "stalled" below 1 KiB/s */
#define CLIENT_MAX_KEYS		 1000	    /* the servers' own page limit */
#define CLIENT_DRAIN_MAX_BYTES	 (64 << 10) /* see body_cb() */
#define CLIENT_TCP_KEEPIDLE_SEC	 60	    /* probe idle pooled connections */
#define CLIENT_TCP_KEEPINTVL_SEC 30
/*
 * Used when the config gives no stall limit (<= 0): without one, a server
 * that stops sending would hold a FUSE thread and a pool handle forever.
 */
#define CLIENT_LOW_SPEED_DEFAULT_SEC 30

#ifndef HOARDFS_VERSION
#define HOARDFS_VERSION "0"
#endif

/*
 * Invariants: n_idle <= n_created <= max; n_created - n_idle handles are
 * busy; idle[0..n_idle) are initialised easy handles.
 */
struct client {
	char *bucket;		   /* bucket name */
	char *region;		   /* signing region (configured or derived) */
	char *access_key;	   /* AK */
	char *secret_key;	   /* SK; never logged; wiped at free */
	char *token;		   /* security token or NULL; wiped at free */
	char *authority;	   /* Host header value: [bucket.]host[:port] */
	char *base_url;		   /* "http(s)://" + authority */
	char *bucket_prefix;	   /* "/bucket" with path style, else "" */
	char *ca_file;		   /* CA bundle or NULL */
	struct client_endpoint ep; /* the parsed endpoint */
	enum client_signature sig; /* signing scheme */
	int path_style;		   /* nonzero: bucket in the path */
	int list_v2;		   /* nonzero: ListObjectsV2 */
	int ssl_verify;		   /* verify peer and host name */
	long connect_timeout_ms;   /* CURLOPT_CONNECTTIMEOUT_MS; 0 default */
	long low_speed_time_sec;   /* stall limit, always > 0 */
	unsigned max_retries;	   /* extra tries per request */
	uint64_t rng;		   /* jitter state, updated atomically */
	CURLSH *share;		   /* DNS cache and TLS sessions */
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST]; /* one per kind */
	int share_locks_ready; /* mutexes initialised */
	pthread_mutex_t lock;  /* guards the pool fields below */
	pthread_cond_t cond;   /* signalled when a handle is returned */
	int pool_ready;	       /* lock and cond initialised */
	CURL **idle;	       /* free handles, max of them allocated */
	unsigned n_idle;       /* handles in idle[] */
	unsigned n_created;    /* handles that exist, idle or busy */
	unsigned max;	       /* max_connections */

	struct client_op_stats ops; /* request counters, updated atomically */
};

enum client_op {
	CLIENT_OP_HEAD, /* HEAD object */
	CLIENT_OP_GET,	/* ranged GET object */
	CLIENT_OP_LIST, /* ListObjects page */
};

static const char *const client_op_names[] = {"HEAD", "GET", "LIST"};

/* enum client_op indexes struct client_op_stats as enum client_op_kind. */
_Static_assert(CLIENT_OP_HEAD == (int)CLIENT_KIND_HEAD &&
		       CLIENT_OP_GET == (int)CLIENT_KIND_GET &&
		       CLIENT_OP_LIST == (int)CLIENT_KIND_LIST,
	       "client_op and client_op_kind disagree");

/* One logical request (all its attempts), and the current attempt. */
struct client_req {
	enum client_op op;  /* what this is */
	const char *key;    /* raw key; the prefix for LIST */
	char *path;	    /* URI-encoded path as sent and signed */
	char *resource_key; /* encoded key for V2/OBS resources */
	struct client_sig_param *params; /* query parameters (LIST) */
	size_t n_params;
	char *query; /* URL query string, "" for none */
	/* GET only */
	uint64_t off;	      /* first requested object byte */
	uint64_t len;	      /* bytes requested; shrinks to the object end */
	uint64_t asked_len;   /* bytes the caller asked for, for logs */
	uint64_t done;	      /* bytes delivered by all attempts so far */
	const char *if_match; /* caller's ETag, or NULL */
	char etag[CLIENT_ETAG_MAX]; /* ETag of the first good response */
	uint64_t size;		    /* object size from the first response */
	int64_t mtime_sec;	    /* Last-Modified of the first response */
	int have_first;		    /* the three fields above are set */
	client_body_fn fn;	    /* body sink */
	void *arg;		    /* its argument */
	/* the current attempt */
	struct client_resp resp;      /* its response headers */
	struct client_buf body;	      /* LIST page or error document */
	struct client_get_plan plan;  /* GET: what the body holds */
	int plan_done;		      /* plan is valid */
	uint64_t attempt_off;	      /* GET: object offset asked for */
	uint64_t body_seen;	      /* body bytes received */
	uint64_t delivered;	      /* bytes given to fn in this attempt */
	int abort_rc;		      /* errno that made us stop the transfer */
	int fn_failed;		      /* abort_rc came from the caller's fn */
	int stopped_early;	      /* stopped on purpose after the range */
	const char *why;	      /* what was wrong with a bad response */
	char errbuf[CURL_ERROR_SIZE]; /* curl's message */
};

/* ---- small helpers ---------------------------------------------------- */

/* A uniformly distributed 64-bit number (splitmix64); thread-safe. */
static uint64_t client_random(struct client *c)
{
	uint64_t z = __atomic_add_fetch(&c->rng, 0x9E3779B97F4A7C15ull,
					__ATOMIC_RELAXED);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void client_sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* strdup of @s with leading and trailing white space removed. */
static char *client_strdup_trim(const char *s)
{
	size_t len;

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' ||
		       s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	return strndup(s, len);
}

static void client_free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
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

/* ---- the handle pool ---------------------------------------------------- */

/* Borrow a handle, waiting while all max of them are busy. */
static int pool_get(struct client *c, CURL **out)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->lock);
	while (c->n_idle == 0 && c->n_created >= c->max)
		pthread_cond_wait(&c->cond, &c->lock);
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
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

/* Return a borrowed handle; its connection stays open for the next user. */
static void pool_put(struct client *c, CURL *h)
{
	pthread_mutex_lock(&c->lock);
	c->idle[c->n_idle++] = h;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* ---- client_new / client_free ----------------------------------------- */

const char *client_bucket(const struct client *c)
{
	return c->bucket;
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
	c->max = cfg->max_connections;
	c->rng = (uint64_t)util_mono_ms() ^ ((uint64_t)getpid() << 32) ^
		 (uint64_t)(uintptr_t)c;
	c->bucket = strdup(cfg->bucket);
	c->access_key = client_strdup_trim(cfg->creds.access_key);
	c->secret_key = client_strdup_trim(cfg->creds.secret_key);
	if (!c->bucket || !c->access_key || !c->secret_key)
		goto out;
	if (cfg->creds.security_token && cfg->creds.security_token[0]) {
		c->token = client_strdup_trim(cfg->creds.security_token);
		if (!c->token)
			goto out;
	}
	if (cfg->ca_file && cfg->ca_file[0]) {
		c->ca_file = strdup(cfg->ca_file);
		if (!c->ca_file)
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
	log_debug("client: %s bucket %s, %s style, region %s, sig %d",
		  c->base_url, c->bucket, c->path_style ? "path" : "virtual",
		  c->region, (int)c->sig);
	*out = c;
	c = NULL;
	rc = 0;
out:
	client_free(c);
	return rc;
}

void client_free(struct client *c)
{
	if (!c)
		return;
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
	free(c->idle);
	client_endpoint_clear(&c->ep);
	free(c->bucket);
	free(c->region);
	free(c->access_key);
	client_free_secret(c->secret_key);
	client_free_secret(c->token);
	free(c->authority);
	free(c->base_url);
	free(c->bucket_prefix);
	free(c->ca_file);
	free(c);
}

/* ---- libcurl callbacks ------------------------------------------------- */

static size_t hdr_cb(char *line, size_t size, size_t n, void *ud)
{
	struct client_req *rq = ud;

	client_resp_header(&rq->resp, line, size * n);
	return size * n;
}

/* Nonzero while the current response is a success (2xx). */
static int req_ok_status(const struct client_req *rq)
{
	return rq->resp.status >= 200 && rq->resp.status <= 299;
}

/*
 * Decide how to read a GET body, once its headers are in: validate the
 * range and check that a resumed attempt sees the same object.
 */
static int req_plan(struct client_req *rq)
{
	uint64_t want = rq->len - rq->done;
	int rc;

	if (rq->plan_done)
		return 0;
	if (rq->resp.bad) {
		rq->why = "malformed response header";
		return -EIO;
	}
	rc = client_get_plan(rq->resp.status, rq->resp.content_range,
			     rq->resp.content_length, rq->attempt_off, want,
			     &rq->plan);
	if (rc == -EIO)
		rq->why = "Content-Range/Content-Length do not match the "
			  "requested range";
	if (rc)
		return rc;
	if (rq->have_first && (rq->plan.size != rq->size ||
			       (rq->etag[0] && rq->resp.etag[0] &&
				strcmp(rq->etag, rq->resp.etag) != 0))) {
		rq->why = "object changed while resuming";
		return -ESTALE;
	}
	if (!rq->have_first) {
		memcpy(rq->etag, rq->resp.etag, sizeof(rq->etag));
		rq->size = rq->plan.size;
		rq->mtime_sec = rq->resp.last_modified;
		rq->have_first = 1;
	}
	/* The object may end before the requested range does. */
	rq->len = rq->done + rq->plan.deliver;
	rq->plan_done = 1;
	return 0;
}

/*
 * Body sink.  Error documents and LIST pages are collected (capped); a GET
 * body is validated once and streamed to the caller's fn as it arrives.
 * After the range is complete, a 200 body's tail is drained only when at
 * most CLIENT_DRAIN_MAX_BYTES remain (cheaper than a new connection);
 * otherwise the transfer is stopped and the connection dropped.
 * Returning less than size * n makes curl stop with CURLE_WRITE_ERROR.
 */
static size_t body_cb(char *ptr, size_t size, size_t n, void *ud)
{
	struct client_req *rq = ud;
	size_t total = size * n;
	uint64_t before, lo, hi, end;
	int rc;

	if (!req_ok_status(rq) || rq->op != CLIENT_OP_GET) {
		client_buf_append(&rq->body, ptr, total);
		if (rq->body.error && req_ok_status(rq)) {
			rq->why = "listing body too large";
			rq->abort_rc = -EIO;
			return 0;
		}
		return total; /* an oversized error body is just cut */
	}
	rc = req_plan(rq);
	if (rc) {
		rq->abort_rc = rc;
		return 0;
	}
	if (rq->plan.body_len >= 0 &&
	    total > (uint64_t)rq->plan.body_len - rq->body_seen) {
		rq->why = "body longer than announced";
		rq->abort_rc = -EIO;
		return 0;
	}
	before = rq->body_seen;
	rq->body_seen += total;
	end = rq->plan.skip + rq->plan.deliver;
	lo = before > rq->plan.skip ? before : rq->plan.skip;
	hi = rq->body_seen < end ? rq->body_seen : end;
	if (lo < hi) {
		rc = rq->fn(rq->arg, rq->attempt_off + (lo - rq->plan.skip),
			    ptr + (lo - before), (size_t)(hi - lo));
		if (rc) {
			rq->abort_rc = rc < 0 ? rc : -EIO;
			rq->fn_failed = 1;
			rq->why = "aborted by the caller";
			return 0;
		}
		rq->delivered += hi - lo;
		rq->done += hi - lo;
	}
	if (rq->delivered == rq->plan.deliver && rq->plan.body_len >= 0 &&
	    (uint64_t)rq->plan.body_len - rq->body_seen >
		    CLIENT_DRAIN_MAX_BYTES) {
		rq->stopped_early = 1;
		return 0;
	}
	return total;
}

/* ---- one attempt ------------------------------------------------------- */

/* Append "name: value" to a curl header list; 0 or -ENOMEM. */
static int req_add_header(struct curl_slist **list, const char *name,
			  const char *value)
{
	struct curl_slist *l;
	char *line;

	if (asprintf(&line, "%s: %s", name, value) < 0)
		return -ENOMEM;
	l = curl_slist_append(*list, line);
	free(line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

/*
 * Build and sign this attempt's headers with a fresh date.  Signed: Host,
 * the date header, the token and (V4) x-amz-content-sha256 and Range.
 * If-Match travels unsigned, which every scheme allows.
 */
static int req_headers(struct client *c, struct client_req *rq,
		       struct curl_slist **out)
{
	struct client_sig_header sh[6];
	char date[CLIENT_HTTP_DATE_LEN + 1], range[64];
	const char *if_match = rq->if_match;
	char *auth = NULL, *sts = NULL, *resource = NULL;
	struct curl_slist *list = NULL;
	int64_t now = util_now_sec();
	size_t n = 0;
	int rc;

	sh[n++] = (struct client_sig_header){"host", c->authority};
	range[0] = '\0';
	if (rq->op == CLIENT_OP_GET) {
		snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64,
			 rq->attempt_off, rq->off + rq->len - 1);
		if (c->sig == CLIENT_SIG_V4)
			sh[n++] = (struct client_sig_header){"range", range};
		if (!if_match && rq->have_first && rq->etag[0])
			if_match = rq->etag; /* resuming: same object only */
	}
	if (c->sig == CLIENT_SIG_V4) {
		client_amz_date(now, date);
		sh[n++] = (struct client_sig_header){"x-amz-date", date};
		sh[n++] = (struct client_sig_header){"x-amz-content-sha256",
						     CLIENT_UNSIGNED_PAYLOAD};
		if (c->token)
			sh[n++] = (struct client_sig_header){
				"x-amz-security-token", c->token};
		struct client_sigv4_request r = {
			.method = rq->op == CLIENT_OP_HEAD ? "HEAD" : "GET",
			.path = rq->path,
			.params = rq->params,
			.n_params = rq->n_params,
			.headers = sh,
			.n_headers = n,
			.payload_hash = CLIENT_UNSIGNED_PAYLOAD,
		};
		rc = client_sigv4_authorization(&r, c->access_key,
						c->secret_key, c->region, date,
						NULL, &auth);
	} else {
		int obs = c->sig == CLIENT_SIG_OBS;
		char sig[CLIENT_SIGV2_SIG_LEN + 1];

		client_http_date(now, date);
		sh[n++] = (struct client_sig_header){
			obs ? "x-obs-date" : "x-amz-date", date};
		if (c->token)
			sh[n++] = (struct client_sig_header){
				obs ? "x-obs-security-token"
				    : "x-amz-security-token",
				c->token};
		rc = client_sigv2_resource(c->bucket, rq->resource_key,
					   rq->params, rq->n_params, &resource);
		if (rc == 0)
			rc = client_sigv2_string_to_sign(
				rq->op == CLIENT_OP_HEAD ? "HEAD" : "GET", NULL,
				NULL, "", sh, n, obs ? "x-obs-" : "x-amz-",
				resource, &sts);
		if (rc == 0)
			rc = client_sigv2_signature(c->secret_key, sts, sig);
		if (rc == 0 && asprintf(&auth, "%s %s:%s", obs ? "OBS" : "AWS",
					c->access_key, sig) < 0) {
			auth = NULL;
			rc = -ENOMEM;
		}
		explicit_bzero(sig, sizeof(sig));
	}
	if (rc)
		goto out;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = req_add_header(&list, sh[i].name, sh[i].value);
	if (rc == 0 && range[0] && c->sig != CLIENT_SIG_V4)
		rc = req_add_header(&list, "Range", range);
	if (rc == 0 && if_match)
		rc = req_add_header(&list, "If-Match", if_match);
	if (rc == 0)
		rc = req_add_header(&list, "Authorization", auth);
	if (rc)
		goto out;
	/* No "Expect: 100-continue" dance, ever. */
	struct curl_slist *l = curl_slist_append(list, "Expect:");
	if (!l) {
		rc = -ENOMEM;
		goto out;
	}
	list = l;
	*out = list;
	list = NULL;
out:
	curl_slist_free_all(list);
	if (auth)
		explicit_bzero(auth, strlen(auth));
	free(auth);
	free(sts);
	free(resource);
	return rc;
}

/* Set every option for this attempt on a freshly reset handle. */
static CURLcode req_setopt(struct client *c, CURL *h, struct client_req *rq,
			   const char *url, struct curl_slist *headers)
{
	CURLcode e = CURLE_OK;

#define SET(opt, val)                                                          \
	do {                                                                   \
		if (e == CURLE_OK)                                             \
			e = curl_easy_setopt(h, opt, val);                     \
	} while (0)
	SET(CURLOPT_SHARE, c->share);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_PATH_AS_IS, 1L);
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_USERAGENT, "hoardfs/" HOARDFS_VERSION);
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, (long)CLIENT_TCP_KEEPIDLE_SEC);
	SET(CURLOPT_TCP_KEEPINTVL, (long)CLIENT_TCP_KEEPINTVL_SEC);
	if (c->connect_timeout_ms)
		SET(CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	SET(CURLOPT_LOW_SPEED_LIMIT, (long)CLIENT_LOW_SPEED_BYTES);
	SET(CURLOPT_LOW_SPEED_TIME, c->low_speed_time_sec);
	if (c->ca_file)
		SET(CURLOPT_CAINFO, c->ca_file);
	SET(CURLOPT_SSL_VERIFYPEER, c->ssl_verify ? 1L : 0L);
	SET(CURLOPT_SSL_VERIFYHOST, c->ssl_verify ? 2L : 0L);
	SET(CURLOPT_HEADERFUNCTION, hdr_cb);
	SET(CURLOPT_HEADERDATA, rq);
	SET(CURLOPT_WRITEFUNCTION, body_cb);
	SET(CURLOPT_WRITEDATA, rq);
	SET(CURLOPT_ERRORBUFFER, rq->errbuf);
	if (rq->op == CLIENT_OP_HEAD)
		SET(CURLOPT_NOBODY, 1L);
#undef SET
	return e;
}

/*
 * Run one attempt on @h.  Returns 0 when the exchange happened (look at
 * *@crc and rq->resp), or a negative errno when it could not be set up.
 */
static int req_attempt(struct client *c, CURL *h, struct client_req *rq,
		       CURLcode *crc)
{
	struct curl_slist *headers = NULL;
	char *url = NULL;
	int rc;

	client_resp_reset(&rq->resp);
	client_buf_free(&rq->body);
	rq->body.max = rq->op == CLIENT_OP_LIST ? CLIENT_XML_MAX_BYTES
						: CLIENT_ERR_BODY_MAX;
	memset(&rq->plan, 0, sizeof(rq->plan));
	rq->plan_done = 0;
	rq->attempt_off = rq->off + rq->done;
	rq->body_seen = 0;
	rq->delivered = 0;
	rq->abort_rc = 0;
	rq->fn_failed = 0;
	rq->stopped_early = 0;
	rq->why = NULL;
	rq->errbuf[0] = '\0';

	rc = req_headers(c, rq, &headers);
	if (rc)
		goto out;
	if (asprintf(&url, "%s%s%s%s", c->base_url, rq->path,
		     rq->query[0] ? "?" : "", rq->query) < 0) {
		url = NULL;
		rc = -ENOMEM;
		goto out;
	}
	curl_easy_reset(h);
	*crc = req_setopt(c, h, rq, url, headers);
	if (*crc == CURLE_OK)
		*crc = curl_easy_perform(h);
	/* Do not leave pointers to this request's memory in the handle. */
	curl_easy_reset(h);
out:
	free(url);
	curl_slist_free_all(headers);
	return rc;
}

/* ---- outcome, retries, logging ----------------------------------------- */

/* Fill @err for a failure of the current attempt. */
static void req_fill_error(struct client_req *rq, CURLcode crc,
			   struct client_error *err)
{
	memset(err, 0, sizeof(*err));
	snprintf(err->request_id, sizeof(err->request_id), "%s",
		 rq->resp.request_id);
	if (crc != CURLE_OK && !rq->abort_rc) {
		snprintf(err->message, sizeof(err->message), "%s",
			 rq->errbuf[0] ? rq->errbuf : curl_easy_strerror(crc));
		return;
	}
	err->http_status = rq->resp.status;
	if (!req_ok_status(rq) && rq->body.len &&
	    client_listxml_error(rq->body.p, rq->body.len, err) != 0)
		log_debug("%s: error body is not an S3 <Error> document",
			  client_op_names[rq->op]);
	if (!err->message[0] && rq->why)
		snprintf(err->message, sizeof(err->message), "%s", rq->why);
}

/*
 * Judge the attempt: 0 for success, else a negative errno with *@retry
 * set when another attempt may succeed.
 */
static int req_outcome(struct client_req *rq, CURLcode crc, int *retry,
		       struct client_error *err)
{
	*retry = 0;
	if (rq->abort_rc) {
		req_fill_error(rq, crc, err);
		return rq->abort_rc;
	}
	if (rq->op == CLIENT_OP_GET && rq->plan_done &&
	    rq->delivered == rq->plan.deliver &&
	    (rq->stopped_early || crc != CURLE_OK)) {
		/* Every wanted byte is in; only the discarded tail failed. */
		return 0;
	}
	if (crc != CURLE_OK) {
		req_fill_error(rq, crc, err);
		*retry = client_curl_retryable(crc);
		return client_map_curl(crc);
	}
	if (!req_ok_status(rq)) {
		req_fill_error(rq, crc, err);
		*retry = client_http_retryable(rq->resp.status);
		return client_map_http(rq->op == CLIENT_OP_HEAD,
				       rq->resp.status, err->code);
	}
	switch (rq->op) {
	case CLIENT_OP_HEAD:
		if (rq->resp.status != 200 || rq->resp.bad ||
		    rq->resp.content_length < 0) {
			rq->why = "HEAD without a valid Content-Length/ETag";
			break;
		}
		return 0;
	case CLIENT_OP_GET: {
		int rc = req_plan(rq); /* an empty body never reached body_cb */

		if (rc) {
			req_fill_error(rq, crc, err);
			return rc;
		}
		if (rq->delivered == rq->plan.deliver &&
		    (rq->plan.body_len < 0 ||
		     rq->body_seen == (uint64_t)rq->plan.body_len))
			return 0;
		rq->why = "body shorter than announced";
		*retry = 1;
		break;
	}
	case CLIENT_OP_LIST:
		if (rq->resp.status == 200)
			return 0;
		rq->why = "unexpected status for a listing";
		break;
	}
	req_fill_error(rq, crc, err);
	return -EIO;
}

/* The one log line for a request that failed for good. */
static void req_log_failure(struct client *c, const struct client_req *rq,
			    int rc, const struct client_error *err,
			    unsigned tries)
{
	enum log_level level = LOG_LEVEL_ERROR;
	char range[64] = "";

	if ((rq->op == CLIENT_OP_HEAD && rc == -ENOENT) || rc == -ERANGE ||
	    rq->fn_failed)
		level = LOG_LEVEL_DEBUG; /* ordinary answers, caller's choice */
	/* The object changed under a read: the caller revalidates. */
	if (rc == -ESTALE)
		level = LOG_LEVEL_INFO;
	if (!log_enabled(level))
		return;
	if (rq->op == CLIENT_OP_GET)
		snprintf(range, sizeof(range), " range=%" PRIu64 "-%" PRIu64,
			 rq->off, rq->off + rq->asked_len - 1);
	if (err->http_status)
		log_msg(level, "%s s3://%s/%s%s: %ld %s request-id=%s: %s (%s)",
			client_op_names[rq->op], c->bucket, rq->key, range,
			err->http_status, err->code[0] ? err->code : "-",
			err->request_id[0] ? err->request_id : "-",
			err->message[0] ? err->message : "-", strerror(-rc));
	else
		log_msg(level, "%s s3://%s/%s%s: %s (%s) after %u tries",
			client_op_names[rq->op], c->bucket, rq->key, range,
			err->message[0] ? err->message : "-", strerror(-rc),
			tries);
}

/*
 * How long to wait before retry number @attempt (0-based): the server's
 * Retry-After when it sent one (capped), else full-jitter backoff.
 */
static uint64_t req_wait_ms(struct client *c, const struct client_req *rq,
			    unsigned attempt)
{
	long sec = rq->resp.retry_after_sec;

	if (sec < 0)
		return client_backoff_ms(attempt, client_random(c));
	if (sec > CLIENT_RETRY_AFTER_MAX_SEC)
		sec = CLIENT_RETRY_AFTER_MAX_SEC;
	return (uint64_t)sec * 1000;
}

/* Count the outcome of @rq after @retries retries (no lock: atomics). */
static void client_count(struct client *c, const struct client_req *rq, int rc,
			 unsigned retries)
{
	__atomic_add_fetch(&c->ops.retries[rq->op], retries, __ATOMIC_RELAXED);
	if (rc)
		__atomic_add_fetch(&c->ops.failed[rq->op], 1, __ATOMIC_RELAXED);
	if (rq->op == CLIENT_OP_GET)
		__atomic_add_fetch(&c->ops.get_bytes, rq->done,
				   __ATOMIC_RELAXED);
}

void client_op_stats_get(struct client *c, struct client_op_stats *out)
{
	for (int k = 0; k < CLIENT_KIND_COUNT; k++) {
		out->attempts[k] =
			__atomic_load_n(&c->ops.attempts[k], __ATOMIC_RELAXED);
		out->retries[k] =
			__atomic_load_n(&c->ops.retries[k], __ATOMIC_RELAXED);
		out->failed[k] =
			__atomic_load_n(&c->ops.failed[k], __ATOMIC_RELAXED);
	}
	out->get_bytes = __atomic_load_n(&c->ops.get_bytes, __ATOMIC_RELAXED);
}

/*
 * Run @rq with retries on a pooled handle.  The handle stays borrowed
 * during backoff sleeps, so retries count against max_connections.
 */
static int req_run(struct client *c, struct client_req *rq,
		   struct client_error *err_out)
{
	struct client_error err;
	unsigned attempt = 0;
	CURLcode crc = CURLE_OK;
	CURL *h = NULL;
	int rc, retry;

	memset(&err, 0, sizeof(err));
	rc = pool_get(c, &h);
	if (rc)
		goto out;
	for (;;) {
		uint64_t wait_ms, done_before = rq->done;

		crc = CURLE_OK;
		rc = req_attempt(c, h, rq, &crc);
		if (rc)
			break;
		__atomic_add_fetch(&c->ops.attempts[rq->op], 1,
				   __ATOMIC_RELAXED);
		rc = req_outcome(rq, crc, &retry, &err);
		if (rc == 0 || !retry || attempt >= c->max_retries)
			break;
		wait_ms = req_wait_ms(c, rq, attempt);
		log_debug("%s s3://%s/%s: %s, %" PRIu64
			  " bytes in; retry %u in %" PRIu64 " ms",
			  client_op_names[rq->op], c->bucket, rq->key,
			  err.message[0] ? err.message : strerror(-rc),
			  rq->done - done_before, attempt + 1, wait_ms);
		client_sleep_ms(wait_ms);
		attempt++;
	}
	pool_put(c, h);
out:
	client_count(c, rq, rc, attempt);
	if (rc) {
		if (!err.message[0] && rc == -ENOMEM)
			snprintf(err.message, sizeof(err.message),
				 "out of memory");
		req_log_failure(c, rq, rc, &err, attempt + 1);
	}
	if (err_out)
		*err_out = err;
	return rc;
}

/* Set rq->path (and the V2/OBS resource key) for object @key. */
static int req_object_path(struct client *c, struct client_req *rq,
			   const char *key)
{
	rq->resource_key = client_uri_encode(key, 1);
	if (!rq->resource_key)
		return -ENOMEM;
	if (asprintf(&rq->path, "%s/%s", c->bucket_prefix, rq->resource_key) <
	    0) {
		rq->path = NULL;
		return -ENOMEM;
	}
	rq->query = strdup("");
	return rq->query ? 0 : -ENOMEM;
}

static void req_clear(struct client_req *rq)
{
	free(rq->path);
	free(rq->resource_key);
	free(rq->query);
	client_buf_free(&rq->body);
}

/* Check an object key before sending anything. */
static int client_check_key(const char *key, struct client_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
	if (!key || !key[0])
		return -EINVAL;
	if (strlen(key) > CLIENT_KEY_MAX_BYTES)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- the three operations ------------------------------------------------ */

int client_head(struct client *c, const char *key,
		struct client_object_meta *meta, struct client_error *err)
{
	struct client_req rq = {.op = CLIENT_OP_HEAD, .key = key};
	int rc;

	rc = client_check_key(key, err);
	if (rc)
		return rc;
	rc = req_object_path(c, &rq, key);
	if (rc)
		goto out;
	rc = req_run(c, &rq, err);
	if (rc)
		goto out;
	memset(meta, 0, sizeof(*meta));
	meta->size = (uint64_t)rq.resp.content_length;
	meta->mtime_sec = rq.resp.last_modified > 0 ? rq.resp.last_modified : 0;
	memcpy(meta->etag, rq.resp.etag, sizeof(meta->etag));
out:
	req_clear(&rq);
	return rc;
}

int client_get(struct client *c, const char *key, uint64_t off, uint64_t len,
	       const char *if_match, client_body_fn fn, void *arg,
	       struct client_object_meta *meta, struct client_error *err)
{
	struct client_req rq = {.op = CLIENT_OP_GET, .key = key};
	int rc;

	rc = client_check_key(key, err);
	if (rc)
		return rc;
	if (len == 0)
		return 0;
	if (!fn || (if_match && strlen(if_match) >= CLIENT_ETAG_MAX))
		return -EINVAL;
	if (off == UINT64_MAX)
		return -ERANGE;
	if (len > UINT64_MAX - off)
		len = UINT64_MAX - off; /* the range ends at the last offset */
	rq.off = off;
	rq.len = len;
	rq.asked_len = len;
	rq.if_match = if_match && if_match[0] ? if_match : NULL;
	rq.fn = fn;
	rq.arg = arg;
	rc = req_object_path(c, &rq, key);
	if (rc)
		goto out;
	rc = req_run(c, &rq, err);
	if (rc == 0 && meta) {
		memset(meta, 0, sizeof(*meta));
		meta->size = rq.size;
		meta->mtime_sec = rq.mtime_sec > 0 ? rq.mtime_sec : 0;
		memcpy(meta->etag, rq.etag, sizeof(meta->etag));
	}
out:
	req_clear(&rq);
	return rc;
}

int client_list(struct client *c, const char *prefix, const char *delimiter,
		const char *start, unsigned max_keys,
		struct client_list_page *page, struct client_error *err)
{
	struct client_req rq = {.op = CLIENT_OP_LIST,
				.key = prefix ? prefix : ""};
	struct client_sig_param params[6];
	char max_text[16];
	size_t n = 0;
	int rc;

	memset(page, 0, sizeof(*page));
	if (err)
		memset(err, 0, sizeof(*err));
	if (max_keys == 0 || max_keys > CLIENT_MAX_KEYS)
		max_keys = CLIENT_MAX_KEYS;
	snprintf(max_text, sizeof(max_text), "%u", max_keys);
	if (c->list_v2) {
		params[n++] = (struct client_sig_param){"list-type", "2"};
		if (start && start[0])
			params[n++] = (struct client_sig_param){
				"continuation-token", start};
	} else if (start && start[0]) {
		params[n++] = (struct client_sig_param){"marker", start};
	}
	if (delimiter && delimiter[0])
		params[n++] = (struct client_sig_param){"delimiter", delimiter};
	params[n++] = (struct client_sig_param){"encoding-type", "url"};
	params[n++] = (struct client_sig_param){"max-keys", max_text};
	if (prefix && prefix[0])
		params[n++] = (struct client_sig_param){"prefix", prefix};
	rq.params = params;
	rq.n_params = n;

	rc = -ENOMEM;
	/*
	 * "/bucket/" (path style) or "/": then the V2/OBS resource "/bucket/"
	 * is the path as sent whichever way a server derives it [P §2.1].
	 */
	if (asprintf(&rq.path, "%s/", c->bucket_prefix) < 0)
		rq.path = NULL;
	rq.resource_key = strdup("");
	if (!rq.path || !rq.resource_key)
		goto out;
	rc = client_query_string(params, n, 0, &rq.query);
	if (rc)
		goto out;
	rc = req_run(c, &rq, err);
	if (rc)
		goto out;
	rc = client_listxml_parse(rq.body.p ? rq.body.p : "", rq.body.len,
				  c->list_v2, page);
	if (rc == 0 && page->truncated && start &&
	    strcmp(page->next, start) == 0)
		rc = -EIO; /* no progress: never loop on the same page */
	if (rc) {
		client_list_page_clear(page);
		__atomic_add_fetch(&c->ops.failed[CLIENT_OP_LIST], 1,
				   __ATOMIC_RELAXED);
		/* The same fields, in the same order, as req_log_failure(). */
		log_error("LIST s3://%s/%s: %ld - request-id=%s: malformed or "
			  "unusable listing (%s)",
			  c->bucket, rq.key, rq.resp.status,
			  rq.resp.request_id[0] ? rq.resp.request_id : "-",
			  strerror(-rc));
		if (err) {
			err->http_status = rq.resp.status;
			snprintf(err->request_id, sizeof(err->request_id), "%s",
				 rq.resp.request_id);
			snprintf(err->message, sizeof(err->message),
				 "malformed or unusable listing");
		}
	}
out:
	req_clear(&rq);
	return rc;
}

void client_list_page_clear(struct client_list_page *page)
{
	if (!page)
		return;
	for (size_t i = 0; i < page->n; i++)
		free(page->v[i].name);
	free(page->v);
	free(page->next);
	memset(page, 0, sizeof(*page));
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
