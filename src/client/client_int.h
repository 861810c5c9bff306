/* SPDX-License-Identifier: MIT */
/*
 * Internal shapes of the S3/OBS client, shared by client.c (the handle
 * pool, client_new/free), creds.c (credential sets and their refresh) and
 * request.c (attempts, retries and the three operations).  See the DESIGN
 * comment in client.c.
 */
#ifndef HOARDFS_CLIENT_INT_H
#define HOARDFS_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <curl/curl.h>

#include "client/buf.h"
#include "client/endpoint.h"
#include "client/resp.h"
#include "client/sigv4.h"
#include "hoardfs/client.h"

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

enum pool_outcome {
	POOL_OK,	/* a success: counts towards growing the cap */
	POOL_FAILED,	/* anything else: leaves the cap alone */
	POOL_THROTTLED, /* 429/503: cuts the cap */
};

/* client.c: helpers, and the handle pool with its in-flight cap. */
/* A uniformly distributed 64-bit number (splitmix64); thread-safe. */
uint64_t client_random(struct client *c);
/* Sleep @ms milliseconds. */
void client_sleep_ms(uint64_t ms);
/* Borrow an easy handle, waiting for an in-flight slot; *@epoch is the
 * cap's window when the attempt started.  Returns 0 or -ENOMEM. */
int client_pool_get(struct client *c, CURL **out, uint64_t *epoch);
/* Return @h after an attempt that ended as @how (the AIMD input). */
void client_pool_put(struct client *c, CURL *h, enum pool_outcome how,
		     uint64_t epoch);

/* creds.c: credential sets, reference counted. */
/* Free @cr (its secrets wiped); NULL is a no-op. */
void client_creds_free(struct client_creds *cr);
/* A new set copied from @in into *@out.  Returns 0, -EINVAL, -ENOMEM. */
int client_creds_new(const struct client_credentials *in,
		     struct client_creds **out);
/* Drop a reference taken by client_creds_for_attempt(). */
void client_creds_put(struct client *c, struct client_creds *cr);
/* The set an attempt signs with (a reference), renewing it first when
 * it has expired; NULL when there is none. */
struct client_creds *client_creds_for_attempt(struct client *c);
/* Renew the set of generation @gen now, unless another renewal ran in
 * the last CLIENT_REFRESH_MIN_GAP_MS.  Returns 0 or -errno. */
int client_creds_refresh_gapped(struct client *c, uint64_t gen);

#endif
