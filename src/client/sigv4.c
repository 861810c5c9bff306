// SPDX-License-Identifier: MIT
/*
 * AWS Signature Version 4 for S3 [P §2.3], the RFC 3986 encoder shared by
 * every scheme, and date formatting.  Pure functions on strings: the
 * caller (client.c) chooses the headers, this file only canonicalises and
 * signs them.  HMAC and SHA-256 come from OpenSSL; nothing here logs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "client/buf.h"
#include "client/sigv4.h"
#include "hoardfs/util.h"

/* An RFC 3986 unreserved byte: these are never percent-encoded. */
static int sig_unreserved(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
	       ch == '_' || ch == '~';
}

char *client_uri_encode(const char *in, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(in);
	char *out, *o;

	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	out = malloc(3 * n + 1);
	if (!out)
		return NULL;
	o = out;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (sig_unreserved(*p) || (keep_slash && *p == '/')) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* One encoded query parameter, for sorting. */
struct sig_qpair {
	char *name;  /* URI-encoded name */
	char *value; /* URI-encoded value, or NULL for a bare parameter */
};

static int sig_qpair_cmp(const void *a, const void *b)
{
	const struct sig_qpair *x = a, *y = b;
	int d = strcmp(x->name, y->name);

	if (d)
		return d;
	return strcmp(x->value ? x->value : "", y->value ? y->value : "");
}

int client_query_string(const struct client_sig_param *p, size_t n,
			int canonical, char **out)
{
	struct client_buf b = {0};
	struct sig_qpair *v = NULL;
	int rc = -ENOMEM;

	*out = NULL;
	if (n) {
		v = calloc(n, sizeof(*v));
		if (!v)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].name = client_uri_encode(p[i].name, 0);
		if (!v[i].name)
			goto out;
		if (p[i].value) {
			v[i].value = client_uri_encode(p[i].value, 0);
			if (!v[i].value)
				goto out;
		}
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), sig_qpair_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i)
			client_buf_puts(&b, "&");
		client_buf_puts(&b, v[i].name);
		if (v[i].value || canonical) {
			client_buf_puts(&b, "=");
			client_buf_puts(&b, v[i].value ? v[i].value : "");
		}
	}
	rc = client_buf_take(&b, out);
out:
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
	client_buf_free(&b);
	return rc;
}

/* One header prepared for the canonical form. */
struct sig_hpair {
	char *name;	   /* lower-cased */
	const char *value; /* as given; trimmed when written */
	size_t order;	   /* position in the input, to keep repeats stable */
};

static int sig_hpair_cmp(const void *a, const void *b)
{
	const struct sig_hpair *x = a, *y = b;
	int d = strcmp(x->name, y->name);

	if (d)
		return d;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Append @v trimmed, with each inner run of spaces/tabs as one space. */
static void sig_put_trimmed(struct client_buf *b, const char *v)
{
	int pending_space = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			pending_space = 1;
			continue;
		}
		if (pending_space)
			client_buf_puts(b, " ");
		pending_space = 0;
		client_buf_append(b, v, 1);
	}
}

int client_sigv4_canonical_request(const struct client_sigv4_request *r,
				   char **canon, char **signed_headers)
{
	struct client_buf b = {0}, sh = {0};
	struct sig_hpair *h = NULL;
	char *query = NULL;
	int rc;

	*canon = NULL;
	*signed_headers = NULL;
	if (!r->method || !r->path || !r->payload_hash || r->path[0] != '/')
		return -EINVAL;
	rc = client_query_string(r->params, r->n_params, 1, &query);
	if (rc)
		goto out;
	rc = -ENOMEM;
	if (r->n_headers) {
		h = calloc(r->n_headers, sizeof(*h));
		if (!h)
			goto out;
	}
	for (size_t i = 0; i < r->n_headers; i++) {
		h[i].name = strdup(r->headers[i].name);
		if (!h[i].name)
			goto out;
		for (char *s = h[i].name; *s; s++)
			if (*s >= 'A' && *s <= 'Z')
				*s = (char)(*s - 'A' + 'a');
		h[i].value = r->headers[i].value ? r->headers[i].value : "";
		h[i].order = i;
	}
	if (r->n_headers > 1)
		qsort(h, r->n_headers, sizeof(*h), sig_hpair_cmp);

	client_buf_printf(&b, "%s\n%s\n%s\n", r->method, r->path, query);
	for (size_t i = 0; i < r->n_headers; i++) {
		int repeat = i > 0 && strcmp(h[i].name, h[i - 1].name) == 0;

		if (repeat) {
			/* Undo the previous line's "\n", join with ",". */
			if (!b.error && b.len)
				b.len--;
			client_buf_puts(&b, ",");
		} else {
			client_buf_printf(&b, "%s:", h[i].name);
			client_buf_printf(&sh, "%s%s", sh.len ? ";" : "",
					  h[i].name);
		}
		sig_put_trimmed(&b, h[i].value);
		client_buf_puts(&b, "\n");
	}
	/* The header block ends with "\n" and the join adds one more. */
	client_buf_printf(&b, "\n%s\n%s", sh.p ? sh.p : "", r->payload_hash);
	rc = client_buf_take(&b, canon);
	if (rc)
		goto out;
	rc = client_buf_take(&sh, signed_headers);
	if (rc) {
		free(*canon);
		*canon = NULL;
	}
out:
	for (size_t i = 0; h && i < r->n_headers; i++)
		free(h[i].name);
	free(h);
	free(query);
	client_buf_free(&b);
	client_buf_free(&sh);
	return rc;
}

