// SPDX-License-Identifier: MIT
/*
 * Temporary credentials of the IAM agency bound to an ECS/CCE instance,
 * from its metadata service [P §6.2]: the IMDSv2 token dance, the
 * securitykey fetch with its retries, and the JSON parsing (jansson).
 * Used by the credential chain (src/cli/creds.c) at mount time and by its
 * refresher afterwards; the S3 client proper does not call it.  Bodies
 * hold secrets: they are wiped before they are freed, jansson's copies
 * included, and nothing here logs them.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "client/buf.h"
#include "client/ecs.h"
#include "client/listxml.h"
#include "hoardfs/log.h"

#ifndef HOARDFS_VERSION
#define HOARDFS_VERSION "0"
#endif

#define ECS_TRIES	       3    /* [P §6.2]: 3 tries */
#define ECS_TIMEOUT_MS	       3000 /* [P §6.2]: 2-3 s per try */
#define ECS_CONNECT_TIMEOUT_MS 1000 /* a link-local service answers at once */
#define ECS_BACKOFF_MS	       200  /* doubled after each failed try */
#define ECS_TOKEN_MAX	       4096 /* an IMDSv2 token is ~100 bytes */
/* Both SDKs' header names [P §6.2 table]; a server reads its own. */
#define ECS_TOKEN_TTL	"21600"
#define ECS_TOKEN_PATH	"/meta-data/latest/api/token"
#define ECS_SECKEY_PATH "/openstack/latest/securitykey"

/* ---- jansson with wiping ------------------------------------------------ */

/* jansson copies every string it parses; wipe those copies on free. */
static void ecs_json_free(void *p)
{
	if (p) {
		explicit_bzero(p, malloc_usable_size(p));
		free(p);
	}
}

static void ecs_json_init(void)
{
	json_set_alloc_funcs(malloc, ecs_json_free);
}

static pthread_once_t ecs_json_once = PTHREAD_ONCE_INIT;

/* ---- parsing ------------------------------------------------------------- */

void client_temp_credentials_clear(struct client_temp_credentials *t)
{
	char *v[3] = {t->access_key, t->secret_key, t->security_token};

	for (int i = 0; i < 3; i++) {
		if (v[i]) {
			explicit_bzero(v[i], strlen(v[i]));
			free(v[i]);
		}
	}
	memset(t, 0, sizeof(*t));
}

/* A trimmed copy of JSON string member @name of @obj; NULL if absent. */
static int ecs_member(json_t *obj, const char *name, char **out)
{
	const char *v = json_string_value(json_object_get(obj, name));
	size_t len;

	*out = NULL;
	if (!v)
		return 0;
	while (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n')
		v++;
	len = strlen(v);
	while (len && strchr(" \t\r\n", v[len - 1]))
		len--;
	*out = strndup(v, len);
	return *out ? 0 : -ENOMEM;
}

int client_ecs_parse(const char *body, size_t len,
		     struct client_temp_credentials *out)
{
	json_t *root, *cred;
	char *expires = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_once(&ecs_json_once, ecs_json_init);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	if (!root)
		return -EIO;
	cred = json_object_get(root, "credential");
	rc = -EIO;
	if (!json_is_object(cred))
		goto out;
	rc = ecs_member(cred, "access", &out->access_key);
	if (rc == 0)
		rc = ecs_member(cred, "secret", &out->secret_key);
	if (rc == 0)
		rc = ecs_member(cred, "securitytoken", &out->security_token);
	if (rc == 0)
		rc = ecs_member(cred, "expires_at", &expires);
	if (rc)
		goto out;
	if (!out->access_key || !out->access_key[0] || !out->secret_key ||
	    !out->secret_key[0]) {
		rc = -EIO;
		goto out;
	}
	if (out->security_token && !out->security_token[0]) {
		free(out->security_token);
		out->security_token = NULL;
	}
	/* "%Y-%m-%dT%H:%M:%S.%fZ" in the OBS SDK, ".000Z" on CCE: lenient. */
	if (expires && client_iso8601_parse(expires, &out->expires_sec) != 0) {
		log_warn("metadata: unparsable expires_at '%s'; treating the "
			 "credentials as not expiring",
			 expires);
		out->expires_sec = 0;
	}
out:
	free(expires);
	json_decref(root);
	if (rc)
		client_temp_credentials_clear(out);
	return rc;
}

/* ---- fetching ------------------------------------------------------------ */

static size_t ecs_body_cb(char *ptr, size_t size, size_t n, void *ud)
{
	client_buf_append(ud, ptr, size * n);
	return size * n;
}

static void ecs_buf_wipe(struct client_buf *b)
{
	if (b->p)
		explicit_bzero(b->p, b->cap);
	client_buf_free(b);
}

/* One exchange; *@status is 0 when there was no HTTP answer. */
static CURLcode ecs_exchange(CURL *h, int put, const char *url,
			     struct curl_slist *headers,
			     struct client_buf *body, long *status)
{
	CURLcode e = CURLE_OK;

	ecs_buf_wipe(body);
	body->max = CLIENT_ECS_MAX_BYTES;
	*status = 0;
	curl_easy_reset(h);
#define SET(opt, val)                                                          \
	do {                                                                   \
		if (e == CURLE_OK)                                             \
			e = curl_easy_setopt(h, opt, val);                     \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOPROXY, "*"); /* link-local: never through a proxy */
	SET(CURLOPT_TIMEOUT_MS, (long)ECS_TIMEOUT_MS);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)ECS_CONNECT_TIMEOUT_MS);
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_USERAGENT, "hoardfs/" HOARDFS_VERSION);
	SET(CURLOPT_WRITEFUNCTION, ecs_body_cb);
	SET(CURLOPT_WRITEDATA, body);
	if (put) {
		SET(CURLOPT_CUSTOMREQUEST, "PUT");
		SET(CURLOPT_POSTFIELDS, "");
		SET(CURLOPT_POSTFIELDSIZE, 0L);
	}
