/* SPDX-License-Identifier: MIT */
/*
 * The S3/OBS client: signs and sends HEAD, ranged GET and ListObjects
 * requests with libcurl, parses listing XML with libxml2, and maps every
 * failure to a negative errno at this one edge.  Protocol facts and their
 * sources: shared/reference/obs-protocol.md (cited as [P §n] below).
 *
 * Thread safety: a client is shared by all threads once created.  Each
 * attempt of a request borrows an easy handle from an internal pool
 * (keep-alive connections are reused), so at most cfg->max_connections
 * requests are on the wire; fewer while the server throttles (see the
 * in-flight cap below); further callers block until a slot is free.  Every
 * request function blocks on the network.
 *
 * Hard weather [P §5]: idempotent requests (all of ours) are retried on
 * transport errors, 408, 429 and 5xx with full-jitter exponential backoff,
 * or after the server's Retry-After, each attempt signed afresh, until
 * cfg->max_retries attempts in a row made no progress or the retry
 * deadline passed; a GET broken midway resumes from its last good byte
 * with If-Match.  429/503 answers halve a client-wide cap on requests in
 * flight, which grows back by one per window of successes (AIMD).  A 403
 * RequestTimeTooSkewed teaches the client the server's clock (from Date).
 * With a refresh callback, temporary credentials are renewed in the
 * background before they expire, and a 403 saying they expired renews
 * them once and retries.
 *
 * Logging: a failed request writes one line naming the operation, bucket,
 * key, HTTP status, S3 error code and request id (404 on HEAD only at debug
 * level: a missing name is an ordinary answer).  Credentials, signatures
 * and Authorization headers are never logged.
 */
#ifndef HOARDFS_CLIENT_H
#define HOARDFS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CLIENT_ETAG_MAX 128 /* an ETag with its quotes, plus NUL */
#define CLIENT_CODE_MAX                                                        \
	64		     /* an S3 error code such as "NoSuchKey", plus NUL \
			      */
#define CLIENT_REQID_MAX 128 /* a request id, plus NUL */

/* Signature scheme [P §2]; only V4 is the default. */
enum client_signature {
	CLIENT_SIG_V4 = 0, /* AWS SigV4 with UNSIGNED-PAYLOAD [P §2.3] */
	CLIENT_SIG_V2,	   /* AWS V2, HMAC-SHA1 [P §2.2] */
	CLIENT_SIG_OBS,	   /* native OBS, HMAC-SHA1 [P §2.1] */
};

/* Access keys; the strings are copied by client_new() and
 * client_set_credentials(). */
struct client_credentials {
	const char *access_key;	    /* AK; required */
	const char *secret_key;	    /* SK; required, never logged */
	const char *security_token; /* temporary token or NULL; never logged */
	int64_t expires_sec; /* epoch seconds when temporary keys stop working;
			      * 0: they do not expire */
};

struct client;

/*
 * A credential refresher: fetch fresh credentials and install them with
 * client_set_credentials(@c, ...).  Called by the client from its own
 * background thread ahead of expiry, and from a request thread when a
 * request was refused for expired credentials; never twice at once.
 * Returns 0, or a negative errno (the old credentials then stay in use).
 */
typedef int (*client_refresh_fn)(void *arg, struct client *c);

struct client_config {
	const char *endpoint; /* "http(s)://host[:port]", no path */
	const char *region;   /* signing region, e.g. "us-east-1" */
	const char *bucket;   /* bucket name */
	int path_style; /* nonzero: http://host/bucket/key; else bucket.host */
	int list_v2; /* nonzero: ListObjectsV2; zero: V1 (OBS PFS lacks V2) */
	enum client_signature signature;
	struct client_credentials creds;
	unsigned max_connections; /* pooled easy handles, >= 1 */
	long connect_timeout_ms;  /* TCP+TLS connect timeout */
	long low_speed_time_sec;  /* abort a transfer under 1 KiB/s this long */
	unsigned max_retries; /* extra tries on transport errors, 408, 429, 5xx
			       * in a row without progress */
	long retry_deadline_ms; /* start no new attempt this long after the
				 * first; <= 0: CLIENT_RETRY_DEADLINE_MS */
	const char *ca_file;	/* CA bundle path or NULL for curl's default */
	int ssl_verify;		/* nonzero: verify the server certificate */
	const char *resolve;	/* "HOST:PORT:ADDRESS" pinned in the DNS cache
				 * (curl's CURLOPT_RESOLVE), or NULL */
	client_refresh_fn refresh; /* renews temporary credentials, or NULL */
	void *refresh_arg;	   /* its argument */
};

/*
 * Retries stop once this much time has passed since a request began: a
 * FUSE reader then gets EIO in bounded time, logged, instead of hanging
 * through an outage.  60 s covers the 8 backoff steps of [P §5] (5 s cap)
 * plus a few throttled Retry-After waits.
 */
