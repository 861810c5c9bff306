// SPDX-License-Identifier: MIT
/*
 * Unit tests for request signing (src/client/sigv4.c, sigv2.c): the three
 * official AWS SigV4 vectors and the V2/OBS vectors of obs-protocol.md §2,
 * the RFC 3986 encoder, canonical query and header rules, and dates.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/sigv2.h"
#include "client/sigv4.h"

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_HASH                                                             \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define AMZ_DATE    "20130524T000000Z"
#define VECTOR_HOST "examplebucket.s3.amazonaws.com"

/* Sign an AWS example request; returns the Authorization value. */
static char *sign_vector(const char *path, const struct client_sig_param *p,
			 size_t np, const char *range, char *sig)
{
	struct client_sig_header h[4] = {
		{"Host", VECTOR_HOST},
		{"x-amz-content-sha256", EMPTY_HASH},
		{"x-amz-date", AMZ_DATE},
		{"Range", range},
	};
	struct client_sigv4_request r = {
		.method = "GET",
		.path = path,
		.params = p,
		.n_params = np,
		.headers = h,
		.n_headers = range ? 4 : 3,
		.payload_hash = EMPTY_HASH,
	};
	char *auth = NULL;

	assert_int_equal(client_sigv4_authorization(&r, AK, SK, "us-east-1",
						    AMZ_DATE, sig, &auth),
			 0);
	return auth;
}

static void test_v4_list_vector(void **state)
{
	struct client_sig_param p[] = {{"prefix", "J"}, {"max-keys", "2"}};
	char sig[CLIENT_SIGV4_SIG_LEN + 1];
	char *auth = sign_vector("/", p, 2, NULL, sig);

	(void)state;
	assert_string_equal(sig, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db"
				 "6670ed5711ef69dc6f7");
	assert_string_equal(
		auth, "AWS4-HMAC-SHA256 Credential=" AK
		      "/20130524/us-east-1/s3/aws4_request,"
		      "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
		      "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc"
		      "59db6670ed5711ef69dc6f7");
	free(auth);
}

static void test_v4_lifecycle_vector(void **state)
{
	struct client_sig_param p[] = {{"lifecycle", NULL}};
	char sig[CLIENT_SIGV4_SIG_LEN + 1];
	char *auth = sign_vector("/", p, 1, NULL, sig);
	char *q = NULL;

	(void)state;
	assert_string_equal(sig, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f9"
				 "1ac7a200a0136783543");
	free(auth);
	/* The URL carries a bare "lifecycle", the signature "lifecycle=". */
	assert_int_equal(client_query_string(p, 1, 0, &q), 0);
	assert_string_equal(q, "lifecycle");
	free(q);
	assert_int_equal(client_query_string(p, 1, 1, &q), 0);
	assert_string_equal(q, "lifecycle=");
	free(q);
}

static void test_v4_range_vector(void **state)
{
	static const char canon_want[] =
		"GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
		"range:bytes=0-9\nx-amz-content-sha256:" EMPTY_HASH "\n"
		"x-amz-date:20130524T000000Z\n\n"
		"host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_HASH;
	struct client_sig_header h[] = {
		{"x-amz-date", AMZ_DATE},
		{"Range", "bytes=0-9"},
		{"Host", VECTOR_HOST},
		{"x-amz-content-sha256", EMPTY_HASH},
	};
	struct client_sigv4_request r = {
		.method = "GET",
		.path = "/test.txt",
		.headers = h,
		.n_headers = 4,
		.payload_hash = EMPTY_HASH,
	};
	char sig[CLIENT_SIGV4_SIG_LEN + 1];
	char *canon = NULL, *signed_headers = NULL, *sts = NULL;
	char *auth = sign_vector("/test.txt", NULL, 0, "bytes=0-9", sig);

	(void)state;
	assert_string_equal(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba"
				 "48dd91039c6036bdb41");
	assert_non_null(strstr(auth, "SignedHeaders=host;range;x-amz-content-"
				     "sha256;x-amz-date,"));
	free(auth);

	/* Intermediate steps, as printed in the AWS documentation. */
	assert_int_equal(
		client_sigv4_canonical_request(&r, &canon, &signed_headers), 0);
	assert_string_equal(canon, canon_want);
	assert_string_equal(signed_headers,
			    "host;range;x-amz-content-sha256;x-amz-date");
	assert_int_equal(
		client_sigv4_string_to_sign(AMZ_DATE, "us-east-1", canon, &sts),
		0);
	assert_string_equal(sts, "AWS4-HMAC-SHA256\n20130524T000000Z\n"
				 "20130524/us-east-1/s3/aws4_request\n"
				 "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c"
				 "48bbb2dc43964946972");
	free(canon);
	free(signed_headers);
	free(sts);
}