#undef SET
	if (e == CURLE_OK)
		e = curl_easy_perform(h);
	if (e == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return e;
}

/* Nonzero when @e (on handle @h) means nothing listens there at all. */
static int ecs_unreachable(CURL *h, CURLcode e)
{
	curl_off_t connect_us = 0;

	if (e == CURLE_COULDNT_CONNECT || e == CURLE_COULDNT_RESOLVE_HOST)
		return 1;
	if (e != CURLE_OPERATION_TIMEDOUT)
		return 0;
	curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);
	return connect_us == 0; /* timed out while connecting */
}

static void ecs_sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* A header list with @n "name: value" lines; NULL when out of memory. */
static struct curl_slist *ecs_headers(const char *const *lines, size_t n)
{
	struct curl_slist *list = NULL, *l;

	for (size_t i = 0; i < n; i++) {
		l = curl_slist_append(list, lines[i]);
		if (!l) {
			curl_slist_free_all(list);
			return NULL;
		}
		list = l;
	}
	return list;
}

/*
 * The IMDSv2 token, or NULL (*@rc 0) when the service gave none, so a
 * plain GET follows [P §6.2].  *@rc < 0 when the service is unreachable.
 */
static char *ecs_token(CURL *h, const char *base, struct client_buf *body,
		       int *rc, char *err, size_t errlen)
{
	static const char *const ttl[] = {
		"X-securitykey-Token-Ttl-Seconds: " ECS_TOKEN_TTL,
		"X-Metadata-Token-Ttl-Seconds: " ECS_TOKEN_TTL,
	};
	struct curl_slist *hdrs = ecs_headers(ttl, 2);
	char *url = NULL, *token = NULL;
	CURLcode e;
	long status;

	*rc = -ENOMEM;
	if (!hdrs || asprintf(&url, "%s" ECS_TOKEN_PATH, base) < 0) {
		url = NULL;
		goto out;
	}
	*rc = 0;
	e = ecs_exchange(h, 1, url, hdrs, body, &status);
	if (e != CURLE_OK && ecs_unreachable(h, e)) {
		snprintf(err, errlen, "metadata service %s: %s", base,
			 curl_easy_strerror(e));
		*rc = -EHOSTUNREACH;
		goto out;
	}
	if (e != CURLE_OK || status != 200 || body->len == 0 ||
	    body->len > ECS_TOKEN_MAX || body->error) {
		log_debug("metadata: no IMDSv2 token (%s, HTTP %ld); plain GET",
			  curl_easy_strerror(e), status);
		goto out;
	}
	token = strndup(body->p, strcspn(body->p, "\r\n"));
	if (!token)
		*rc = -ENOMEM;
out:
	free(url);
	curl_slist_free_all(hdrs);
	ecs_buf_wipe(body);
	return token;
}