#define CLIENT_RETRY_DEADLINE_MS 60000

/* What the server said when a request failed (all fields may be empty). */
struct client_error {
	long http_status;		   /* 0 for a transport error */
	char code[CLIENT_CODE_MAX];	   /* S3 <Code>, or "" */
	char request_id[CLIENT_REQID_MAX]; /* x-amz/x-obs-request-id or "" */
	char message[256]; /* S3 <Message> or curl's error text */
};

/* Attributes of one object, from HEAD or a GET response. */
struct client_object_meta {
	uint64_t size;		    /* whole object size in bytes */
	int64_t mtime_sec;	    /* Last-Modified, seconds since the epoch */
	char etag[CLIENT_ETAG_MAX]; /* quoted, as sent */
};

/* One row of a listing page. */
struct client_list_entry {
	char *name;	   /* the full key or common prefix, decoded; owned */
	int is_prefix;	   /* nonzero for a CommonPrefixes entry */
	uint64_t size;	   /* object size; 0 for a prefix */
	int64_t mtime_sec; /* LastModified; 0 for a prefix */
	char etag[CLIENT_ETAG_MAX]; /* quoted; "" for a prefix */
};

/* One page of ListObjects.  Keys come before prefixes in @v. */
struct client_list_page {
	struct client_list_entry *v; /* owned array of n entries */
	size_t n;
	int truncated; /* nonzero when more pages follow */
	char *next;    /* marker (V1) or continuation token (V2) to pass as
			* @start for the next page; owned; NULL when !truncated */
};

/*
 * Called with consecutive pieces of a GET body.  @off is the object offset
 * of buf[0].  Return 0 to go on or a negative errno to abort the transfer;
 * client_get() then returns that errno.
 */
typedef int (*client_body_fn)(void *arg, uint64_t off, const void *buf,
			      size_t len);

/* What the client did so far (client_get_stats); counters only grow. */
struct client_stats {
	uint64_t requests;	   /* HEAD/GET/LIST calls that sent something */
	uint64_t attempts;	   /* HTTP exchanges, first tries included */
	uint64_t retries;	   /* attempts after a failed one */
	uint64_t resumed;	   /* GET attempts resuming a broken body */
	uint64_t throttled;	   /* 429 and 503 answers */
	uint64_t failed;	   /* requests that failed for good */
	uint64_t refreshes;	   /* credential refreshes run */
	unsigned inflight_cap;	   /* current cap on requests on the wire */
	unsigned inflight_cap_min; /* the lowest it went */
	int64_t clock_offset_sec;  /* server clock minus ours, as learned */
};

/*
 * client_new - validate @cfg and set up the handle pool.  Strings in @cfg
 * are copied.  Returns 0 with *@out owning the client, -EINVAL for a bad
 * endpoint URL, a malformed resolve entry or missing credentials,
 * -ENOMEM.  Sends no request and starts no thread, so the caller may fork
 * afterwards (the refresh thread starts on demand, in the process that
 * makes requests).
 */
int client_new(const struct client_config *cfg, struct client **out)
	__attribute__((warn_unused_result));

/*
 * client_free - wait for no request and for a background credential
 * refresh to end, log one line of statistics (info level), free @c (NULL
 * is a no-op).
 */
void client_free(struct client *c);

/* client_bucket - the bucket name; owned by @c. */
const char *client_bucket(const struct client *c);

/* Kinds of request, as indexes into struct client_op_stats. */
enum client_op_kind {
	CLIENT_KIND_HEAD = 0,
	CLIENT_KIND_GET,
	CLIENT_KIND_LIST,
	CLIENT_KIND_COUNT,
};

/*
 * Requests by kind since client_new(), for status output and metrics.
 * Counters only grow.  attempts counts every HTTP exchange started, first
 * tries and retries alike: what the store sees (and bills).
 */
struct client_op_stats {
	uint64_t attempts[CLIENT_KIND_COUNT]; /* HTTP exchanges started */
	uint64_t retries[CLIENT_KIND_COUNT];  /* attempts after a failed one */
	uint64_t failed[CLIENT_KIND_COUNT];   /* requests that failed for good,
					       * 404 on HEAD included */
	uint64_t get_bytes; /* GET body bytes delivered to callers */
};

/* client_op_stats_get - a snapshot of @c's request counters into *@out.
 * Thread-safe and lock-free (each counter is read atomically). */
void client_op_stats_get(struct client *c, struct client_op_stats *out);

