// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the option parser: the input, split at NUL bytes,
 * is argv[1..] of cli_parse().  Beyond what the sanitizers catch, it
 * checks the promises of src/cli/cli.h: an error comes with a one-line
 * message (it quotes the bad value as given, so a value holding a newline
 * makes two lines); a successful parse of a mount command has a bucket, a
 * prefix that is empty or ends in '/', a mountpoint, an http(s) endpoint,
 * and values within the documented ranges; cli_options_free releases all.
 */
#include <errno.h>
#include <string.h>

#include "cli/cli.h"
#include "fuzz.h"

#define FUZZ_MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* The environment supplies defaults; keep runs reproducible. */
	unsetenv("OBS_ENDPOINT");
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("S3_ENDPOINT");
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
	unsetenv("AWS_CA_BUNDLE");
	return 0;
}

static void check_options(const struct cli_options *o)
{
	size_t plen;

	if (o->help || o->version)
		return;
	FUZZ_CHECK(o->bucket && o->bucket[0] && o->source && o->mountpoint);
	FUZZ_CHECK(o->prefix);
	plen = strlen(o->prefix);
	FUZZ_CHECK(plen == 0 ||
		   (o->prefix[plen - 1] == '/' && o->prefix[0] != '/'));
	FUZZ_CHECK(o->endpoint && (strncmp(o->endpoint, "http://", 7) == 0 ||
				   strncmp(o->endpoint, "https://", 8) == 0));
	FUZZ_CHECK(o->parallel >= 1 && o->parallel <= CLI_MAX_PARALLEL);
	FUZZ_CHECK(o->part_size >= (64u << 10) && o->part_size <= (1u << 30));
	FUZZ_CHECK((o->file_mode & ~07777u) == 0 &&
		   (o->dir_mode & ~07777u) == 0);
	for (size_t i = 0; i < o->nfuse_opts; i++)
		FUZZ_CHECK(o->fuse_opts[i] && o->fuse_opts[i][0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[FUZZ_MAX_ARGS + 2], *buf;
	struct cli_options o;
	char err[256];
	int argc = 1, rc;

	/* A NUL-terminated copy; each NUL inside ends one argument. */
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[0] = "hoardfs";
	for (size_t i = 0; i <= size && argc <= FUZZ_MAX_ARGS;) {
		argv[argc++] = buf + i;
		i += strlen(buf + i) + 1;
	}
	argv[argc] = NULL;

	rc = cli_parse(argc, argv, &o, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc == -EINVAL) /* one line, unless it quotes an argument's '\n' */
		FUZZ_CHECK(err[0] &&
			   (!strchr(err, '\n') || memchr(data, '\n', size)));
	if (rc == 0)
		check_options(&o);
	cli_options_free(&o);
	free(buf);
	return 0;
}
