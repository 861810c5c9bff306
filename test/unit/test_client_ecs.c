// SPDX-License-Identifier: MIT
/*
 * Unit tests for the ECS metadata credentials parser (src/client/ecs.c):
 * the securitykey document of [P §6.2] in the shapes the OBS SDK and CCE
 * produce, and the documents it must refuse.  The fetch itself is tested
 * end to end against a metadata server in test/integration.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client/ecs.h"

static int parse(const char *doc, struct client_temp_credentials *t)
{
	return client_ecs_parse(doc, strlen(doc), t);
}

static void test_ecs_documents(void **state)
{
	struct client_temp_credentials t;

	(void)state;
	/* The OBS SDK's format: microseconds. */
	assert_int_equal(parse("{\"credential\": {\"access\": \"AK1\", "
			       "\"secret\": \"SK1\","
			       " \"securitytoken\": \"TOK1\", \"expires_at\": "
			       "\"2026-05-10T18:42:00.000000Z\"}}",
			       &t),
			 0);
	assert_string_equal(t.access_key, "AK1");
	assert_string_equal(t.secret_key, "SK1");
	assert_string_equal(t.security_token, "TOK1");
	assert_int_equal(t.expires_sec, 1778438520);
	client_temp_credentials_clear(&t);
	assert_null(t.access_key);

	/* CCE: milliseconds, extra members, whitespace around values. */
	assert_int_equal(parse("{\"other\": 1, \"credential\": {\"access\": "
			       "\" AK2 \", \"secret\": \"SK2\\n\", "
			       "\"securitytoken\": \"\", \"expires_at\": "
			       "\"2026-05-10T18:42:00.000Z\", \"x\": [1]}}",
			       &t),
			 0);
	assert_string_equal(t.access_key, "AK2");
	assert_string_equal(t.secret_key, "SK2");
	assert_null(t.security_token);
	assert_int_equal(t.expires_sec, 1778438520);
	client_temp_credentials_clear(&t);

	/* No expiry: accepted, treated as not expiring. */
	assert_int_equal(parse("{\"credential\": {\"access\": \"A\", "
			       "\"secret\": \"S\", \"expires_at\": \"soon\"}}",
			       &t),
			 0);
	assert_int_equal(t.expires_sec, 0);
	client_temp_credentials_clear(&t);

	/* Refused, with nothing left behind. */
	assert_int_equal(parse("", &t), -EIO);
	assert_int_equal(parse("not json", &t), -EIO);
	assert_int_equal(parse("{\"credential\": \"x\"}", &t), -EIO);
	assert_int_equal(parse("{\"access\": \"A\", \"secret\": \"S\"}", &t),
			 -EIO);
	assert_int_equal(
		parse("{\"credential\": {\"access\": \"A\", \"secret\": 5}}",
		      &t),
		-EIO);
	assert_int_equal(
		parse("{\"credential\": {\"access\": \"\", \"secret\": \"S\"}}",
		      &t),
		-EIO);
	assert_null(t.access_key);
	assert_null(t.secret_key);
	/* Not NUL-terminated: the length is the limit. */
	const char *doc = "{\"credential\":{\"access\":\"A\",\"secret\":\"S\"}}"
			  "garbage";
	assert_int_equal(client_ecs_parse(doc, strlen(doc) - 7, &t), 0);
	client_temp_credentials_clear(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ecs_documents),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