/*
 * client_set_credentials - replace the credentials every later attempt
 * signs with.  The strings are copied; requests already signing keep the
 * old set until their attempt ends (reference counted, wiped when the last
 * user lets go).  When @creds->expires_sec is set and a refresher was
 * configured, the next refresh is due 10 minutes before that time (half
 * the remaining lifetime when that is shorter).  Thread-safe; does not
 * block on the network.  Returns 0, -EINVAL (no access or secret key) or
 * -ENOMEM (the old credentials stay).
 */
int client_set_credentials(struct client *c,
			   const struct client_credentials *creds)
	__attribute__((warn_unused_result));

/* client_get_stats - a snapshot of @c's counters; thread-safe. */
void client_get_stats(struct client *c, struct client_stats *st);

/*
 * client_head - HEAD @key.
 * Returns 0 and fills *@meta, or: -ENOENT (404), -EACCES (403),
 * -ENAMETOOLONG (key over 1024 bytes), -EIO (other status or a bad
 * response), -ETIMEDOUT / -ECONNREFUSED / -EHOSTUNREACH (transport, after
 * retries).  @err, when not NULL, receives the server's details.
 */
int client_head(struct client *c, const char *key,
		struct client_object_meta *meta, struct client_error *err)
	__attribute__((warn_unused_result));

/*
 * client_get - GET bytes [@off, @off + @len) of @key with one Range header
 * and deliver them in order to @fn.  When @if_match is not NULL it is sent
 * as If-Match, so a changed object fails instead of mixing versions.
 * The response must be 206 with a Content-Range for exactly that range (or
 * a 200 with the whole object, of which only the range is delivered) and
 * the body must be complete; a short body is never reported as success.
 * A transfer broken midway is resumed from the last delivered byte, up to
 * cfg->max_retries times.  @len == 0 sends nothing and returns 0.
 * Fills *@meta (when not NULL) from the response.
 * Returns 0, or: -ESTALE (412: the ETag no longer matches), -ENOENT,
 * -EACCES, -ERANGE (416: @off is past the end), -EIO, transport errors as
 * for client_head(), or the errno @fn returned.
 */
int client_get(struct client *c, const char *key, uint64_t off, uint64_t len,
	       const char *if_match, client_body_fn fn, void *arg,
	       struct client_object_meta *meta, struct client_error *err)
	__attribute__((warn_unused_result));

/*
 * client_list - one page of ListObjects (V1 or V2 per the config) with
 * encoding-type=url, for @prefix ("" for the bucket root) and @delimiter
 * (NULL for none), starting after @start (NULL for the first page).
 * @max_keys is capped at 1000 (0 means 1000).  Keys and prefixes are
 * URL-decoded.  While truncated, page->next follows NextMarker when sent,
 * else the larger of the last key and last prefix [P §3].
 * Returns 0 with *@page filled (free with client_list_page_clear()), or
 * -ENOENT (NoSuchBucket), -EACCES, -EIO, transport errors.
 */
int client_list(struct client *c, const char *prefix, const char *delimiter,
		const char *start, unsigned max_keys,
		struct client_list_page *page, struct client_error *err)
	__attribute__((warn_unused_result));

/* client_list_page_clear - free what a page owns; leaves it empty. */
void client_list_page_clear(struct client_list_page *page);

/* Temporary credentials as fetched from a metadata service; owned. */
struct client_temp_credentials {
	char *access_key;     /* AK */
	char *secret_key;     /* SK; never logged */
	char *security_token; /* token; never logged; NULL when none */
	int64_t expires_sec;  /* expires_at as epoch seconds; 0 when absent */
};

/*
 * client_ecs_credentials - fetch the temporary credentials of the IAM
 * agency bound to this ECS/CCE instance [P §6.2]: PUT
 * @base_url/meta-data/latest/api/token for an IMDSv2 token (falling back
 * to a plain GET when that fails), then GET
 * @base_url/openstack/latest/securitykey, up to 3 tries with a 3 s
 * timeout each, never through a proxy.  @base_url is "http://host[:port]"
 * (normally http://169.254.169.254).  Returns 0 with *@out filled (free
 * with client_temp_credentials_clear()), -EHOSTUNREACH when the service
 * cannot be reached (not on ECS), -EACCES (no agency bound: 401), -ENOENT
 * (404), -EIO (bad answer) or -ENOMEM; @err gets one line saying which,
 * never a secret.  Blocks; thread-safe.
 */
int client_ecs_credentials(const char *base_url,
			   struct client_temp_credentials *out, char *err,
			   size_t errlen) __attribute__((warn_unused_result));

/* client_temp_credentials_clear - wipe and free what @t owns. */
void client_temp_credentials_clear(struct client_temp_credentials *t);

/*
 * client_global_init / client_global_cleanup - curl_global_init and
 * xmlInitParser; call once from main before threads start and once at exit.
 * Returns 0 or -EIO.
 */
int client_global_init(void);
void client_global_cleanup(void);

#endif
