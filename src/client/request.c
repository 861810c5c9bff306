// SPDX-License-Identifier: MIT
/*
 * The client's requests (see "Retries" and "Backpressure" in the DESIGN
 * comment of client.c): libcurl callbacks, one signed attempt, its outcome
 * and the retry loop, and the three operations HEAD, ranged GET and
 * ListObjects built on them.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "client/buf.h"
#include "client/client_int.h"
#include "client/listxml.h"
#include "client/resp.h"
#include "client/sigv2.h"
#include "client/sigv4.h"
#include "hoardfs/client.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

static const char *const client_op_names[] = {"HEAD", "GET", "LIST"};

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
		struct client_creds *cr = client_creds_for_attempt(c);
		enum pool_outcome how;
		CURLcode crc = CURLE_OK;
		CURL *h;

		client_log_skew(c);
		gen = cr->gen;
		rc = client_pool_get(c, &h, &epoch);
		if (rc) {
			client_creds_put(c, cr);
			break;
		}
		if (rq->op == CLIENT_OP_GET && rq->done > 0)
			resumed++;
		tries++;
		retry = 0;
		rc = req_attempt(c, h, rq, cr, &crc);
		if (rc == 0)
			rc = req_outcome(rq, crc, &retry, &err);
		client_creds_put(c, cr);
		how = rc == 0				       ? POOL_OK
		      : client_http_throttled(rq->resp.status) ? POOL_THROTTLED
							       : POOL_FAILED;
		client_pool_put(c, h, how, epoch);
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
			if (client_creds_refresh_gapped(c, gen) == 0)
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
