// SPDX-License-Identifier: MIT
/* Unit tests for src/cli/metrics.c: the Prometheus text exposition is
 * well formed (a HELP and TYPE per family before its samples, counters
 * ending _total, valid names, escaped labels) and carries the snapshot's
 * numbers; the status JSON parses and carries them too. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/metrics.h"

static void fill(struct metrics_snapshot *m)
{
	memset(m, 0, sizeof(*m));
	m->version = "0.1.0";
	m->bucket = "datasets";
	m->prefix = "imagenet/";
	m->endpoint = "http://127.0.0.1:9000";
	m->mountpoint = "/mnt/da\"ta\\x\ny"; /* needs escaping */
	m->cache_dir = "/cache/hoardfs";
	m->pid = 4242;
	m->uptime_sec = 3723;
	m->cache_limit_bytes = 400ull << 30;
	m->cache_min_free_bytes = 5ull << 30;
	m->cache_fs_free_bytes = 123456789;
	m->cache_objects = 312;
	m->fetch_bytes_per_sec = 1536.5;
	m->sched.parts_fetched = 320;
	m->sched.bytes_fetched = 1000000;
	m->sched.fetch_errors = 2;
	m->sched.bytes_served_cached = 3000;
	m->sched.bytes_served_fetched = 700;
	m->sched.bytes_served_direct = 300;
	m->sched.evictions = 5;
	m->sched.bytes_evicted = 5000;
	m->sched.verify_failures = 1;
	m->sched.cached_bytes = 999999;
	m->client.attempts[CLIENT_KIND_HEAD] = 3;
	m->client.attempts[CLIENT_KIND_GET] = 322;
	m->client.attempts[CLIENT_KIND_LIST] = 9;
	m->client.retries[CLIENT_KIND_GET] = 2;
	m->client.failed[CLIENT_KIND_GET] = 1;
	m->client.failed[CLIENT_KIND_HEAD] = 1;
	m->client.get_bytes = 1000000;
	m->client_totals.throttled = 7;
	m->client_totals.resumed = 4;
	m->client_totals.inflight_cap = 12;
	m->client_totals.inflight_cap_min = 3;
	m->client_totals.refreshes = 1;
}

