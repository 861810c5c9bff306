// SPDX-License-Identifier: MIT
/*
 * Unit tests for the pure response and endpoint logic of src/client:
 * header parsing, Content-Range validation of ranged GETs, the HTTP and
 * curl error mappings, retry policy and backoff, endpoint parsing,
 * addressing style, region derivation and the Host authority.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "client/endpoint.h"
#include "client/resp.h"

static void feed(struct client_resp *r, const char *line)
{
	client_resp_header(r, line, strlen(line));
}

static void test_resp_headers(void **state)
{
	struct client_resp r;

	(void)state;
	client_resp_reset(&r);
	feed(&r, "HTTP/1.1 100 Continue\r\n");
	assert_int_equal(r.status, 100);
	feed(&r, "HTTP/1.1 206 Partial Content\r\n");
	feed(&r, "content-LENGTH:  10 \r\n");
	feed(&r, "ETag: \"abc\"\r\n");
	feed(&r, "Content-Range: bytes 0-9/100\r\n");
	feed(&r, "Last-Modified: Fri, 24 May 2013 00:00:00 GMT\r\n");
	feed(&r, "X-Obs-Request-Id: 0000018A\r\n");
	feed(&r, "Retry-After: 3\r\n");
	feed(&r, "X-Other: x\r\n");
	feed(&r, "\r\n");
	assert_int_equal(r.status, 206);
	assert_int_equal(r.content_length, 10);
	assert_string_equal(r.etag, "\"abc\"");
	assert_string_equal(r.content_range, "bytes 0-9/100");
	assert_int_equal(r.last_modified, 1369353600);
	assert_string_equal(r.request_id, "0000018A");
	assert_int_equal(r.retry_after_sec, 3);
	assert_int_equal(r.bad, 0);

	/* A new status line forgets the previous response. */
	feed(&r, "HTTP/2 404\r\n");
	assert_int_equal(r.status, 404);
	assert_int_equal(r.content_length, -1);
	assert_string_equal(r.etag, "");
	feed(&r, "x-amz-request-id: R1\n");
	assert_string_equal(r.request_id, "R1");
	feed(&r, "Content-Length: 12x\r\n");
	assert_int_equal(r.bad, 1);

	client_resp_reset(&r);
	feed(&r, "Content-Length: 99999999999999999999\r\n");
	assert_int_equal(r.bad, 1);
	client_resp_reset(&r);
	feed(&r, "ETag: \"");
	char long_etag[300];
	memset(long_etag, 'a', sizeof(long_etag) - 1);
	long_etag[sizeof(long_etag) - 1] = '\0';
	char line[320] = "ETag: ";
	strcat(line, long_etag);
	feed(&r, line);
	assert_int_equal(r.bad, 1);
}

static void test_content_range(void **state)
{
	struct client_content_range cr;

	(void)state;
	assert_int_equal(client_content_range_parse("bytes 0-1023/4096", &cr),
			 0);
	assert_true(cr.first == 0 && cr.last == 1023 && cr.total == 4096);
	assert_int_equal(client_content_range_parse("Bytes  5 - 5 / 6", &cr),
			 0);
	assert_true(cr.first == 5 && cr.last == 5 && cr.total == 6);
	assert_int_equal(client_content_range_parse("bytes 0-18446744073709551"
						    "614/18446744073709551615",
						    &cr),
			 0);
	assert_true(cr.total == UINT64_MAX);
	assert_int_equal(client_content_range_parse("bytes 0-9/*", &cr), -EIO);
	assert_int_equal(client_content_range_parse("bytes */100", &cr), -EIO);
	assert_int_equal(client_content_range_parse("bytes 9-0/100", &cr),
			 -EIO);
	assert_int_equal(client_content_range_parse("bytes 0-100/100", &cr),
			 -EIO);
	assert_int_equal(client_content_range_parse("items 0-9/100", &cr),
			 -EIO);
	assert_int_equal(client_content_range_parse("bytes 0-9/100x", &cr),
			 -EIO);
	assert_int_equal(client_content_range_parse("", &cr), -EIO);
}

