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
#include <inttypes.h>
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
#include "client/endpoint.h"
#include "client/listxml.h"
#include "client/resp.h"
#include "client/sigv2.h"
#include "client/sigv4.h"
#include "hoardfs/client.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

/* libcurl's receive buffer for GETs.  The default 16 KiB means a body
 * callback (and a pwrite into the cache file) per 16 KiB; 256 KiB cuts
 * that sixteen-fold for 5 MiB of memory over 20 handles. */
#define CLIENT_RECV_BUFFER_BYTES (256 * 1024)
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
/* Connect failures retried before the endpoint has ever answered. */
#define CLIENT_FIRST_RETRIES 2
/* A failed background refresh is tried again after this long. */
#define CLIENT_REFRESH_RETRY_MS 30000
/* Rejections within this long of a refresh do not trigger another. */
#define CLIENT_REFRESH_MIN_GAP_MS 1000

#ifndef HOARDFS_VERSION
#define HOARDFS_VERSION "0"
#endif

/*
 * One set of credentials.  Immutable once installed; freed (secrets
 * wiped) when the last reference goes: one for c->creds while current,
 * one per attempt signing with it.
 */
struct client_creds {
	unsigned refs;	     /* c->cred_lock */
	char *access_key;    /* AK */
	char *secret_key;    /* SK; never logged; wiped at free */
	char *token;	     /* security token or NULL; wiped at free */
	int64_t expires_sec; /* when they stop working; 0 never */
	int64_t refresh_sec; /* renew from this time on; 0 never */
	uint64_t gen;	     /* 1 for the first set, +1 per install */
};

/*
 * Invariants: n_idle <= n_created <= max; n_created - n_idle handles are
 * busy; idle[0..n_idle) are initialised easy handles; 1 <= cap <= max;
 * in_flight <= cap except right after a cut.
 */
struct client {
	char *bucket;	     /* bucket name */
	char *region;	     /* signing region (configured or derived) */
	char *authority;     /* Host header value: [bucket.]host[:port] */
	char *base_url;	     /* "http(s)://" + authority */
	char *bucket_prefix; /* "/bucket" with path style, else "" */
	char *ca_file;	     /* CA bundle or NULL */
	struct curl_slist *resolve; /* CURLOPT_RESOLVE entries or NULL */
	struct client_endpoint ep;  /* the parsed endpoint */
	enum client_signature sig;  /* signing scheme */
	int path_style;		    /* nonzero: bucket in the path */
	int list_v2;		    /* nonzero: ListObjectsV2 */
	int ssl_verify;		    /* verify peer and host name */
	long connect_timeout_ms;    /* CURLOPT_CONNECTTIMEOUT_MS; 0 default */
	long low_speed_time_sec;    /* stall limit, always > 0 */
	unsigned max_retries;	    /* failed attempts in a row, no progress */
	long retry_deadline_ms;	    /* no new attempt after this, > 0 */
	uint64_t rng;		    /* jitter state, updated atomically */
	_Atomic int64_t clock_offset_sec; /* server clock - ours, learned */
	_Atomic int64_t skew_logged_sec;  /* offset last logged */
	atomic_int answered;		  /* the server has answered once */
	CURLSH *share;			  /* DNS cache and TLS sessions */
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST]; /* one per kind */
	int share_locks_ready;	   /* mutexes initialised */
	pthread_mutex_t lock;	   /* guards the pool fields below */
	pthread_cond_t cond;	   /* a handle or slot was returned */
	int pool_ready;		   /* lock and cond initialised */
	CURL **idle;		   /* free handles, max of them allocated */
	unsigned n_idle;	   /* handles in idle[] */
	unsigned n_created;	   /* handles that exist, idle or busy */
	unsigned max;		   /* max_connections */
	unsigned cap;		   /* lock: AIMD cap on attempts on the wire */
	unsigned in_flight;	   /* lock: attempts on the wire */
	unsigned ok_streak;	   /* lock: successes since the cap changed */
	uint64_t cut_epoch;	   /* lock: cuts so far; see DESIGN */
	struct client_stats stats; /* lock: counters */
	/* credentials; see DESIGN */
	pthread_mutex_t cred_lock;  /* guards the fields below */
	pthread_cond_t cred_cond;   /* a refresh ended */
	int cred_ready;		    /* cred_lock and cred_cond initialised */
	struct client_creds *creds; /* cred_lock: the current set */
	uint64_t cred_gen;	    /* cred_lock: sets installed so far */
	client_refresh_fn refresh;  /* immutable: renews credentials or NULL */
	void *refresh_arg;	    /* immutable: its argument */
	int refresh_busy;	    /* cred_lock: a refresh is running */
	pid_t refresh_pid;	    /* cred_lock: the process running it */
	int64_t refresh_done_ms;    /* cred_lock: mono time the last ended */
	int64_t refresh_retry_ms;   /* cred_lock: no background try before */
	pthread_t refresher;	    /* background refresh thread */
	int refresher_started;	    /* cred_lock: refresher must be joined */
	pid_t refresher_pid;	    /* cred_lock: the process that started it */

	struct client_op_stats ops; /* by kind, updated atomically */
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

