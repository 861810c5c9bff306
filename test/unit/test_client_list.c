// SPDX-License-Identifier: MIT
/*
 * Unit tests for the listing and error parsers (src/client/listxml.c):
 * namespaces, encoding-type=url, next-marker rules for V1 and V2,
 * CommonPrefixes, malformed bodies, <Error> documents and dates.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libxml/parser.h>

#include "client/listxml.h"

#define NS_AWS "http://s3.amazonaws.com/doc/2006-03-01/"
#define NS_OBS "http://obs.myhwclouds.com/doc/2015-06-30/"

static int parse(const char *xml, int v2, struct client_list_page *page)
{
	return client_listxml_parse(xml, strlen(xml), v2, page);
}

static void test_aws_namespace(void **state)
{
	static const char xml[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<ListBucketResult xmlns=\"" NS_AWS "\">"
		"<Name>b</Name><Prefix>dir/</Prefix><Marker></Marker>"
		"<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
		"<IsTruncated>false</IsTruncated>"
		"<Contents><Key>dir/a.txt</Key>"
		"<LastModified>2015-07-01T00:32:16.482Z</LastModified>"
		"<ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag>"
		"<Size>1</Size><Owner><ID>x</ID></Owner>"
		"<StorageClass>STANDARD</StorageClass></Contents>"
		"<Contents><Key>dir/b.bin</Key>"
		"<LastModified>2015-07-01T00:32:17Z</LastModified>"
		"<ETag>\"abc-2\"</ETag><Size>18446744073709551615</Size>"
		"</Contents>"
		"<CommonPrefixes><Prefix>dir/sub/</Prefix></CommonPrefixes>"
		"</ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(xml, 0, &page), 0);
	assert_int_equal(page.n, 3);
	assert_false(page.truncated);
	assert_null(page.next);
	assert_string_equal(page.v[0].name, "dir/a.txt");
	assert_false(page.v[0].is_prefix);
	assert_int_equal(page.v[0].size, 1);
	assert_int_equal(page.v[0].mtime_sec, 1435710736);
	assert_string_equal(page.v[0].etag,
			    "\"0cc175b9c0f1b6a831c399e269772661\"");
	assert_string_equal(page.v[1].name, "dir/b.bin");
	assert_true(page.v[1].size == UINT64_MAX);
	assert_int_equal(page.v[1].mtime_sec, 1435710737);
	assert_string_equal(page.v[1].etag, "\"abc-2\"");
	assert_string_equal(page.v[2].name, "dir/sub/");
	assert_true(page.v[2].is_prefix);
	assert_int_equal(page.v[2].size, 0);
	assert_string_equal(page.v[2].etag, "");
	client_list_page_clear(&page);
	assert_null(page.v);
	assert_int_equal(page.n, 0);
}

static void test_obs_namespace_truncated(void **state)
{
	/* OBS sends NextMarker whenever truncated, also without delimiter. */
	static const char xml[] =
		"<ListBucketResult xmlns=\"" NS_OBS "\">"
		"<IsTruncated>true</IsTruncated><NextMarker>k2</NextMarker>"
		"<Contents><Key>k1</Key><Size>5</Size></Contents>"
		"<Contents><Key>k2</Key><Size>6</Size></Contents>"
		"</ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(xml, 0, &page), 0);
	assert_int_equal(page.n, 2);
	assert_true(page.truncated);
	assert_string_equal(page.next, "k2");
	client_list_page_clear(&page);
}

static void test_prefixed_namespace_and_none(void **state)
{
	static const char prefixed[] =
		"<s3:ListBucketResult xmlns:s3=\"" NS_AWS "\">"
		"<s3:IsTruncated>false</s3:IsTruncated>"
		"<s3:Contents><s3:Key>x</s3:Key></s3:Contents>"
		"</s3:ListBucketResult>";
	static const char none[] =
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes>"
		"<CommonPrefixes><Prefix>q/</Prefix></CommonPrefixes>"
		"</ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(prefixed, 0, &page), 0);
	assert_int_equal(page.n, 1);
	assert_string_equal(page.v[0].name, "x");
	client_list_page_clear(&page);
	assert_int_equal(parse(none, 0, &page), 0);
	assert_int_equal(page.n, 2);
	assert_string_equal(page.v[1].name, "q/");
	assert_true(page.v[1].is_prefix);
	client_list_page_clear(&page);
}

