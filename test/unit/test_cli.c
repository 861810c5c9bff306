// SPDX-License-Identifier: MIT
/* Unit tests for src/cli: option forms, the source URL, environment
 * fallbacks, and passwd file lines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static char err[512];

static int setup_env(void **state)
{
	(void)state;
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("OBS_ENDPOINT");
	unsetenv("S3_ENDPOINT");
	unsetenv("S3_USE_HTTPS");
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
	unsetenv("AWS_CA_BUNDLE");
	return 0;
}

static void test_long_and_o_forms_agree(void **state)
{
	char *a[] = {"hoardfs",	       "--endpoint",  "http://h:9",
		     "--cache-dir=/c", "--part-size", "1MiB",
		     "--metadata-ttl", "forever",     "--path-style",
		     "obs://bkt/a/b/", "/mnt"};
	char *b[] = {"hoardfs", "-o",
		     "endpoint=http://h:9,cache_dir=/c,part_size=1MiB,"
		     "metadata_ttl=forever,path_style,allow_other",
		     "s3://bkt//a/b", "/mnt"};
	struct cli_options x, y;

	(void)state;
	assert_int_equal(cli_parse(ARGC(a), a, &x, err, sizeof(err)), 0);
	assert_int_equal(cli_parse(ARGC(b), b, &y, err, sizeof(err)), 0);
	assert_string_equal(x.endpoint, "http://h:9");
	assert_string_equal(y.endpoint, "http://h:9");
	assert_string_equal(x.cache_dir, "/c");
	assert_string_equal(y.cache_dir, "/c");
	assert_int_equal(x.part_size, 1 << 20);
	assert_int_equal(y.part_size, 1 << 20);
	assert_int_equal(x.metadata_ttl_sec, -1);
	assert_int_equal(y.metadata_ttl_sec, -1);
	assert_true(x.path_style && y.path_style);
	assert_string_equal(x.bucket, "bkt");
	assert_string_equal(x.prefix, "a/b/");
	assert_string_equal(y.prefix, "a/b/");
	assert_int_equal(y.nfuse_opts, 1);
	assert_string_equal(y.fuse_opts[0], "allow_other");
	assert_int_equal(x.nfuse_opts, 0);
	cli_options_free(&x);
	cli_options_free(&y);
}

static void test_defaults(void **state)
{
	char *a[] = {"hoardfs", "--endpoint", "https://obs.example.com",
		     "obs://bkt", "/mnt"};
	struct cli_options o;

	(void)state;
	assert_int_equal(cli_parse(ARGC(a), a, &o, err, sizeof(err)), 0);
	assert_string_equal(o.prefix, "");
	assert_int_equal(o.part_size, CLI_DEFAULT_PART_SIZE);
	assert_int_equal(o.parallel, CLI_DEFAULT_PARALLEL);
	assert_int_equal(o.metadata_ttl_sec, CLI_DEFAULT_METADATA_TTL);
	assert_int_equal(o.file_mode, 0444);
	assert_int_equal(o.dir_mode, 0555);
	assert_null(o.region);
	assert_false(o.path_style);
	assert_int_equal(o.read_ahead_kib, CLI_DEFAULT_READ_AHEAD_KIB);
	cli_options_free(&o);
}

static void expect_usage_error(char **argv, int argc, const char *named)
{
	struct cli_options o;

	assert_int_equal(cli_parse(argc, argv, &o, err, sizeof(err)), -EINVAL);
	if (!strstr(err, named))
		fail_msg("error '%s' does not name '%s'", err, named);
	cli_options_free(&o);
}

static void test_bad_options_are_named(void **state)
{
	char *a[] = {"hoardfs", "--nope", "s3://bkt", "/m"};
	char *b[] = {"hoardfs", "-o", "cache_dir", "s3://bkt", "/m"};
	char *c[] = {"hoardfs", "-o", "path_style=1", "s3://bkt", "/m"};
	char *d[] = {"hoardfs", "--umask", "999", "s3://bkt", "/m"};
	char *e[] = {"hoardfs", "--uid", "-1", "s3://bkt", "/m"};
	char *f[] = {"hoardfs", "--endpoint", "http://h", "s3://b", "/m"};
	char *g[] = {"hoardfs", "-x", "s3://bkt", "/m"};
	char *h[] = {"hoardfs", "--path-style=yes", "s3://bkt", "/m"};
	char *i[] = {"hoardfs", "--endpoint", "http://h", "a", "b", "c"};
	char *j[] = {"hoardfs", "--max-read-ahead-kb", "1M", "s3://bkt", "/m"};
	char *k[] = {"hoardfs", "-o", "max_read_ahead_kb=70000", "s3://bkt",
		     "/m"};

	(void)state;
	expect_usage_error(a, ARGC(a), "--nope");
	expect_usage_error(b, ARGC(b), "cache_dir");
	expect_usage_error(c, ARGC(c), "path_style");
	expect_usage_error(d, ARGC(d), "--umask");
	expect_usage_error(e, ARGC(e), "--uid");
	expect_usage_error(f, ARGC(f), "bucket name");
	expect_usage_error(g, ARGC(g), "-x");
	expect_usage_error(h, ARGC(h), "--path-style");
	expect_usage_error(i, ARGC(i), "'c'");
	expect_usage_error(j, ARGC(j), "--max-read-ahead-kb");
	expect_usage_error(k, ARGC(k), "max_read_ahead_kb");
}

static void test_environment_fallbacks(void **state)
{
	char *a[] = {"hoardfs", "obs://bkt", "/mnt"};
	struct cli_options o;

	(void)state;
	setenv("S3_ENDPOINT", "obs.cn-north-4.myhuaweicloud.com", 1);
	setenv("S3_USE_HTTPS", "0", 1);
	setenv("AWS_DEFAULT_REGION", "cn-north-4", 1);
	assert_int_equal(cli_parse(ARGC(a), a, &o, err, sizeof(err)), 0);
	assert_string_equal(o.endpoint,
			    "http://obs.cn-north-4.myhuaweicloud.com");
	assert_string_equal(o.region, "cn-north-4");
	cli_options_free(&o);

	setenv("AWS_ENDPOINT_URL", "https://aws.example", 1);
	assert_int_equal(cli_parse(ARGC(a), a, &o, err, sizeof(err)), 0);
	assert_string_equal(o.endpoint, "https://aws.example");
	cli_options_free(&o);

	setenv("OBS_ENDPOINT", "https://obs.example", 1);
	assert_int_equal(cli_parse(ARGC(a), a, &o, err, sizeof(err)), 0);
	assert_string_equal(o.endpoint, "https://obs.example");
	cli_options_free(&o);
	setup_env(NULL);
}

static void test_umask_and_modes(void **state)
{
	char *a[] = {"hoardfs",
		     "--endpoint",
		     "http://h",
		     "-o",
		     "umask=022,uid=1000,gid=1001",
		     "s3://bkt",
		     "/m"};
	struct cli_options o;

	(void)state;
	assert_int_equal(cli_parse(ARGC(a), a, &o, err, sizeof(err)), 0);
	assert_int_equal(o.file_mode, 0644);
	assert_int_equal(o.dir_mode, 0755);
	assert_int_equal(o.uid, 1000);
	assert_int_equal(o.gid, 1001);
	cli_options_free(&o);
}

static void test_passwd_lines(void **state)
{
	struct cli_credentials c;
	const char *t1 = "# keys\n\n  AK1 : SK1 \n";
	const char *t2 =
		"AK2:SK2:"
		"TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT"
		"TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT\n"
		"AK3:SK3\n";
	const char *t3 = "only-one-field\na:b:c:d\n:sk\nak:\n";

	(void)state;
	assert_int_equal(cli_passwd_parse(t1, strlen(t1), NULL, &c), 0);
	assert_string_equal(c.access_key, "AK1");
	assert_string_equal(c.secret_key, "SK1");
	assert_null(c.security_token);
	cli_credentials_free(&c);
	assert_int_equal(cli_passwd_parse(t2, strlen(t2), NULL, &c), 0);
	assert_string_equal(c.access_key, "AK2");
	assert_int_equal(strlen(c.security_token), 120);
	cli_credentials_free(&c);
	assert_int_equal(cli_passwd_parse(t3, strlen(t3), NULL, &c), -EINVAL);
	/* s3fs's bucket form: the right bucket is used, another one skipped
	 * (never a secret key sent as a token). */
	{
		const char *t4 = "other:AKO:SKO\nmine:AKM:SKM\n";

		assert_int_equal(cli_passwd_parse(t4, strlen(t4), "mine", &c),
				 0);
		assert_string_equal(c.access_key, "AKM");
		assert_string_equal(c.secret_key, "SKM");
		assert_null(c.security_token);
		cli_credentials_free(&c);
		assert_int_equal(cli_passwd_parse(t4, 14, "mine", &c), -EINVAL);
	}
	/* Not NUL-terminated: the length is the limit. */
	assert_int_equal(cli_passwd_parse("AK:SKX", 5, NULL, &c), 0);
	assert_string_equal(c.secret_key, "SK");
	cli_credentials_free(&c);
}