/* Find the value of the sample line that starts with @prefix. */
static double sample(const char *text, const char *prefix)
{
	const char *p = text;
	size_t len = strlen(prefix);

	while (p && *p) {
		if (strncmp(p, prefix, len) == 0 && p[len] == ' ')
			return strtod(p + len + 1, NULL);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	fail_msg("no sample '%s'", prefix);
	return -1;
}

static int name_ok(const char *s, size_t len)
{
	if (len == 0 ||
	    !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	for (size_t i = 1; i < len; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' ||
		      s[i] == ':'))
			return 0;
	return 1;
}

/* A strict reader of the text format, as much as we use of it. */
static void check_exposition(const char *text)
{
	char family[128] = "", type[16] = "", helped[128] = "";
	const char *line = text;
	int samples = 0;

	assert_true(text[strlen(text) - 1] == '\n');
	while (*line) {
		const char *end = strchr(line, '\n');
		size_t len = (size_t)(end - line);
		char buf[2048];

		assert_non_null(end);
		assert_true(len < sizeof(buf));
		memcpy(buf, line, len);
		buf[len] = '\0';
		if (strncmp(buf, "# HELP ", 7) == 0) {
			assert_int_equal(sscanf(buf + 7, "%127s", helped), 1);
			assert_true(strncmp(helped, "hoardfs_", 8) == 0);
		} else if (strncmp(buf, "# TYPE ", 7) == 0) {
			assert_int_equal(
				sscanf(buf + 7, "%127s %15s", family, type), 2);
			assert_string_equal(family, helped);
			assert_true(strcmp(type, "counter") == 0 ||
				    strcmp(type, "gauge") == 0);
			if (strcmp(type, "counter") == 0)
				assert_true(strlen(family) > 6 &&
					    strcmp(family + strlen(family) - 6,
						   "_total") == 0);
		} else {
			const char *brace = strchr(buf, '{');
			const char *close = strrchr(buf, '}');
			char *num_end;

			assert_non_null(brace);
			assert_non_null(close);
			assert_true(name_ok(buf, (size_t)(brace - buf)));
			/* a sample of the family just declared */
			assert_int_equal((size_t)(brace - buf), strlen(family));
			assert_memory_equal(buf, family, strlen(family));
			/* labels: name="value" pairs, escapes only \\ \" \n */
			for (const char *p = brace + 1; p < close;) {
				const char *eq = strchr(p, '=');

				assert_true(eq && eq < close);
				assert_true(name_ok(p, (size_t)(eq - p)));
				assert_true(eq[1] == '"');
				p = eq + 2;
				while (*p != '"') {
					assert_true(*p != '\n' && p < close);
					if (*p == '\\') {
						assert_true(p[1] == '\\' ||
							    p[1] == '"' ||
							    p[1] == 'n');
						p++;
					}
					p++;
				}
				p++;
				assert_true(*p == ',' || p == close);
				if (*p == ',')
					p++;
			}
			assert_true(close[1] == ' ');
			strtod(close + 2, &num_end);
			assert_true(num_end > close + 2 && *num_end == '\0');
			samples++;
		}
		line = end + 1;
	}
	assert_true(samples >= 20);
}

static void test_prometheus(void **state)
{
	struct metrics_snapshot m;
	char *text = NULL;
	size_t len = 0;
	const char *mnt = "mountpoint=\"/mnt/da\\\"ta\\\\x\\ny\"";
	char key[256];

	(void)state;
	fill(&m);
	assert_int_equal(metrics_prometheus(&m, &text, &len), 0);
	assert_int_equal(len, strlen(text));
	check_exposition(text);
#define S(name, extra)                                                         \
	(snprintf(key, sizeof(key), "hoardfs_%s{%s%s}", name, mnt, extra),     \
	 sample(text, key))
	assert_true(S("cache_used_bytes", "") == 999999);
	assert_true(S("cache_limit_bytes", "") == 400.0 * (1 << 30));
	assert_true(S("cache_objects", "") == 312);
	assert_true(S("read_bytes_total", ",source=\"cache\"") == 3000);
	assert_true(S("read_bytes_total", ",source=\"store\"") == 1000);
	assert_true(S("read_direct_bytes_total", "") == 300);
	assert_true(S("fetched_bytes_total", "") == 1000000);
	assert_true(S("fetch_errors_total", "") == 2);
	assert_true(S("requests_total", ",op=\"GET\"") == 322);
	assert_true(S("requests_total", ",op=\"HEAD\"") == 3);
	assert_true(S("requests_total", ",op=\"LIST\"") == 9);
	assert_true(S("request_retries_total", ",op=\"GET\"") == 2);
	assert_true(S("request_failures_total", ",op=\"HEAD\"") == 1);
	assert_true(S("evictions_total", "") == 5);
	assert_true(S("uptime_seconds", "") == 3723);
	assert_true(S("fetch_throughput_bytes_per_second", "") == 1536.5);
	assert_true(S("requests_throttled_total", "") == 7);
	assert_true(S("get_resumed_total", "") == 4);
	assert_true(S("requests_inflight_cap", "") == 12);
#undef S
	assert_non_null(
		strstr(text, "bucket=\"datasets\",prefix=\"imagenet/\""));
	free(text);
}

static void test_json(void **state)
{
	struct metrics_snapshot m;
	json_error_t jerr;
	json_t *root;
	char *text = NULL;
	size_t len = 0;

	(void)state;
	fill(&m);
	assert_int_equal(metrics_json(&m, &text, &len), 0);
	root = json_loads(text, 0, &jerr);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "bucket")),
			    "datasets");
	assert_string_equal(
		json_string_value(json_object_get(root, "mountpoint")),
		"/mnt/da\"ta\\x\ny");
	assert_int_equal(json_integer_value(json_object_get(root, "pid")),
			 4242);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(root, "cache"), "objects")),
			 312);
	assert_int_equal(
		json_integer_value(json_object_get(
			json_object_get(json_object_get(root, "requests"),
					"GET"),
			"sent")),
		322);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(root, "requests"), "failed")),
			 2);
	assert_true(
		json_real_value(json_object_get(json_object_get(root, "reads"),
						"hit_ratio")) == 0.75);
	json_decref(root);
	free(text);
	/* Nothing read yet: no ratio rather than a made-up one. */
	memset(&m.sched, 0, sizeof(m.sched));
	assert_true(metrics_hit_ratio(&m) < 0);
	assert_int_equal(metrics_json(&m, &text, &len), 0);
	root = json_loads(text, 0, &jerr);
	assert_true(json_is_null(
		json_object_get(json_object_get(root, "reads"), "hit_ratio")));
	json_decref(root);
	free(text);
}

static void test_log_line(void **state)
{
	struct metrics_snapshot m;
	char line[1024], small[40];

	(void)state;
	fill(&m);
	metrics_log_line(&m, line, sizeof(line));
	assert_true(strncmp(line, "status: ", 8) == 0);
	assert_non_null(strstr(line, " GET=322 "));
	assert_non_null(strstr(line, " hit_ratio=0.750 "));
	assert_non_null(strstr(line, " cache_objects=312 "));
	assert_non_null(strstr(line, " throttled=7 "));
	assert_null(strchr(line, '\n'));
	metrics_log_line(&m, small, sizeof(small)); /* truncates safely */
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void test_label_escape(void **state)
{
	char out[16];

	(void)state;
	metrics_label_escape("a\"b\\c\nd", out, sizeof(out));
	assert_string_equal(out, "a\\\"b\\\\c\\nd");
	metrics_label_escape("0123456789abcdefghij", out, sizeof(out));
	assert_true(strlen(out) < sizeof(out));
	metrics_label_escape(NULL, out, sizeof(out));
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prometheus),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_log_line),
		cmocka_unit_test(test_label_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