static void test_get_plan_206(void **state)
{
	struct client_get_plan p;

	(void)state;
	/* Exactly the range. */
	assert_int_equal(
		client_get_plan(206, "bytes 100-199/1000", 100, 100, 100, &p),
		0);
	assert_true(p.skip == 0 && p.deliver == 100 && p.size == 1000 &&
		    p.body_len == 100);
	/* Clamped at the end of a shorter object: fewer bytes, size told. */
	assert_int_equal(
		client_get_plan(206, "bytes 900-999/1000", -1, 900, 500, &p),
		0);
	assert_true(p.deliver == 100 && p.size == 1000 && p.body_len == 100);
	/* Wrong start, wrong end, short end, Content-Length mismatch. */
	assert_int_equal(
		client_get_plan(206, "bytes 0-99/1000", 100, 1, 100, &p), -EIO);
	assert_int_equal(
		client_get_plan(206, "bytes 0-199/1000", 200, 0, 100, &p),
		-EIO);
	assert_int_equal(
		client_get_plan(206, "bytes 0-49/1000", 50, 0, 100, &p), -EIO);
	assert_int_equal(
		client_get_plan(206, "bytes 0-99/1000", 99, 0, 100, &p), -EIO);
	/* Clamped although the object is long enough. */
	assert_int_equal(
		client_get_plan(206, "bytes 900-949/1000", 50, 900, 100, &p),
		-EIO);
	assert_int_equal(client_get_plan(206, "", 100, 0, 100, &p), -EIO);
	assert_int_equal(client_get_plan(206, NULL, 100, 0, 100, &p), -EIO);
	/* A range reaching the last possible offset. */
	assert_int_equal(client_get_plan(206, "bytes 10-19/20", 10, 10,
					 UINT64_MAX - 10, &p),
			 0);
	assert_true(p.deliver == 10);
}

static void test_get_plan_200(void **state)
{
	struct client_get_plan p;

	(void)state;
	/* The server ignored the range: skip to off, deliver len. */
	assert_int_equal(client_get_plan(200, "", 1000, 100, 50, &p), 0);
	assert_true(p.skip == 100 && p.deliver == 50 && p.size == 1000 &&
		    p.body_len == 1000);
	assert_int_equal(client_get_plan(200, "", 120, 100, 50, &p), 0);
	assert_true(p.skip == 100 && p.deliver == 20);
	assert_int_equal(client_get_plan(200, "", 100, 100, 50, &p), -ERANGE);
	assert_int_equal(client_get_plan(200, "", 0, 0, 50, &p), -ERANGE);
	/* Without Content-Length a short body could not be detected. */
	assert_int_equal(client_get_plan(200, "", -1, 0, 50, &p), -EIO);
	assert_int_equal(client_get_plan(204, "", 0, 0, 50, &p), -EIO);
	assert_int_equal(client_get_plan(200, "", 100, 0, 0, &p), -EIO);
}

static void test_map_http(void **state)
{
	(void)state;
	assert_int_equal(client_map_http(0, 404, "NoSuchKey"), -ENOENT);
	assert_int_equal(client_map_http(0, 404, "NoSuchBucket"), -ENOENT);
	assert_int_equal(client_map_http(1, 404, ""), -ENOENT);
	assert_int_equal(client_map_http(0, 403, "AccessDenied"), -EACCES);
	assert_int_equal(client_map_http(0, 403, "SignatureDoesNotMatch"),
			 -EACCES);
	assert_int_equal(client_map_http(0, 403, "InvalidObjectState"), -EIO);
	assert_int_equal(client_map_http(0, 401, NULL), -EACCES);
	assert_int_equal(client_map_http(0, 412, "PreconditionFailed"),
			 -ESTALE);
	assert_int_equal(client_map_http(0, 416, "InvalidRange"), -ERANGE);
	assert_int_equal(client_map_http(0, 400, "InvalidArgument"), -EINVAL);
	assert_int_equal(client_map_http(1, 400, ""), -EIO);
	assert_int_equal(client_map_http(0, 400, "KeyTooLongError"),
			 -ENAMETOOLONG);
	assert_int_equal(client_map_http(0, 501, "NotImplemented"), -ENOTSUP);
	assert_int_equal(client_map_http(0, 500, "InternalError"), -EIO);
	assert_int_equal(client_map_http(0, 503, "SlowDown"), -EIO);
	assert_int_equal(client_map_http(0, 429, ""), -EIO);
	assert_int_equal(client_map_http(0, 301, "PermanentRedirect"), -EIO);
}