/*
 * The access key as logs show it: its first four characters, enough to
 * tell two key sets apart.  An AK alone grants nothing, but logs travel
 * further than the host, so less is better.
 */
static const char *client_key_hint(const char *ak, char out[16])
{
	snprintf(out, 16, "%.4s...", ak);
	return out;
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

/* ---- the handle pool and the in-flight cap ----------------------------- */

/* How an attempt ended, for the AIMD cap. */
enum pool_outcome {
	POOL_OK,	/* a success: counts towards growing the cap */
	POOL_FAILED,	/* anything else: leaves the cap alone */
	POOL_THROTTLED, /* 429/503: cuts the cap */
};

/*
 * Borrow a handle and an in-flight slot, waiting while the cap is reached
 * or all max handles are busy.  *@epoch receives the cut epoch the attempt
 * starts in (see DESIGN).
 */
static int pool_get(struct client *c, CURL **out, uint64_t *epoch)
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
static void pool_put(struct client *c, CURL *h, enum pool_outcome how,
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

/* ---- credentials -------------------------------------------------------- */

static void creds_free(struct client_creds *cr)
{
	if (!cr)
		return;
	free(cr->access_key);
	client_free_secret(cr->secret_key);
	client_free_secret(cr->token);
	free(cr);
}

/* A new set from @in (trimmed copies, as the OBS SDK trims [P §2.5]). */
static int creds_new(const struct client_credentials *in,
		     struct client_creds **out)
{
	struct client_creds *cr;

	*out = NULL;
	if (!in->access_key || !in->access_key[0] || !in->secret_key ||
	    !in->secret_key[0])
		return -EINVAL;
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	cr->refs = 1;
	cr->access_key = client_strdup_trim(in->access_key);
	cr->secret_key = client_strdup_trim(in->secret_key);
	if (in->security_token && in->security_token[0])
		cr->token = client_strdup_trim(in->security_token);
	if (!cr->access_key || !cr->secret_key ||
	    (in->security_token && in->security_token[0] && !cr->token)) {
		creds_free(cr);
		return -ENOMEM;
	}
	cr->expires_sec = in->expires_sec > 0 ? in->expires_sec : 0;
	cr->refresh_sec = client_refresh_at(util_now_sec(), cr->expires_sec);
	*out = cr;
	return 0;
}

/* A reference to the current set. */
static struct client_creds *creds_get(struct client *c)
{
	struct client_creds *cr;

	pthread_mutex_lock(&c->cred_lock);
	cr = c->creds;
	cr->refs++;
	pthread_mutex_unlock(&c->cred_lock);
	return cr;
}

static void creds_put(struct client *c, struct client_creds *cr)
{
	int last;

	if (!cr)
		return;
	pthread_mutex_lock(&c->cred_lock);
	last = --cr->refs == 0;
	pthread_mutex_unlock(&c->cred_lock);
	if (last)
		creds_free(cr);
}

int client_set_credentials(struct client *c,
			   const struct client_credentials *creds)
{
	struct client_creds *cr, *old;
	char hint[16];
	int rc;

	rc = creds_new(creds, &cr);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->cred_lock);
	cr->gen = ++c->cred_gen;
	old = c->creds;
	c->creds = cr;
	pthread_mutex_unlock(&c->cred_lock);
	creds_put(c, old);
	if (cr->expires_sec)
		log_info("client: credentials with access key %s installed, "
			 "valid for %" PRId64 " s",
			 client_key_hint(cr->access_key, hint),
			 cr->expires_sec - util_now_sec());
	return 0;
}

/*
 * Run the refresher now, unless another refresh is running (then wait for
 * it) or the credentials changed since the caller signed with set @gen
 * (then there is nothing to do).  Returns 0 when a set newer than @gen is
 * installed on return, else a negative errno.
 */
static int creds_refresh(struct client *c, uint64_t gen)
{
	int rc;

	pthread_mutex_lock(&c->cred_lock);
	for (;;) {
		if (c->cred_gen != gen) {
			pthread_mutex_unlock(&c->cred_lock);
			return 0;
		}
		/* A refresh "running" in the parent of a fork is not. */
		if (!c->refresh_busy || c->refresh_pid != getpid())
			break;
		pthread_cond_wait(&c->cred_cond, &c->cred_lock);
	}
	c->refresh_busy = 1;
	c->refresh_pid = getpid();
	pthread_mutex_unlock(&c->cred_lock);

	rc = c->refresh(c->refresh_arg, c);

	pthread_mutex_lock(&c->cred_lock);
	c->refresh_busy = 0;
	c->refresh_done_ms = util_mono_ms();
	if (rc == 0 && c->cred_gen == gen)
		rc = -EACCES; /* the refresher installed nothing */
	pthread_cond_broadcast(&c->cred_cond);
	pthread_mutex_unlock(&c->cred_lock);
	pthread_mutex_lock(&c->lock);
	c->stats.refreshes++;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_warn("client: refreshing the credentials failed (%s); "
			 "keeping the current ones",
			 strerror(-rc));
	return rc;
}

/* The background refresh thread: one refresh, then it ends. */
static void *creds_refresher_main(void *arg)
{
	struct client *c = arg;
	uint64_t gen;
	int rc;

	pthread_mutex_lock(&c->cred_lock);
	gen = c->cred_gen;
	pthread_mutex_unlock(&c->cred_lock);
	rc = creds_refresh(c, gen);
	/* After a failure, do not hammer the metadata service: wait a while.
	 * Until here the claim taken by the starter keeps others out. */
	pthread_mutex_lock(&c->cred_lock);
	c->refresh_retry_ms = rc ? util_mono_ms() + CLIENT_REFRESH_RETRY_MS : 0;
	pthread_mutex_unlock(&c->cred_lock);
	return NULL;
}

/* Start the background refresh unless one runs or failed recently. */
static void creds_refresh_in_background(struct client *c)
{
	pthread_t old;
	int join = 0;

	pthread_mutex_lock(&c->cred_lock);
	if ((c->refresh_busy && c->refresh_pid == getpid()) ||
	    util_mono_ms() < c->refresh_retry_ms) {
		pthread_mutex_unlock(&c->cred_lock);
		return;
	}
	if (c->refresher_started && c->refresher_pid == getpid()) {
		old = c->refresher; /* finished: its refresh is not busy */
		join = 1;
	}
	c->refresher_started = 0;
	/* Claim the slot so that no other caller starts a thread too. */
	c->refresh_retry_ms = util_mono_ms() + CLIENT_REFRESH_RETRY_MS;
	pthread_mutex_unlock(&c->cred_lock);
	if (join)
		pthread_join(old, NULL);
	pthread_mutex_lock(&c->cred_lock);
	if (pthread_create(&c->refresher, NULL, creds_refresher_main, c) == 0) {
		c->refresher_started = 1;
		c->refresher_pid = getpid();
	}
	pthread_mutex_unlock(&c->cred_lock);
}

/*
 * Set @gen is no good (expired, or refused by the server): renew it now,
 * unless that was just tried (a refresh that ended less than
 * CLIENT_REFRESH_MIN_GAP_MS ago with no newer set would only ask a failing
 * metadata service again).  Returns 0 when a newer set is there.
 */
static int creds_refresh_gapped(struct client *c, uint64_t gen)
{
	int recent;

	pthread_mutex_lock(&c->cred_lock);
	recent =
		c->cred_gen == gen && c->refresh_done_ms &&
		util_mono_ms() - c->refresh_done_ms < CLIENT_REFRESH_MIN_GAP_MS;
	pthread_mutex_unlock(&c->cred_lock);
	if (recent)
		return -EACCES;
	return creds_refresh(c, gen);
}

/*
 * The set an attempt signs with.  Past its refresh time a background
 * refresh starts; past its expiry the caller waits for a refresh.
 */
static struct client_creds *creds_for_attempt(struct client *c)
{
	struct client_creds *cr = creds_get(c);
	char hint[16];
	int64_t now;

	if (!c->refresh || !cr->refresh_sec)
		return cr;
	now = util_now_sec();
	if (now < cr->refresh_sec)
		return cr;
	if (now < cr->expires_sec) {
		creds_refresh_in_background(c);
		return cr;
	}
	log_info("client: credentials with access key %s expired; renewing",
		 client_key_hint(cr->access_key, hint));
	(void)creds_refresh_gapped(c, cr->gen);
	creds_put(c, cr);
	return creds_get(c);
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
	rc = creds_new(&cfg->creds, &c->creds);
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
		creds_free(c->creds); /* no attempt holds a reference now */
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
 * Build and sign this attempt's headers with a fresh date and credential
 * set @cr.  Signed: Host, the date header, the token and (V4)
 * x-amz-content-sha256 and Range.  The token header follows the scheme:
 * x-obs-security-token for OBS, x-amz-security-token for V2 and V4
 * [P §2.5].  If-Match travels unsigned, which every scheme allows.
 */
static int req_headers(struct client *c, struct client_req *rq,
		       const struct client_creds *cr, struct curl_slist **out)
{
	struct client_sig_header sh[6];
	char date[CLIENT_HTTP_DATE_LEN + 1], range[64];
	const char *if_match = rq->if_match;
	char *auth = NULL, *sts = NULL, *resource = NULL;
	struct curl_slist *list = NULL;
	/* The server's clock, as far as we know it (B28). */
	int64_t now = util_now_sec() + atomic_load(&c->clock_offset_sec);
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
		if (cr->token)
			sh[n++] = (struct client_sig_header){
				"x-amz-security-token", cr->token};
		struct client_sigv4_request r = {
			.method = rq->op == CLIENT_OP_HEAD ? "HEAD" : "GET",
			.path = rq->path,
			.params = rq->params,
			.n_params = rq->n_params,
			.headers = sh,
			.n_headers = n,
			.payload_hash = CLIENT_UNSIGNED_PAYLOAD,
		};
		rc = client_sigv4_authorization(&r, cr->access_key,
						cr->secret_key, c->region, date,
						NULL, &auth);
	} else {
		int obs = c->sig == CLIENT_SIG_OBS;
		char sig[CLIENT_SIGV2_SIG_LEN + 1];

		client_http_date(now, date);
		sh[n++] = (struct client_sig_header){
			obs ? "x-obs-date" : "x-amz-date", date};
		if (cr->token)
			sh[n++] = (struct client_sig_header){
				obs ? "x-obs-security-token"
				    : "x-amz-security-token",
				cr->token};
		rc = client_sigv2_resource(c->bucket, rq->resource_key,
					   rq->params, rq->n_params, &resource);
		if (rc == 0)
			rc = client_sigv2_string_to_sign(
				rq->op == CLIENT_OP_HEAD ? "HEAD" : "GET", NULL,
				NULL, "", sh, n, obs ? "x-obs-" : "x-amz-",
				resource, &sts);
		if (rc == 0)
			rc = client_sigv2_signature(cr->secret_key, sts, sig);
		if (rc == 0 && asprintf(&auth, "%s %s:%s", obs ? "OBS" : "AWS",
					cr->access_key, sig) < 0) {
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
	if (c->resolve)
		SET(CURLOPT_RESOLVE, c->resolve);
	SET(CURLOPT_SSL_VERIFYPEER, c->ssl_verify ? 1L : 0L);
	SET(CURLOPT_SSL_VERIFYHOST, c->ssl_verify ? 2L : 0L);
	SET(CURLOPT_HEADERFUNCTION, hdr_cb);
	SET(CURLOPT_HEADERDATA, rq);
	SET(CURLOPT_WRITEFUNCTION, body_cb);
	SET(CURLOPT_WRITEDATA, rq);
	if (rq->op == CLIENT_OP_GET)
		SET(CURLOPT_BUFFERSIZE, (long)CLIENT_RECV_BUFFER_BYTES);
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
		       const struct client_creds *cr, CURLcode *crc)
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

	rc = req_headers(c, rq, cr, &headers);
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
			    unsigned tries, int64_t elapsed_ms,
			    const char *stop)
{
	enum log_level level = LOG_LEVEL_ERROR;
	char range[64] = "", after[160] = "";

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
	if (tries > 1 || stop)
		snprintf(after, sizeof(after),
			 " after %u tries in %" PRId64 " ms%s%s", tries,
			 elapsed_ms, stop ? ": " : "", stop ? stop : "");
	if (err->http_status)
		log_msg(level,
			"%s s3://%s/%s%s: %ld %s request-id=%s: %s (%s)%s",
			client_op_names[rq->op], c->bucket, rq->key, range,
			err->http_status, err->code[0] ? err->code : "-",
			err->request_id[0] ? err->request_id : "-",
			err->message[0] ? err->message : "-", strerror(-rc),
			after);
	else
		log_msg(level, "%s s3://%s/%s%s: %s (%s)%s",
			client_op_names[rq->op], c->bucket, rq->key, range,
			err->message[0] ? err->message : "-", strerror(-rc),
			after);
}

/*
 * How long to wait before a retry after @fails failed attempts in a row
 * (>= 1; 1 also after a failure that made progress): full-jitter backoff,
 * on top of the server's Retry-After (capped) when it sent one, so that
 * the clients it throttled at once do not all come back at once.
 */
static uint64_t req_wait_ms(struct client *c, const struct client_req *rq,
			    unsigned fails)
{
	long sec = rq->resp.retry_after_sec;
	uint64_t ms =
		client_backoff_ms(fails ? fails - 1 : 0, client_random(c));

	if (sec < 0)
		return ms;
	if (sec > CLIENT_RETRY_AFTER_MAX_SEC)
		sec = CLIENT_RETRY_AFTER_MAX_SEC;
	return (uint64_t)sec * 1000 + ms;
}

/* Count @rq by kind once it ended after @tries attempts, each an HTTP
 * exchange the store saw (no lock: atomics). */
static void client_count(struct client *c, const struct client_req *rq, int rc,
			 unsigned tries)
{
	__atomic_add_fetch(&c->ops.attempts[rq->op], tries, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->ops.retries[rq->op], tries > 1 ? tries - 1 : 0,
			   __ATOMIC_RELAXED);
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
 * The server said our clock is off: adopt its Date for every later
 * signature.  The warning is written by client_log_skew(), at the first
 * attempt that can log (the mount probe runs with logging muted).
 */
static void client_learn_clock(struct client *c, int64_t server_sec)
{
	atomic_store(&c->clock_offset_sec, server_sec - util_now_sec());
}

/* Log a newly learned clock offset once (again only if it moves > 60 s). */
static void client_log_skew(struct client *c)
{
	int64_t off = atomic_load(&c->clock_offset_sec);
	int64_t logged = atomic_load(&c->skew_logged_sec);

	if ((logged == INT64_MIN && off == 0) ||
	    (logged != INT64_MIN && llabs(off - logged) <= 60) ||
	    !log_enabled(LOG_LEVEL_WARN) ||
	    !atomic_compare_exchange_strong(&c->skew_logged_sec, &logged, off))
		return;
	log_warn("client: RequestTimeTooSkewed: the clock of %s is %+" PRId64
		 " s from this host's; signing every request with the "
		 "server's time from now on (fix this host's clock, e.g. "
		 "with NTP)",
		 c->ep.host, off);
}

/*
 * Run @rq: one attempt after another until one succeeds, the failure is
 * final, or the retry budget is spent (see DESIGN).  Each attempt takes
 * its own handle, slot and credential set, and gives them back before any
 * sleep.
 */
static int req_run(struct client *c, struct client_req *rq,
		   struct client_error *err_out)
{
	struct client_error err;
	unsigned tries = 0, fails = 0, resumed = 0;
	int skew_retried = 0, creds_retried = 0, rc = 0, retry;
	int64_t t0 = util_mono_ms(), t_progress = t0;
	const char *stop = NULL;

	memset(&err, 0, sizeof(err));
	for (;;) {
		uint64_t wait_ms, epoch, done_before = rq->done, gen;
		struct client_creds *cr = creds_for_attempt(c);
		enum pool_outcome how;
		CURLcode crc = CURLE_OK;
		CURL *h;

		client_log_skew(c);
		gen = cr->gen;
		rc = pool_get(c, &h, &epoch);
		if (rc) {
			creds_put(c, cr);
			break;
		}
		if (rq->op == CLIENT_OP_GET && rq->done > 0)
			resumed++;
		tries++;
		retry = 0;
		rc = req_attempt(c, h, rq, cr, &crc);
		if (rc == 0)
			rc = req_outcome(rq, crc, &retry, &err);
		creds_put(c, cr);
		how = rc == 0				       ? POOL_OK
		      : client_http_throttled(rq->resp.status) ? POOL_THROTTLED
							       : POOL_FAILED;
		pool_put(c, h, how, epoch);
		if (rq->resp.status)
			atomic_store(&c->answered, 1);
		if (rc == 0)
			break;
		if (rq->resp.status && !skew_retried &&
		    client_clock_skewed(
			    rq->resp.status, err.code, rq->resp.date_sec,
			    util_now_sec() +
				    atomic_load(&c->clock_offset_sec)) &&
		    rq->resp.date_sec > 0) {
			/* Re-sign at once with the server's clock (B28). */
			skew_retried = 1;
			client_learn_clock(c, rq->resp.date_sec);
			continue;
		}
		if (c->refresh && !creds_retried &&
		    client_creds_rejected(rq->op == CLIENT_OP_HEAD,
					  rq->resp.status, err.code)) {
			creds_retried = 1;
			log_info("%s s3://%s/%s: %ld %s: renewing the "
				 "credentials and trying again",
				 client_op_names[rq->op], c->bucket, rq->key,
				 rq->resp.status, err.code[0] ? err.code : "-");
			if (creds_refresh_gapped(c, gen) == 0)
				continue;
		}
		if (!retry)
			break;
		if (rq->done > done_before) {
			fails = 0; /* progress: resume, the budget starts over
				    */
			t_progress = util_mono_ms();
		}
		fails++;
		if (c->max_retries == 0 || fails > c->max_retries) {
			stop = "retries exhausted";
			break;
		}
		/* An endpoint that never answered is more likely wrong than
		 * down: say so in seconds, not after the whole budget. */
		if (!atomic_load(&c->answered) &&
		    fails > CLIENT_FIRST_RETRIES &&
		    (crc == CURLE_COULDNT_CONNECT ||
		     crc == CURLE_COULDNT_RESOLVE_HOST)) {
			stop = "the endpoint never answered";
			break;
		}
		wait_ms = req_wait_ms(c, rq, fails);
		if (util_mono_ms() + (int64_t)wait_ms - t_progress >
		    c->retry_deadline_ms) {
			stop = "retry deadline passed";
			break;
		}
		log_debug("%s s3://%s/%s: %s, %" PRIu64
			  " bytes in; retry %u in %" PRIu64 " ms",
			  client_op_names[rq->op], c->bucket, rq->key,
			  err.message[0] ? err.message : strerror(-rc),
			  rq->done - done_before, tries, wait_ms);
		client_sleep_ms(wait_ms);
	}
	pthread_mutex_lock(&c->lock);
	c->stats.requests++;
	c->stats.retries += tries > 1 ? tries - 1 : 0;
	c->stats.resumed += resumed;
	if (rc)
		c->stats.failed++;
	pthread_mutex_unlock(&c->lock);
	client_count(c, rq, rc, tries);
	if (rc) {
		if (!err.message[0] && rc == -ENOMEM)
			snprintf(err.message, sizeof(err.message),
				 "out of memory");
		req_log_failure(c, rq, rc, &err, tries, util_mono_ms() - t0,
				stop);
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