static void test_v4_header_rules(void **state)
{
	struct client_sig_header h[] = {
		{"X-Amz-Meta-B", "  two   spaces\tand tab  "},
		{"host", "h"},
		{"x-amz-meta-a", "1"},
		{"X-AMZ-META-A", "2"},
	};
	struct client_sigv4_request r = {
		.method = "HEAD",
		.path = "/a%20b",
		.headers = h,
		.n_headers = 4,
		.payload_hash = CLIENT_UNSIGNED_PAYLOAD,
	};
	char *canon = NULL, *sh = NULL;

	(void)state;
	assert_int_equal(client_sigv4_canonical_request(&r, &canon, &sh), 0);
	assert_string_equal(canon, "HEAD\n/a%20b\n\nhost:h\n"
				   "x-amz-meta-a:1,2\n"
				   "x-amz-meta-b:two spaces and tab\n\n"
				   "host;x-amz-meta-a;x-amz-meta-b\n"
				   "UNSIGNED-PAYLOAD");
	assert_string_equal(sh, "host;x-amz-meta-a;x-amz-meta-b");
	free(canon);
	free(sh);
	r.path = "relative";
	assert_int_equal(client_sigv4_canonical_request(&r, &canon, &sh),
			 -EINVAL);
}

static void test_v4_token_and_query(void **state)
{
	/* Values needing encoding sort by their encoded form. */
	struct client_sig_param p[] = {
		{"prefix", "dir/a b+c"},
		{"marker", "x~y%"},
		{"list-type", "2"},
		{"delimiter", "/"},
	};
	char *q = NULL;

	(void)state;
	assert_int_equal(client_query_string(p, 4, 0, &q), 0);
	assert_string_equal(q, "delimiter=%2F&list-type=2&marker=x~y%25&"
			       "prefix=dir%2Fa%20b%2Bc");
	free(q);
	assert_int_equal(client_query_string(NULL, 0, 1, &q), 0);
	assert_string_equal(q, "");
	free(q);
}

static void test_uri_encode(void **state)
{
	char *s;

	(void)state;
	s = client_uri_encode("dir/a b+c~d%e.txt", 1);
	assert_string_equal(s, "dir/a%20b%2Bc~d%25e.txt");
	free(s);
	s = client_uri_encode("dir/a b", 0);
	assert_string_equal(s, "dir%2Fa%20b");
	free(s);
	/* UTF-8 bytes one by one, upper-case hex. */
	s = client_uri_encode("caf\xc3\xa9/\xe6\x97\xa5", 1);
	assert_string_equal(s, "caf%C3%A9/%E6%97%A5");
	free(s);
	s = client_uri_encode("AZaz09-._~", 0);
	assert_string_equal(s, "AZaz09-._~");
	free(s);
	s = client_uri_encode("a=b&c?d#e:f@g", 1);
	assert_string_equal(s, "a%3Db%26c%3Fd%23e%3Af%40g");
	free(s);
	s = client_uri_encode("", 1);
	assert_string_equal(s, "");
	free(s);
	/* "./.." stay as they are; the path is sent as-is. */
	s = client_uri_encode("a/../b/./c", 1);
	assert_string_equal(s, "a/../b/./c");
	free(s);
}

static void test_signing_key(void **state)
{
	unsigned char k1[CLIENT_SIGV4_KEY_LEN], k2[CLIENT_SIGV4_KEY_LEN];

	(void)state;
	assert_int_equal(
		client_sigv4_signing_key(SK, "20130524", "us-east-1", k1), 0);
	assert_int_equal(
		client_sigv4_signing_key(SK, "20130525", "us-east-1", k2), 0);
	assert_memory_not_equal(k1, k2, sizeof(k1));
	assert_int_equal(
		client_sigv4_string_to_sign("2013", "r", "c", &(char *){NULL}),
		-EINVAL);
}

static void test_dates(void **state)
{
	char amz[CLIENT_AMZ_DATE_LEN + 1], http[CLIENT_HTTP_DATE_LEN + 1];

	(void)state;
	client_amz_date(1369353600, amz);
	assert_string_equal(amz, "20130524T000000Z");
	client_http_date(1369353600, http);
	assert_string_equal(http, "Fri, 24 May 2013 00:00:00 GMT");
	client_http_date(0, http);
	assert_string_equal(http, "Thu, 01 Jan 1970 00:00:00 GMT");
	client_http_date(1175024202, http);
	assert_string_equal(http, "Tue, 27 Mar 2007 19:36:42 GMT");
	client_amz_date(1435710736, amz);
	assert_string_equal(amz, "20150701T003216Z");
}

