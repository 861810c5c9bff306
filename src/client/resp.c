// SPDX-License-Identifier: MIT
/*
 * Response handling without I/O: header parsing, ranged-GET validation,
 * the HTTP and curl error mappings and the retry policy (see resp.h).
 * Keeping these pure lets the unit tests pin every rule down without a
 * server; client.c only wires them to libcurl.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "client/resp.h"
#include "hoardfs/util.h"

void client_resp_reset(struct client_resp *r)
{
	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	r->last_modified = -1;
	r->retry_after_sec = -1;
	r->date_sec = -1;
}

/* Strict decimal into *@out; -1 for empty, non-digits or overflow. */
static int resp_parse_i64(const char *s, size_t len, int64_t *out)
{
	int64_t v = 0;

	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9' ||
		    v > (INT64_MAX - (s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Copy @len bytes into a field of @size; nonzero when they do not fit. */
static int resp_copy(char *field, size_t size, const char *v, size_t len)
{
	if (len >= size)
		return -1;
	memcpy(field, v, len);
	field[len] = '\0';
	return 0;
}

void client_resp_header(struct client_resp *r, const char *line, size_t len)
{
	const char *colon, *v;
	size_t nlen, vlen;
	char tmp[128];

	while (len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
		len--;
	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', len);
		long status = 0;

		client_resp_reset(r);
		for (const char *p = sp ? sp + 1 : line + len;
		     p < line + len && *p >= '0' && *p <= '9'; p++)
			status = status * 10 + (*p - '0');
		r->status = status;
		return;
	}
	colon = memchr(line, ':', len);
	if (!colon)
		return;
	nlen = (size_t)(colon - line);
	while (nlen && (line[nlen - 1] == ' ' || line[nlen - 1] == '\t'))
		nlen--;
	v = colon + 1;
	vlen = len - (size_t)(v - line);
	while (vlen && (*v == ' ' || *v == '\t')) {
		v++;
		vlen--;
	}
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;

#define RESP_IS(name)                                                          \
	(nlen == strlen(name) && strncasecmp(line, name, nlen) == 0)
	if (RESP_IS("content-length")) {
		if (resp_parse_i64(v, vlen, &r->content_length))
			r->bad = 1;
	} else if (RESP_IS("etag")) {
		if (resp_copy(r->etag, sizeof(r->etag), v, vlen))
			r->bad = 1;
	} else if (RESP_IS("content-range")) {
		if (resp_copy(r->content_range, sizeof(r->content_range), v,
			      vlen))
			r->bad = 1;
	} else if (RESP_IS("x-amz-request-id") || RESP_IS("x-obs-request-id")) {
		if (vlen >= sizeof(r->request_id))
			vlen = sizeof(r->request_id) - 1;
		(void)resp_copy(r->request_id, sizeof(r->request_id), v, vlen);
	} else if (RESP_IS("last-modified") || RESP_IS("retry-after") ||
		   RESP_IS("date")) {
		int64_t secs;
		time_t t;

		if (resp_copy(tmp, sizeof(tmp), v, vlen))
			return;
		if (RESP_IS("retry-after")) {
			if (resp_parse_i64(v, vlen, &secs) == 0) {
				r->retry_after_sec =
					(long)(secs > 86400 ? 86400 : secs);
			} else if ((t = curl_getdate(tmp, NULL)) != -1) {
				secs = (int64_t)t - util_now_sec();
				r->retry_after_sec =
					secs < 0 ? 0
						 : (long)(secs > 86400 ? 86400
								       : secs);
			}
			return;
		}
		t = curl_getdate(tmp, NULL);
		if (RESP_IS("date"))
			r->date_sec = t == -1 ? -1 : (int64_t)t;
		else
			r->last_modified = t == -1 ? -1 : (int64_t)t;
	}
#undef RESP_IS
}

/* Skip spaces and tabs. */
static const char *resp_skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Parse an unsigned decimal at *@s and advance; -1 when there is none. */
static int resp_u64(const char **s, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*s = p;
	*out = v;
	return 0;
}

int client_content_range_parse(const char *v, struct client_content_range *cr)
{
	const char *p = resp_skip_ws(v);

	if (strncasecmp(p, "bytes", 5) != 0)
		return -EIO;
	p = resp_skip_ws(p + 5);
	if (resp_u64(&p, &cr->first) != 0)
		return -EIO;
	p = resp_skip_ws(p);
	if (*p++ != '-')
		return -EIO;
	p = resp_skip_ws(p);
	if (resp_u64(&p, &cr->last) != 0)
		return -EIO;
	p = resp_skip_ws(p);
	if (*p++ != '/')
		return -EIO;
	p = resp_skip_ws(p);
	if (resp_u64(&p, &cr->total) != 0)
		return -EIO;
	p = resp_skip_ws(p);
	if (*p != '\0' || cr->first > cr->last || cr->last >= cr->total)
		return -EIO;
	return 0;
}

int client_get_plan(long status, const char *content_range,
		    int64_t content_length, uint64_t off, uint64_t len,
		    struct client_get_plan *plan)
{
	struct client_content_range cr;
	uint64_t end; /* one past the last requested byte */

	memset(plan, 0, sizeof(*plan));
	if (len == 0)
		return -EIO;
	end = len > UINT64_MAX - off ? UINT64_MAX : off + len;
	if (status == 206) {
		if (!content_range ||
		    client_content_range_parse(content_range, &cr) != 0)
			return -EIO;
		if (cr.first != off ||
		    cr.last != (end < cr.total ? end : cr.total) - 1)
			return -EIO;
		plan->deliver = cr.last - cr.first + 1;
		if (content_length >= 0 &&
		    (uint64_t)content_length != plan->deliver)
			return -EIO;
		plan->skip = 0;
		plan->body_len = (int64_t)plan->deliver;
		plan->size = cr.total;
		return 0;
	}
	if (status == 200) {
		if (content_length < 0)
			return -EIO;
		plan->size = (uint64_t)content_length;
		plan->body_len = content_length;
		if (off >= plan->size)
			return -ERANGE;
		plan->skip = off;
		plan->deliver = plan->size - off < len ? plan->size - off : len;
		return 0;
	}
	return -EIO;
}

int client_map_http(int is_head, long status, const char *code)
{
	if (!code)
		code = "";
	switch (status) {
	case 400:
		if (strcmp(code, "KeyTooLongError") == 0)
			return -ENAMETOOLONG;
		return is_head ? -EIO : -EINVAL;
	case 401:
		return -EACCES;
	case 403:
		if (strcmp(code, "InvalidObjectState") == 0)
			return -EIO;
		return -EACCES;
	case 404:
		return -ENOENT;
	case 412:
		return -ESTALE;
	case 416:
		return -ERANGE;
	case 501:
		return -ENOTSUP;
	default:
		return -EIO;
	}
}

int client_map_curl(int curl_code)
{
	switch ((CURLcode)curl_code) {
	case CURLE_OK:
		return 0;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

int client_http_retryable(long status)
{
	switch (status) {
	case 408:
	case 429:
	case 500:
	case 502:
	case 503:
	case 504:
		return 1;
	default:
		return 0;
	}
}

int client_curl_retryable(int curl_code)
{
	switch ((CURLcode)curl_code) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_WEIRD_SERVER_REPLY:
		return 1;
	default:
		return 0;
	}
}

int client_http_throttled(long status)
{
	return status == 429 || status == 503;
}

int client_creds_rejected(int is_head, long status, const char *code)
{
	static const char *const codes[] = {
		"ExpiredToken",	      "TokenRefreshRequired",  "InvalidToken",
		"InvalidAccessKeyId", "SignatureDoesNotMatch",
	};

	if (status != 400 && status != 401 && status != 403)
		return 0;
	if (!code || !code[0])
		return is_head && status == 403;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i]) == 0)
			return 1;
	return 0;
}

int client_clock_skewed(long status, const char *code, int64_t server_sec,
			int64_t local_sec)
{
	int64_t d = server_sec - local_sec;

	if (status != 403)
		return 0;
	if (code && strcmp(code, "RequestTimeTooSkewed") == 0)
		return 1;
	return (!code || !code[0]) && server_sec > 0 &&
	       (d > CLIENT_SKEW_GUESS_SEC || d < -CLIENT_SKEW_GUESS_SEC);
}

int64_t client_refresh_at(int64_t now, int64_t expires)
{
	int64_t margin = CLIENT_REFRESH_MARGIN_SEC;

	if (expires <= 0)
		return 0;
	if (expires - now < 2 * margin)
		margin = (expires - now) / 2;
	return expires - (margin > 0 ? margin : 0);
}

uint64_t client_backoff_ms(unsigned attempt, uint64_t rnd)
{
	uint64_t cap = CLIENT_BACKOFF_CAP_MS;

	/* 100 ms << 6 already exceeds the 5 s cap; avoid shifting far. */
	if (attempt < 6 && (uint64_t)CLIENT_BACKOFF_BASE_MS << attempt < cap)
		cap = (uint64_t)CLIENT_BACKOFF_BASE_MS << attempt;
	return rnd % (cap + 1);
}
