/* SPDX-License-Identifier: MIT */
/*
 * Request signing, AWS Signature Version 4 [P §2.3], plus the pieces every
 * scheme shares: the RFC 3986 URI encoder and the two date formats.  All
 * functions are pure (no I/O, no globals), thread-safe, and checked by
 * test/unit/test_client_sigv4.c against the published AWS vectors.
 * The HMAC-SHA1 schemes (AWS V2, native OBS) live in sigv2.h.
 */
#ifndef HOARDFS_CLIENT_SIGV4_H
#define HOARDFS_CLIENT_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#define CLIENT_AMZ_DATE_LEN  16 /* "20130524T000000Z" */
#define CLIENT_HTTP_DATE_LEN 29 /* "Fri, 24 May 2013 00:00:00 GMT" */
#define CLIENT_SIGV4_KEY_LEN 32 /* an HMAC-SHA256 output */
#define CLIENT_SIGV4_SIG_LEN 64 /* hex digits of a V4 signature */
/* The payload hash sent as x-amz-content-sha256 on every request. */
#define CLIENT_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

/* One HTTP header, as sent (any case; the signer lower-cases names). */
struct client_sig_header {
	const char *name;  /* e.g. "Host", "range", "x-amz-date" */
	const char *value; /* raw value; the signer trims it */
};

/* One query parameter, raw (not yet URI-encoded). */
struct client_sig_param {
	const char *name;  /* e.g. "max-keys" */
	const char *value; /* e.g. "2"; NULL for a bare "?lifecycle" */
};

/* What a V4 signature covers. */
struct client_sigv4_request {
	const char *method; /* "GET" or "HEAD" */
	const char *path;   /* URI-encoded absolute path exactly as sent */
	const struct client_sig_param *params; /* the query, raw */
	size_t n_params;
	const struct client_sig_header *headers; /* all signed ones, Host too */
	size_t n_headers;
	const char *payload_hash; /* CLIENT_UNSIGNED_PAYLOAD or hex SHA-256 */
};

/*
 * client_uri_encode - RFC 3986 encoding as S3 wants it: keep A-Za-z0-9 and
 * "-._~" (and "/" when @keep_slash, for key paths), write every other byte
 * as %XX with upper-case hex; space is "%20", never "+".
 * Returns a malloc'd string the caller frees, or NULL when out of memory.
 */
char *client_uri_encode(const char *in, int keep_slash);

/*
 * client_query_string - encode and sort @n params by encoded name, then
 * encoded value, joined by "&".  With @canonical a NULL value gives "k="
 * (the V4 CanonicalQueryString); without, a bare "k" (for the URL).
 * Returns 0 with *@out malloc'd ("" for no params), or -ENOMEM.
 */
int client_query_string(const struct client_sig_param *p, size_t n,
			int canonical, char **out)
	__attribute__((warn_unused_result));

/*
 * client_sigv4_canonical_request - the six-line canonical request and the
 * SignedHeaders list ("host;range;x-amz-date" ...), both malloc'd.
 * Header names are lower-cased and sorted, values trimmed with inner runs
 * of spaces collapsed, repeated names joined with ",".
 * Returns 0, -EINVAL (no method/path/hash), or -ENOMEM.
 */
int client_sigv4_canonical_request(const struct client_sigv4_request *r,
				   char **canon, char **signed_headers)
	__attribute__((warn_unused_result));

/*
 * client_sigv4_string_to_sign - "AWS4-HMAC-SHA256\n<amz_date>\n
 * <yyyymmdd>/<region>/s3/aws4_request\n<hex sha256(canon)>", malloc'd.
 * Returns 0, -EINVAL (@amz_date not 16 characters), -EIO or -ENOMEM.
 */
int client_sigv4_string_to_sign(const char *amz_date, const char *region,
				const char *canon, char **out)
	__attribute__((warn_unused_result));

/*
 * client_sigv4_signing_key - HMAC-SHA256 chain from "AWS4" + @secret over
 * @date8 (yyyymmdd), @region, "s3", "aws4_request".  Returns 0 or -EIO.
 */
int client_sigv4_signing_key(const char *secret, const char *date8,
			     const char *region,
			     unsigned char key[CLIENT_SIGV4_KEY_LEN])
	__attribute__((warn_unused_result));

/*
 * client_sigv4_authorization - sign @r and build the Authorization value
 * "AWS4-HMAC-SHA256 Credential=<ak>/<date>/<region>/s3/aws4_request,
 * SignedHeaders=...,Signature=<hex>" (malloc'd into *@out).  The bare
 * signature also goes to @sig_hex when not NULL.  The secret never leaves
 * this function except as the signature.
 * Returns 0, -EINVAL, -EIO or -ENOMEM.
 */
int client_sigv4_authorization(const struct client_sigv4_request *r,
			       const char *access_key, const char *secret_key,
			       const char *region, const char *amz_date,
			       char *sig_hex, char **out)
	__attribute__((warn_unused_result));

/* client_amz_date - @t (epoch seconds) as "%Y%m%dT%H%M%SZ" in UTC. */
void client_amz_date(int64_t t, char out[CLIENT_AMZ_DATE_LEN + 1]);

/*
 * client_http_date - @t as an RFC 1123 date, "Fri, 24 May 2013 00:00:00
 * GMT", with fixed English names (never the locale's).
 */
void client_http_date(int64_t t, char out[CLIENT_HTTP_DATE_LEN + 1]);

#endif