static void test_signature_and_resolve(void **state)
{
	char *a[] = {"hoardfs",		 "--endpoint", "http://h",
		     "--signature",	 "obs",	       "--resolve",
		     "b.h:80:127.0.0.1", "s3://bkt",   "/m"};
	char *b[] = {"hoardfs",	     "--endpoint", "http://h", "-o",
		     "signature=v2", "s3://bkt",   "/m"};
	char *bad1[] = {"hoardfs", "--endpoint", "http://h", "--signature",
			"v3",	   "s3://bkt",	 "/m"};
	char *bad2[] = {"hoardfs", "--endpoint", "http://h", "--resolve",
			"b.h:80",  "s3://bkt",	 "/m"};
	char *bad3[] = {"hoardfs",
			"--endpoint",
			"http://h",
			"-o",
			"resolve=b.h:x:127.0.0.1",
			"s3://bkt",
			"/m"};
	struct cli_options o;

	(void)state;
	assert_int_equal(cli_parse(ARGC(a), a, &o, err, sizeof(err)), 0);
	assert_int_equal(o.signature, CLIENT_SIG_OBS);
	assert_string_equal(o.resolve, "b.h:80:127.0.0.1");
	cli_options_free(&o);
	assert_int_equal(cli_parse(ARGC(b), b, &o, err, sizeof(err)), 0);
	assert_int_equal(o.signature, CLIENT_SIG_V2);
	assert_null(o.resolve);
	cli_options_free(&o);
	assert_int_equal(cli_parse(ARGC(bad1), bad1, &o, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "--signature"));
	cli_options_free(&o);
	assert_int_equal(cli_parse(ARGC(bad2), bad2, &o, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "HOST:PORT:ADDRESS"));
	cli_options_free(&o);
	assert_int_equal(cli_parse(ARGC(bad3), bad3, &o, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "-o resolve"));
	cli_options_free(&o);
}