int client_sigv4_string_to_sign(const char *amz_date, const char *region,
				const char *canon, char **out)
{
	char hash[UTIL_SHA256_HEX_LEN + 1];
	struct client_buf b = {0};
	int rc;

	*out = NULL;
	if (strlen(amz_date) != CLIENT_AMZ_DATE_LEN)
		return -EINVAL;
	rc = util_sha256_hex(canon, strlen(canon), hash);
	if (rc)
		return rc;
	client_buf_printf(&b,
			  "AWS4-HMAC-SHA256\n%s\n%.8s/%s/s3/aws4_request\n%s",
			  amz_date, amz_date, region, hash);
	return client_buf_take(&b, out);
}

/* HMAC-SHA256 of @len bytes at @msg under @key into @md (32 bytes). */
static int sig_hmac256(const void *key, size_t key_len, const void *msg,
		       size_t len, unsigned char *md)
{
	unsigned int md_len = 0;

	if (!HMAC(EVP_sha256(), key, (int)key_len, msg, len, md, &md_len) ||
	    md_len != CLIENT_SIGV4_KEY_LEN)
		return -EIO;
	return 0;
}

int client_sigv4_signing_key(const char *secret, const char *date8,
			     const char *region,
			     unsigned char key[CLIENT_SIGV4_KEY_LEN])
{
	const char *steps[] = {region, "s3", "aws4_request"};
	unsigned char k[CLIENT_SIGV4_KEY_LEN];
	size_t slen = strlen(secret);
	char *seed;
	int rc;

	seed = malloc(slen + 5);
	if (!seed)
		return -ENOMEM;
	memcpy(seed, "AWS4", 4);
	memcpy(seed + 4, secret, slen + 1);
	rc = sig_hmac256(seed, slen + 4, date8, strlen(date8), k);
	explicit_bzero(seed, slen + 5);
	free(seed);
	for (size_t i = 0; rc == 0 && i < 3; i++)
		rc = sig_hmac256(k, sizeof(k), steps[i], strlen(steps[i]), k);
	if (rc == 0)
		memcpy(key, k, sizeof(k));
	explicit_bzero(k, sizeof(k));
	return rc;
}

int client_sigv4_authorization(const struct client_sigv4_request *r,
			       const char *access_key, const char *secret_key,
			       const char *region, const char *amz_date,
			       char *sig_hex, char **out)
{
	unsigned char key[CLIENT_SIGV4_KEY_LEN], md[CLIENT_SIGV4_KEY_LEN];
	char hex[CLIENT_SIGV4_SIG_LEN + 1], date8[9];
	char *canon = NULL, *signed_headers = NULL, *sts = NULL;
	struct client_buf b = {0};
	int rc;

	*out = NULL;
	if (strlen(amz_date) != CLIENT_AMZ_DATE_LEN)
		return -EINVAL;
	memcpy(date8, amz_date, 8);
	date8[8] = '\0';
	rc = client_sigv4_canonical_request(r, &canon, &signed_headers);
	if (rc)
		goto out;
	rc = client_sigv4_string_to_sign(amz_date, region, canon, &sts);
	if (rc)
		goto out;
	rc = client_sigv4_signing_key(secret_key, date8, region, key);
	if (rc)
		goto out;
	rc = sig_hmac256(key, sizeof(key), sts, strlen(sts), md);
	explicit_bzero(key, sizeof(key));
	if (rc)
		goto out;
	util_hex(md, sizeof(md), hex);
	if (sig_hex)
		memcpy(sig_hex, hex, sizeof(hex));
	client_buf_printf(
		&b,
		"AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request,"
		"SignedHeaders=%s,Signature=%s",
		access_key, date8, region, signed_headers, hex);
	rc = client_buf_take(&b, out);
out:
	free(canon);
	free(signed_headers);
	free(sts);
	client_buf_free(&b);
	return rc;
}

void client_amz_date(int64_t t, char out[CLIENT_AMZ_DATE_LEN + 1])
{
	time_t tt = (time_t)t;
	char tmp[64]; /* room for any int, to keep the compiler sure */
	struct tm tm;

	gmtime_r(&tt, &tm);
	snprintf(tmp, sizeof(tmp), "%04d%02d%02dT%02d%02d%02dZ",
		 (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec);
	memcpy(out, tmp, CLIENT_AMZ_DATE_LEN);
	out[CLIENT_AMZ_DATE_LEN] = '\0';
}

void client_http_date(int64_t t, char out[CLIENT_HTTP_DATE_LEN + 1])
{
	static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed",
					"Thu", "Fri", "Sat"};
	static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr",
					   "May", "Jun", "Jul", "Aug",
					   "Sep", "Oct", "Nov", "Dec"};
	time_t tt = (time_t)t;
	char tmp[96]; /* room for any int, to keep the compiler sure */
	struct tm tm;

	gmtime_r(&tt, &tm);
	snprintf(tmp, sizeof(tmp), "%s, %02d %s %04d %02d:%02d:%02d GMT",
		 days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12],
		 (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min, tm.tm_sec);
	memcpy(out, tmp, CLIENT_HTTP_DATE_LEN);
	out[CLIENT_HTTP_DATE_LEN] = '\0';
}