static void test_url_encoding(void **state)
{
	/* EncodingType after the entries, as some servers send it. */
	static const char xml[] =
		"<ListBucketResult xmlns=\"" NS_AWS "\">"
		"<IsTruncated>true</IsTruncated>"
		"<NextMarker>d%2Fnext+marker</NextMarker>"
		"<Contents><Key>a%20b%2Bc.txt</Key></Contents>"
		"<Contents><Key>plus+is+space</Key></Contents>"
		"<Contents><Key>caf%C3%A9%25</Key></Contents>"
		"<CommonPrefixes><Prefix>d%2Fsub%20dir/</Prefix>"
		"</CommonPrefixes>"
		"<EncodingType>url</EncodingType></ListBucketResult>";
	static const char plain[] =
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<Contents><Key>a%20b+c</Key></Contents></ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(xml, 0, &page), 0);
	assert_int_equal(page.n, 4);
	assert_string_equal(page.v[0].name, "a b+c.txt");
	assert_string_equal(page.v[1].name, "plus is space");
	assert_string_equal(page.v[2].name, "caf\xc3\xa9%");
	assert_string_equal(page.v[3].name, "d/sub dir/");
	assert_string_equal(page.next, "d/next marker");
	client_list_page_clear(&page);
	/* Without EncodingType, names are taken literally. */
	assert_int_equal(parse(plain, 0, &page), 0);
	assert_string_equal(page.v[0].name, "a%20b+c");
	client_list_page_clear(&page);
}

static void test_next_marker_fallback(void **state)
{
	/* AWS V1 without a delimiter sends no NextMarker. */
	static const char keys_only[] =
		"<ListBucketResult><IsTruncated>true</IsTruncated>"
		"<Contents><Key>a</Key></Contents>"
		"<Contents><Key>b%2Fc</Key></Contents>"
		"<EncodingType>url</EncodingType></ListBucketResult>";
	/* The last prefix sorts after the last key. */
	static const char prefix_larger[] =
		"<ListBucketResult><IsTruncated>true</IsTruncated>"
		"<NextMarker></NextMarker>"
		"<Contents><Key>a/x</Key></Contents>"
		"<CommonPrefixes><Prefix>a/y/</Prefix></CommonPrefixes>"
		"<CommonPrefixes><Prefix>a/z/</Prefix></CommonPrefixes>"
		"</ListBucketResult>";
	static const char key_larger[] =
		"<ListBucketResult><IsTruncated>true</IsTruncated>"
		"<CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes>"
		"<Contents><Key>a/c</Key></Contents>"
		"</ListBucketResult>";
	static const char empty_truncated[] =
		"<ListBucketResult><IsTruncated>true</IsTruncated>"
		"</ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(keys_only, 0, &page), 0);
	assert_string_equal(page.next, "b/c");
	client_list_page_clear(&page);
	assert_int_equal(parse(prefix_larger, 0, &page), 0);
	assert_string_equal(page.next, "a/z/");
	/* Keys first, then prefixes, whatever the document order. */
	assert_string_equal(page.v[0].name, "a/x");
	client_list_page_clear(&page);
	assert_int_equal(parse(key_larger, 0, &page), 0);
	assert_string_equal(page.next, "a/c");
	assert_string_equal(page.v[0].name, "a/c");
	assert_string_equal(page.v[1].name, "a/b/");
	client_list_page_clear(&page);
	/* Truncated with nothing to continue from: an error, not a loop. */
	assert_int_equal(parse(empty_truncated, 0, &page), -EIO);
	assert_null(page.v);
	assert_null(page.next);
}

static void test_v2_token(void **state)
{
	static const char xml[] =
		"<ListBucketResult xmlns=\"" NS_AWS "\">"
		"<KeyCount>1</KeyCount><IsTruncated>true</IsTruncated>"
		"<ContinuationToken>old</ContinuationToken>"
		"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/"
		"wm36Hy4vbOwM%2B+=</NextContinuationToken>"
		"<NextMarker>ignored-in-v2</NextMarker>"
		"<Contents><Key>k%2B</Key></Contents>"
		"<EncodingType>url</EncodingType></ListBucketResult>";
	static const char no_token[] =
		"<ListBucketResult><IsTruncated>true</IsTruncated>"
		"<Contents><Key>k</Key></Contents></ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(xml, 1, &page), 0);
	assert_string_equal(page.v[0].name, "k+");
	/* Tokens are opaque: never URL-decoded. */
	assert_string_equal(
		page.next, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM%2B+=");
	client_list_page_clear(&page);
	/* V2 does not fall back to the last key. */
	assert_int_equal(parse(no_token, 1, &page), -EIO);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"not xml at all",
		"<ListBucketResult><Contents><Key>a</Key>",
		"<Other/>",
		"<Error><Code>AccessDenied</Code></Error>",
		"<ListBucketResult><IsTruncated>maybe</IsTruncated>"
		"</ListBucketResult>",
		"<ListBucketResult><Contents><Size>1</Size></Contents>"
		"</ListBucketResult>",
		"<ListBucketResult><Contents><Key>a</Key><Size>-1</Size>"
		"</Contents></ListBucketResult>",
		"<ListBucketResult><Contents><Key>a</Key><LastModified>"
		"yesterday</LastModified></Contents></ListBucketResult>",
		/* An external entity must not be fetched or expanded. */
		"<!DOCTYPE x [<!ENTITY e SYSTEM \"http://127.0.0.1:1/\">]>"
		"<ListBucketResult><Contents><Key>&e;</Key></Contents>"
		"</ListBucketResult>",
	};
	struct client_list_page page;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], 0, &page);

		if (rc == 0) {
			/* Only the entity case may parse, and then empty. */
			assert_int_equal(i, 9);
			assert_string_equal(page.v[0].name, "");
			client_list_page_clear(&page);
			continue;
		}
		assert_int_equal(rc, -EIO);
		assert_null(page.v);
	}
	/* Over the size cap. */
	assert_int_equal(client_listxml_parse("<ListBucketResult/>",
					      CLIENT_XML_MAX_BYTES + 1, 0,
					      &page),
			 -EIO);
}