static void test_aws_credentials_file(void **state)
{
	static const char text[] = "# comment\n"
				   "[default]\n"
				   "aws_access_key_id = DEF\n"
				   "aws_secret_access_key=DEFSK\n"
				   "\n"
				   "[ prod ]\n"
				   "; another comment\n"
				   "  aws_access_key_id =  PROD  \n"
				   "aws_secret_access_key = PRODSK\r\n"
				   "aws_security_token = OLD\n"
				   "aws_session_token = TOK\n"
				   "region = cn-north-4\n"
				   "[broken]\n"
				   "aws_access_key_id = X\n";
	struct cli_credentials c;

	(void)state;
	assert_int_equal(
		cli_aws_credentials_parse(text, strlen(text), "default", &c),
		0);
	assert_string_equal(c.access_key, "DEF");
	assert_string_equal(c.secret_key, "DEFSK");
	assert_null(c.security_token);
	cli_credentials_free(&c);
	assert_int_equal(
		cli_aws_credentials_parse(text, strlen(text), "prod", &c), 0);
	assert_string_equal(c.access_key, "PROD");
	assert_string_equal(c.secret_key, "PRODSK");
	assert_string_equal(c.security_token, "TOK");
	cli_credentials_free(&c);
	assert_int_equal(
		cli_aws_credentials_parse(text, strlen(text), "broken", &c),
		-EINVAL);
	assert_null(c.access_key);
	assert_int_equal(
		cli_aws_credentials_parse(text, strlen(text), "nope", &c),
		-ENOENT);
	assert_int_equal(cli_aws_credentials_parse("", 0, "default", &c),
			 -ENOENT);
}

/* The environment steps of the chain, in order (no network: the last
 * step, the metadata service, is switched off). */