int client_ecs_credentials(const char *base_url,
			   struct client_temp_credentials *out, char *err,
			   size_t errlen)
{
	struct client_buf body = {0};
	char *base = NULL, *url = NULL;
	long backoff_ms = ECS_BACKOFF_MS;
	CURL *h = NULL;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	err[0] = '\0';
	if (!base_url || (strncasecmp(base_url, "http://", 7) != 0 &&
			  strncasecmp(base_url, "https://", 8) != 0)) {
		snprintf(err, errlen, "metadata URL '%s' is not http(s)://",
			 base_url ? base_url : "");
		return -EINVAL;
	}
	base = strdup(base_url);
	h = curl_easy_init();
	if (!base || !h)
		goto out;
	for (size_t n = strlen(base); n && base[n - 1] == '/'; n--)
		base[n - 1] = '\0';
	if (asprintf(&url, "%s" ECS_SECKEY_PATH, base) < 0) {
		url = NULL;
		goto out;
	}
	for (int attempt = 0; attempt < ECS_TRIES; attempt++) {
		struct curl_slist *hdrs = NULL;
		char *token, *lines[2] = {NULL, NULL};
		CURLcode e;
		long status;

		if (attempt) {
			ecs_sleep_ms(backoff_ms);
			backoff_ms *= 2;
		}
		token = ecs_token(h, base, &body, &rc, err, errlen);
		if (rc)
			goto out; /* unreachable or out of memory: stop */
		rc = -ENOMEM;
		if (token &&
		    (asprintf(&lines[0], "X-securitykey-Token: %s", token) <
			     0 ||
		     asprintf(&lines[1], "X-Metadata-Token: %s", token) < 0)) {
			free(token);
			free(lines[0]);
			goto out;
		}
		if (token)
			hdrs = ecs_headers((const char *const *)lines, 2);
		free(lines[0]);
		free(lines[1]);
		if (token)
			explicit_bzero(token, strlen(token));
		free(token);
		e = ecs_exchange(h, 0, url, hdrs, &body, &status);
		curl_slist_free_all(hdrs);
		if (e != CURLE_OK) {
			snprintf(err, errlen, "metadata service %s: %s", base,
				 curl_easy_strerror(e));
			rc = ecs_unreachable(h, e) ? -EHOSTUNREACH : -EIO;
			if (rc == -EHOSTUNREACH)
				goto out;
			continue;
		}
		if (status == 200) {
			rc = body.error ? -EIO
					: client_ecs_parse(body.p ? body.p : "",
							   body.len, out);
			if (rc == 0)
				goto out;
			snprintf(err, errlen,
				 "metadata service %s: the securitykey answer "
				 "is not {\"credential\": {\"access\", "
				 "\"secret\", ...}}",
				 base);
			continue;
		}
		if (status == 404) {
			snprintf(err, errlen,
				 "metadata service %s: no %s (HTTP 404)", base,
				 ECS_SECKEY_PATH);
			rc = -ENOENT;
			goto out;
		}
		if (status == 401 && body.p && strcasestr(body.p, "agency")) {
			/* "Please configure Cloud Service Agency first". */
			snprintf(err, errlen,
				 "metadata service %s: no IAM agency is bound "
				 "to this instance (HTTP 401)",
				 base);
			rc = -EACCES;
			goto out;
		}
		/* 401 about the token, 5xx, ...: a fresh token and again. */
		snprintf(err, errlen, "metadata service %s: HTTP %ld", base,
			 status);
		rc = status == 401 || status == 403 ? -EACCES : -EIO;
	}
out:
	ecs_buf_wipe(&body);
	if (h)
		curl_easy_cleanup(h);
	free(url);
	free(base);
	if (rc == -ENOMEM && !err[0])
		snprintf(err, errlen, "out of memory");
	return rc;
}