static void test_v2_vector(void **state)
{
	char sig[CLIENT_SIGV2_SIG_LEN + 1], *res = NULL, *sts = NULL;

	(void)state;
	assert_int_equal(client_sigv2_resource("awsexamplebucket1",
					       "photos/puppy.jpg", NULL, 0,
					       &res),
			 0);
	assert_string_equal(res, "/awsexamplebucket1/photos/puppy.jpg");
	assert_int_equal(
		client_sigv2_string_to_sign("GET", NULL, NULL,
					    "Tue, 27 Mar 2007 19:36:42 +0000",
					    NULL, 0, "x-amz-", res, &sts),
		0);
	assert_string_equal(sts, "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n"
				 "/awsexamplebucket1/photos/puppy.jpg");
	assert_int_equal(client_sigv2_signature(SK, sts, sig), 0);
	assert_string_equal(sig, "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=");
	free(res);
	free(sts);
}

static void test_obs_vectors(void **state)
{
	struct client_sig_header h[] = {
		{"Host", "bucket.obs.example.com"},
		{"X-Obs-Security-Token", " TOKEN "},
		{"x-obs-date", "Tue, 15 Oct 2015 07:20:09 GMT"},
		{"x-amz-date", "ignored: other prefix"},
		{"Range", "bytes=0-9"},
	};
	char sig[CLIENT_SIGV2_SIG_LEN + 1], *res = NULL, *sts = NULL;

	(void)state;
	/* 1: plain Date line, no prefixed headers. */
	assert_int_equal(client_sigv2_string_to_sign(
				 "GET", NULL, NULL,
				 "Sat, 12 Oct 2015 08:12:38 GMT", NULL, 0,
				 "x-obs-", "/bucket/object.txt", &sts),
			 0);
	assert_int_equal(client_sigv2_signature("secret", sts, sig), 0);
	assert_string_equal(sig, "B5U/pJkM67Eng8teECN3J5PQQqU=");
	free(sts);

	/* 2: x-obs-date and a token, a key with a space. */
	assert_int_equal(
		client_sigv2_resource("bucket", "dir/a%20b.jpg", NULL, 0, &res),
		0);
	assert_int_equal(client_sigv2_string_to_sign("GET", NULL, NULL, "", h,
						     5, "x-obs-", res, &sts),
			 0);
	assert_string_equal(sts, "GET\n\n\n\n"
				 "x-obs-date:Tue, 15 Oct 2015 07:20:09 GMT\n"
				 "x-obs-security-token:TOKEN\n"
				 "/bucket/dir/a%20b.jpg");
	assert_int_equal(client_sigv2_signature("secret", sts, sig), 0);
	assert_string_equal(sig, "Le6Zk1EWnGK3J+cp+UOaPPRuFes=");
	free(res);
	free(sts);

	/* 3: a bucket-level listing; listing parameters are not signed. */
	struct client_sig_param p[] = {
		{"prefix", "dir/"},	     {"marker", "m"},
		{"max-keys", "1000"},	     {"delimiter", "/"},
		{"encoding-type", "url"},    {"list-type", "2"},
		{"continuation-token", "t"},
	};
	assert_int_equal(client_sigv2_resource("bucket", "", p, 7, &res), 0);
	assert_string_equal(res, "/bucket/");
	assert_int_equal(client_sigv2_string_to_sign("GET", NULL, NULL, "", h,
						     3, "x-obs-", res, &sts),
			 0);
	free(sts);
	assert_int_equal(client_sigv2_string_to_sign("GET", NULL, NULL, "",
						     h + 2, 1, "x-obs-", res,
						     &sts),
			 0);
	assert_int_equal(client_sigv2_signature("secret", sts, sig), 0);
	assert_string_equal(sig, "uGJufpGYLhDsfCik7ZSFyf1fycw=");
	free(res);
	free(sts);
}

static void test_v2_subresources(void **state)
{
	struct client_sig_param p[] = {
		{"versionId", "xxx"},
		{"prefix", "ignored"},
		{"response-content-type", "text/plain"},
		{"acl", NULL},
	};
	char *res = NULL;

	(void)state;
	assert_int_equal(
		client_sigv2_resource("bucket-test", "object-test", p, 4, &res),
		0);
	assert_string_equal(res, "/bucket-test/object-test?acl&"
				 "response-content-type=text/plain&"
				 "versionId=xxx");
	free(res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v4_list_vector),
		cmocka_unit_test(test_v4_lifecycle_vector),
		cmocka_unit_test(test_v4_range_vector),
		cmocka_unit_test(test_v4_header_rules),
		cmocka_unit_test(test_v4_token_and_query),
		cmocka_unit_test(test_uri_encode),
		cmocka_unit_test(test_signing_key),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_v2_vector),
		cmocka_unit_test(test_obs_vectors),
		cmocka_unit_test(test_v2_subresources),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