static void test_credential_chain_env(void **state)
{
	struct cli_credentials c;
	char path[] = "/tmp/hoardfs-test-creds-XXXXXX";
	static const char file[] = "[default]\naws_access_key_id=FAK\n"
				   "aws_secret_access_key=FSK\n"
				   "[p2]\naws_access_key_id=P2AK\n"
				   "aws_secret_access_key=P2SK\n";
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, file, strlen(file)), (ssize_t)strlen(file));
	close(fd);
	setenv("HOARDFS_ECS_METADATA_URL", "off", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	unsetenv("AWS_PROFILE");
	setenv("ACCESS_KEY_ID", "MAK", 1);
	setenv("SECRET_ACCESS_KEY", "MSK", 1);
	setenv("SECURITY_TOKEN", "MTOK", 1);
	setenv("AWS_ACCESS_KEY_ID", "AAK", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ASK", 1);
	setenv("OBS_ACCESS_KEY_ID", "OAK", 1);
	setenv("OBS_SECRET_ACCESS_KEY", "OSK", 1);

	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 0);
	assert_string_equal(c.access_key, "OAK");
	assert_null(c.refresh);
	cli_credentials_free(&c);
	unsetenv("OBS_ACCESS_KEY_ID");
	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 0);
	assert_string_equal(c.access_key, "AAK");
	cli_credentials_free(&c);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 0);
	assert_string_equal(c.access_key, "MAK");
	assert_string_equal(c.security_token, "MTOK");
	cli_credentials_free(&c);
	unsetenv("ACCESS_KEY_ID");
	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 0);
	assert_string_equal(c.access_key, "FAK");
	assert_null(c.security_token);
	cli_credentials_free(&c);
	setenv("AWS_PROFILE", "p2", 1);
	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 0);
	assert_string_equal(c.access_key, "P2AK");
	cli_credentials_free(&c);
	/* A profile that is not there is an error, not a fall-through. */
	setenv("AWS_PROFILE", "p3", 1);
	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "p3"));
	unsetenv("AWS_PROFILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
	assert_int_equal(cli_credentials_load(NULL, NULL, &c, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "no credentials"));
	assert_null(strstr(err, "MSK"));

	unlink(path);
	unsetenv("HOARDFS_ECS_METADATA_URL");
	unsetenv("AWS_SHARED_CREDENTIALS_FILE");
	unsetenv("SECRET_ACCESS_KEY");
	unsetenv("SECURITY_TOKEN");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("OBS_SECRET_ACCESS_KEY");
}

static void test_mount_bdi(void **state)
{
	/* proc(5) mountinfo lines; the mount point field escapes a space as
	 * \040, and a later mount on the same path hides an earlier one. */
	static const char text[] =
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		"40 22 0:38 / /mnt/my\\040data rw,nosuid shared:20 - "
		"fuse.hoardfs s3://b rw,user_id=0\n"
		"41 40 0:52 / /mnt/my\\040data rw - fuse.hoardfs s3://c rw\n"
		"42 22 0:39 / /mnt/other rw - fuse.hoardfs s3://d rw";
	char dev[16];
	FILE *f;

	(void)state;
	f = fmemopen((void *)text, sizeof(text) - 1, "r");
	assert_non_null(f);
	assert_int_equal(cli_mount_bdi(f, "/mnt/my data", dev, sizeof(dev)), 0);
	assert_string_equal(dev, "0:52");
	rewind(f);
	assert_int_equal(cli_mount_bdi(f, "/mnt/other", dev, sizeof(dev)), 0);
	assert_string_equal(dev, "0:39"); /* a last line without newline */
	rewind(f);
	assert_int_equal(cli_mount_bdi(f, "/mnt/my", dev, sizeof(dev)),
			 -ENOENT);
	rewind(f);
	assert_int_equal(cli_mount_bdi(f, "/", dev, 3), -ENAMETOOLONG);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_long_and_o_forms_agree, setup_env),
		cmocka_unit_test_setup(test_defaults, setup_env),
		cmocka_unit_test_setup(test_bad_options_are_named, setup_env),
		cmocka_unit_test_setup(test_environment_fallbacks, setup_env),
		cmocka_unit_test_setup(test_umask_and_modes, setup_env),
		cmocka_unit_test(test_passwd_lines),
		cmocka_unit_test_setup(test_signature_and_resolve, setup_env),
		cmocka_unit_test(test_aws_credentials_file),
		cmocka_unit_test(test_credential_chain_env),
		cmocka_unit_test(test_mount_bdi),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