static void test_map_curl(void **state)
{
	(void)state;
	assert_int_equal(client_map_curl(CURLE_OK), 0);
	assert_int_equal(client_map_curl(CURLE_COULDNT_CONNECT), -ECONNREFUSED);
	assert_int_equal(client_map_curl(CURLE_COULDNT_RESOLVE_HOST),
			 -EHOSTUNREACH);
	assert_int_equal(client_map_curl(CURLE_OPERATION_TIMEDOUT), -ETIMEDOUT);
	assert_int_equal(client_map_curl(CURLE_PARTIAL_FILE), -EIO);
	assert_int_equal(client_map_curl(CURLE_PEER_FAILED_VERIFICATION), -EIO);
	assert_true(client_curl_retryable(CURLE_PARTIAL_FILE));
	assert_true(client_curl_retryable(CURLE_RECV_ERROR));
	assert_true(client_curl_retryable(CURLE_COULDNT_CONNECT));
	assert_false(client_curl_retryable(CURLE_PEER_FAILED_VERIFICATION));
	assert_false(client_curl_retryable(CURLE_WRITE_ERROR));
	assert_false(client_curl_retryable(CURLE_URL_MALFORMAT));
}

static void test_retry_policy(void **state)
{
	static const long yes[] = {408, 429, 500, 502, 503, 504};
	static const long no[] = {200, 206, 400, 403, 404, 412, 416, 501};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(client_http_retryable(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(client_http_retryable(no[i]));
	/* Full jitter: within [0, min(cap, base * 2^n)]. */
	assert_int_equal(client_backoff_ms(0, 0), 0);
	assert_int_equal(client_backoff_ms(0, 100), 100);
	assert_int_equal(client_backoff_ms(0, 101), 0);
	assert_int_equal(client_backoff_ms(3, 800), 800);
	assert_int_equal(client_backoff_ms(3, 801), 0);
	assert_int_equal(client_backoff_ms(6, 5000), 5000);
	assert_int_equal(client_backoff_ms(60, UINT64_MAX), UINT64_MAX % 5001);
	for (unsigned a = 0; a < 100; a++)
		assert_true(client_backoff_ms(a, UINT64_MAX - a) <= 5000);
}

static void test_weather_policy(void **state)
{
	struct client_resp r;

	(void)state;
	/* Date is kept: it is how a skewed client learns the server's time. */
	client_resp_reset(&r);
	assert_int_equal(r.date_sec, -1);
	feed(&r, "HTTP/1.1 403 Forbidden\r\n");
	feed(&r, "Date: Fri, 24 May 2013 00:16:00 GMT\r\n");
	assert_int_equal(r.date_sec, 1369354560);
	assert_int_equal(r.last_modified, -1);

	assert_true(client_http_throttled(503));
	assert_true(client_http_throttled(429));
	assert_false(client_http_throttled(500));
	assert_false(client_http_throttled(200));

	/* Credentials worth renewing: token and key errors, HEAD's bare 403. */
	assert_true(client_creds_rejected(0, 403, "ExpiredToken"));
	assert_true(client_creds_rejected(0, 400, "ExpiredToken"));
	assert_true(client_creds_rejected(0, 403, "InvalidAccessKeyId"));
	assert_true(client_creds_rejected(0, 403, "TokenRefreshRequired"));
	assert_true(client_creds_rejected(0, 403, "InvalidToken"));
	assert_true(client_creds_rejected(0, 403, "SignatureDoesNotMatch"));
	assert_true(client_creds_rejected(1, 403, ""));
	assert_false(client_creds_rejected(0, 403, ""));
	assert_false(client_creds_rejected(0, 403, "AccessDenied"));
	assert_false(client_creds_rejected(0, 403, "RequestTimeTooSkewed"));
	assert_false(client_creds_rejected(0, 404, "ExpiredToken"));
	assert_false(client_creds_rejected(0, 503, "SlowDown"));

	/* Skew: the code says so, or a bare 403 whose Date is far off. */
	assert_true(client_clock_skewed(403, "RequestTimeTooSkewed", -1, 0));
	assert_true(client_clock_skewed(403, "", 1000000, 1000000 - 960));
	assert_true(client_clock_skewed(403, NULL, 1000000, 1000000 + 960));
	assert_false(client_clock_skewed(403, "", 1000000, 1000000 - 30));
	assert_false(client_clock_skewed(403, "", -1, 1000000));
	assert_false(client_clock_skewed(403, "AccessDenied", 1, 1000000));
	assert_false(client_clock_skewed(400, "RequestTimeTooSkewed", -1, 0));

	/* Refresh 10 minutes early, or half-way for short-lived keys. */
	assert_int_equal(client_refresh_at(1000, 0), 0);
	assert_int_equal(client_refresh_at(1000, 1000 + 3600), 1000 + 3000);
	assert_int_equal(client_refresh_at(1000, 1000 + 1200), 1000 + 600);
	assert_int_equal(client_refresh_at(1000, 1000 + 60), 1000 + 30);
	assert_int_equal(client_refresh_at(1000, 999), 999);
}

static void test_endpoint_parse(void **state)
{
	struct client_endpoint ep;

	(void)state;
	assert_int_equal(client_endpoint_parse("http://127.0.0.1:9000", &ep),
			 0);
	assert_false(ep.https);
	assert_string_equal(ep.host, "127.0.0.1");
	assert_int_equal(ep.port, 9000);
	client_endpoint_clear(&ep);
	assert_int_equal(
		client_endpoint_parse(
			"HTTPS://obs.cn-north-4.myhuaweicloud.com/", &ep),
		0);
	assert_true(ep.https);
	assert_int_equal(ep.port, 0);
	client_endpoint_clear(&ep);
	assert_int_equal(client_endpoint_parse("s3.example.com", &ep), 0);
	assert_true(ep.https);
	client_endpoint_clear(&ep);
	assert_int_equal(client_endpoint_parse("http://[::1]:8080", &ep), 0);
	assert_string_equal(ep.host, "[::1]");
	assert_int_equal(ep.port, 8080);
	client_endpoint_clear(&ep);

	static const char *const bad[] = {
		NULL,
		"",
		"http://",
		"ftp://host",
		"http://host/path",
		"http://host:0",
		"http://host:65536",
		"http://host:",
		"http://host:80x",
		"http://user@host",
		"http://host?x",
		"http://[::1",
		"http://ho st",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(client_endpoint_parse(bad[i], &ep), -EINVAL);
}

static void test_addressing_and_authority(void **state)
{
	struct client_endpoint ep;
	char *a = NULL;

	(void)state;
	assert_true(client_path_style("127.0.0.1", 0));
	assert_true(client_path_style("[::1]", 0));
	assert_true(client_path_style("LocalHost", 0));
	assert_false(client_path_style("obs.example.com", 0));
	assert_true(client_path_style("obs.example.com", 1));

	assert_int_equal(client_endpoint_parse("http://h:80", &ep), 0);
	assert_int_equal(client_authority(&ep, NULL, &a), 0);
	assert_string_equal(a, "h"); /* default port: curl omits it too */
	free(a);
	client_endpoint_clear(&ep);
	assert_int_equal(client_endpoint_parse("https://h:80", &ep), 0);
	assert_int_equal(client_authority(&ep, "b", &a), 0);
	assert_string_equal(a, "b.h:80");
	free(a);
	client_endpoint_clear(&ep);
	assert_int_equal(client_endpoint_parse("https://h", &ep), 0);
	assert_int_equal(client_authority(&ep, "my-bucket", &a), 0);
	assert_string_equal(a, "my-bucket.h");
	free(a);
	client_endpoint_clear(&ep);
	assert_int_equal(client_endpoint_parse("http://[::1]:9000", &ep), 0);
	assert_int_equal(client_authority(&ep, NULL, &a), 0);
	assert_string_equal(a, "[::1]:9000");
	free(a);
	client_endpoint_clear(&ep);
}

static void test_region(void **state)
{
	static const char *const cases[][3] = {
		{"eu-west-1", "obs.cn-north-4.myhuaweicloud.com", "eu-west-1"},
		{"", "obs.cn-north-4.myhuaweicloud.com", "cn-north-4"},
		{NULL, "OBS.AP-Southeast-1.MyHuaweiCloud.com",
		 "ap-southeast-1"},
		{NULL, "obs.eu-west-101.myhuaweicloud.eu", "eu-west-101"},
		{NULL, "obs.eu-de.otc.t-systems.com", "eu-de"},
		{NULL, "s3.us-west-2.amazonaws.com", "us-west-2"},
		{NULL, "s3.amazonaws.com", "us-east-1"},
		{NULL, "obs.myhuaweicloud.com", "us-east-1"},
		{NULL, "obs.a.b.myhuaweicloud.com", "us-east-1"},
		{NULL, "127.0.0.1", "us-east-1"},
		{NULL, NULL, "us-east-1"},
	};
	char *r = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(client_region(cases[i][0], cases[i][1], &r),
				 0);
		assert_string_equal(r, cases[i][2]);
		free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resp_headers),
		cmocka_unit_test(test_content_range),
		cmocka_unit_test(test_get_plan_206),
		cmocka_unit_test(test_get_plan_200),
		cmocka_unit_test(test_map_http),
		cmocka_unit_test(test_map_curl),
		cmocka_unit_test(test_retry_policy),
		cmocka_unit_test(test_weather_policy),
		cmocka_unit_test(test_endpoint_parse),
		cmocka_unit_test(test_addressing_and_authority),
		cmocka_unit_test(test_region),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