static void test_nul_key_dropped(void **state)
{
	static const char xml[] =
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<Contents><Key>bad%00key</Key></Contents>"
		"<Contents><Key>good</Key></Contents>"
		"<EncodingType>url</EncodingType></ListBucketResult>";
	struct client_list_page page;

	(void)state;
	assert_int_equal(parse(xml, 0, &page), 0);
	assert_int_equal(page.n, 1);
	assert_string_equal(page.v[0].name, "good");
	client_list_page_clear(&page);
}

static void test_error_body(void **state)
{
	static const char xml[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<Error><Code>NoSuchKey</Code>"
		"<Message>The specified key does not exist.</Message>"
		"<Resource>/b/k</Resource>"
		"<RequestId>4442587FB7D0A2F9</RequestId></Error>";
	static const char obs[] =
		"<Error xmlns=\"" NS_OBS "\"><Code>AccessDenied</Code>"
		"<HostId>h</HostId></Error>";
	struct client_error err;

	(void)state;
	memset(&err, 0, sizeof(err));
	assert_int_equal(client_listxml_error(xml, strlen(xml), &err), 0);
	assert_string_equal(err.code, "NoSuchKey");
	assert_string_equal(err.message, "The specified key does not exist.");
	assert_string_equal(err.request_id, "4442587FB7D0A2F9");

	memset(&err, 0, sizeof(err));
	strcpy(err.request_id, "from-header");
	assert_int_equal(client_listxml_error(obs, strlen(obs), &err), 0);
	assert_string_equal(err.code, "AccessDenied");
	assert_string_equal(err.request_id, "from-header");
	assert_string_equal(err.message, "");

	assert_int_equal(client_listxml_error("<html>502</html>", 16, &err),
			 -EIO);
	assert_int_equal(client_listxml_error("", 0, &err), -EIO);
}

static void test_url_decode(void **state)
{
	char *s = NULL;

	(void)state;
	assert_int_equal(client_url_decode("a%20b%2Bc+d", 1, &s), 0);
	assert_string_equal(s, "a b+c d");
	free(s);
	assert_int_equal(client_url_decode("a+b%2f", 0, &s), 0);
	assert_string_equal(s, "a+b/");
	free(s);
	/* A stray "%" stays literal. */
	assert_int_equal(client_url_decode("100%_%4", 1, &s), 0);
	assert_string_equal(s, "100%_%4");
	free(s);
	assert_int_equal(client_url_decode("a%00b", 1, &s), -EILSEQ);
	assert_null(s);
}

static void test_iso8601(void **state)
{
	int64_t t = 0;

	(void)state;
	assert_int_equal(client_iso8601_parse("2015-07-01T00:32:16.482Z", &t),
			 0);
	assert_int_equal(t, 1435710736);
	assert_int_equal(client_iso8601_parse("2015-07-01T00:32:16Z", &t), 0);
	assert_int_equal(t, 1435710736);
	assert_int_equal(client_iso8601_parse("2015-07-01T02:32:16+02:00", &t),
			 0);
	assert_int_equal(t, 1435710736);
	assert_int_equal(
		client_iso8601_parse("2015-06-30T23:32:16.1-01:00", &t), 0);
	assert_int_equal(t, 1435710736);
	assert_int_equal(client_iso8601_parse("1970-01-01T00:00:00.000Z", &t),
			 0);
	assert_int_equal(t, 0);
	assert_int_equal(client_iso8601_parse("2015-07-01", &t), -EINVAL);
	assert_int_equal(client_iso8601_parse("2015-13-01T00:00:00Z", &t),
			 -EINVAL);
	assert_int_equal(client_iso8601_parse("2015-07-01T00:32:16.Z", &t),
			 -EINVAL);
	assert_int_equal(client_iso8601_parse("2015-07-01T00:32:16Zjunk", &t),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aws_namespace),
		cmocka_unit_test(test_obs_namespace_truncated),
		cmocka_unit_test(test_prefixed_namespace_and_none),
		cmocka_unit_test(test_url_encoding),
		cmocka_unit_test(test_next_marker_fallback),
		cmocka_unit_test(test_v2_token),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_nul_key_dropped),
		cmocka_unit_test(test_error_body),
		cmocka_unit_test(test_url_decode),
		cmocka_unit_test(test_iso8601),
	};
	int rc;

	xmlInitParser();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	xmlCleanupParser();
	return rc;
}
