/* SPDX-License-Identifier: MIT */
/*
 * The pure parts of handling a response: reading the headers we need,
 * validating a ranged GET (Content-Range against what was asked), the two
 * error mappings (HTTP status + S3 code, and curl codes, each in exactly
 * one function) and the retry policy.  No I/O; thread-safe; unit-tested in
 * test/unit/test_client_resp.c.
 */
#ifndef HOARDFS_CLIENT_RESP_H
#define HOARDFS_CLIENT_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "hoardfs/client.h"

#define CLIENT_BACKOFF_BASE_MS 100  /* first retry waits up to 100 ms */
#define CLIENT_BACKOFF_CAP_MS  5000 /* no backoff step exceeds 5 s */
#define CLIENT_RETRY_AFTER_MAX_SEC                                             \
	20 /* a server's Retry-After is honoured up to 20 s, so that one       \
	      throttled request cannot stall a FUSE thread for minutes */

/* The headers of one response that the client acts on. */
struct client_resp {
	long status;		/* from the status line; 0 before one */
	int64_t content_length; /* Content-Length, -1 when absent */
	int64_t last_modified;	/* Last-Modified, epoch sec; -1 absent/bad */
	long retry_after_sec;	/* Retry-After in seconds, -1 when absent */
	int64_t date_sec;	/* Date (server clock), epoch sec; -1 absent */
	int bad;		/* nonzero: a needed header was malformed */
	char etag[CLIENT_ETAG_MAX];	   /* ETag as sent (quoted), or "" */
	char content_range[128];	   /* Content-Range value, or "" */
	char request_id[CLIENT_REQID_MAX]; /* x-amz- or x-obs-request-id */
};

/* client_resp_reset - forget everything; ready for a new response. */
void client_resp_reset(struct client_resp *r);

/*
 * client_resp_header - feed one raw header line of @len bytes (as
 * libcurl's header callback gives it, CRLF included or not).  Names are
 * matched case-insensitively.  A status line ("HTTP/1.1 206 ...") starts a
 * new response and resets what an earlier (1xx) one set.
 */
void client_resp_header(struct client_resp *r, const char *line, size_t len);

/* A parsed "Content-Range: bytes first-last/total". */
struct client_content_range {
	uint64_t first; /* first byte offset in the object */
	uint64_t last;	/* last byte offset, inclusive */
	uint64_t total; /* whole object size */
};

/*
 * client_content_range_parse - parse "bytes a-b/total" (case-insensitive
 * unit, optional spaces).  Requires a <= b < total; an unknown total
 * ("*") is refused because the object size is needed.
 * Returns 0 or -EIO.
 */
int client_content_range_parse(const char *v, struct client_content_range *cr)
	__attribute__((warn_unused_result));

/* What to do with a GET body; see client_get_plan(). */
struct client_get_plan {
	uint64_t skip;	  /* body bytes to discard before delivering */
	uint64_t deliver; /* bytes to deliver, object offsets [off, +deliver) */
	int64_t body_len; /* body length the server announced, -1 unknown */
	uint64_t size;	  /* whole object size */
};

/*
 * client_get_plan - validate the answer to "Range: bytes=@off-(@off+@len-1)"
 * (@len >= 1) and say which body bytes to deliver.
 *
 * 206: Content-Range "bytes a-b/total" is required, with a == @off and
 *   b == min(@off + @len, total) - 1: the server clamps a range that runs
 *   past the end, so an object shorter than @off + @len yields fewer
 *   bytes, deliver = b - a + 1 < @len, and size = total tells the caller
 *   why.  Content-Length, when sent, must equal b - a + 1.
 * 200: the server ignored the Range and sends the whole object; Content-
 *   Length (required) is its size.  skip = @off, deliver = min(@len,
 *   size - @off).  @off >= size gives -ERANGE, as a 416 would.
 * Anything else, or inconsistent headers: -EIO.
 * Returns 0 with *@plan filled, -ERANGE or -EIO.
 */
int client_get_plan(long status, const char *content_range,
		    int64_t content_length, uint64_t off, uint64_t len,
		    struct client_get_plan *plan)
	__attribute__((warn_unused_result));

/*
 * client_map_http - the one mapping from a failed HTTP answer (status and
 * S3 error code, "" when unknown) to a negative errno:
 * 404 -ENOENT; 401, 403 -EACCES (403 InvalidObjectState: -EIO, the object
 * is archived); 412 -ESTALE; 416 -ERANGE; 400 -EINVAL (-EIO for HEAD,
 * whose 400 carries no code; KeyTooLongError -ENAMETOOLONG); 501
 * -ENOTSUP; 408, 429, other 5xx and anything else -EIO.
 */
int client_map_http(int is_head, long status, const char *code);

/*
 * client_map_curl - the one mapping from a libcurl CURLcode to a negative
 * errno: could not connect -ECONNREFUSED; could not resolve -EHOSTUNREACH;
 * timeouts (including the low-speed limit) -ETIMEDOUT; out of memory
 * -ENOMEM; everything else -EIO.  0 for CURLE_OK.
 */
int client_map_curl(int curl_code);

/* client_http_retryable - nonzero for 408, 429, 500, 502, 503, 504. */
int client_http_retryable(long status);

/*
 * client_curl_retryable - nonzero for transport failures worth another
 * try (connection, DNS, timeouts, broken transfers); zero for local or
 * permanent ones (bad URL, certificate rejected, out of memory).
 */
int client_curl_retryable(int curl_code);

/* client_http_throttled - nonzero for 429 and 503: the server asks us to
 * slow down, so the in-flight cap is cut [P §5, H-limits]. */
int client_http_throttled(long status);

/*
 * client_creds_rejected - nonzero when a failed answer says the
 * credentials themselves are no longer good, so that temporary ones are
 * worth refreshing once [P §5, §9.6]: status 400, 401 or 403 with code
 * ExpiredToken, TokenRefreshRequired, InvalidToken, InvalidAccessKeyId
 * or SignatureDoesNotMatch (a rotated secret), and a 403 to HEAD, which
 * carries no code.  AccessDenied is a policy answer and is not included.
 */
int client_creds_rejected(int is_head, long status, const char *code);

/*
 * client_clock_skewed - nonzero when a failed answer says our clock is
 * off [P §2.1, §5]: 403 RequestTimeTooSkewed, or a 403 without a code
 * (HEAD) whose Date is more than CLIENT_SKEW_GUESS_SEC from @local_sec.
 * @server_sec is the Date header, -1 when absent.
 */
int client_clock_skewed(long status, const char *code, int64_t server_sec,
			int64_t local_sec);

/* A HEAD 403 is taken for a skew error when the clocks differ this much
 * (OBS and S3 allow 15 minutes; 5 leave room for honest drift). */
#define CLIENT_SKEW_GUESS_SEC 300

/*
 * client_refresh_at - when to renew credentials that expire at @expires
 * (epoch sec), installed at @now: 10 minutes before, as the OBS SDK and
 * Terraform do [P §6.2], or half-way when they live less than 20 minutes.
 * 0 when @expires is 0 (they never expire).
 */
int64_t client_refresh_at(int64_t now, int64_t expires);

#define CLIENT_REFRESH_MARGIN_SEC 600

/*
 * client_backoff_ms - the wait before retry number @attempt (0 for the
 * first retry): "full jitter", uniform in [0, min(cap, base * 2^attempt)]
 * with @rnd a uniformly random 64-bit number.
 */
uint64_t client_backoff_ms(unsigned attempt, uint64_t rnd);

#endif
