// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the passwd-file parser cli_passwd_parse(): any
 * bytes, not NUL-terminated, so a read past the end is an ASan report.
 * Beyond that it checks the promises of src/cli/cli.h: on success the
 * access key and secret key are non-empty, trimmed, single-line and free
 * of ':', and a token is NULL or non-empty; on failure nothing is held.
 */
#include <errno.h>
#include <string.h>

#include "cli/cli.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check_field(const char *s)
{
	size_t len = strlen(s);

	FUZZ_CHECK(len > 0);
	FUZZ_CHECK(!strpbrk(s, ":\n"));
	FUZZ_CHECK(!strchr(" \t\r", s[0]) && !strchr(" \t\r", s[len - 1]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cli_credentials c;
	char *text = malloc(size ? size : 1); /* exactly @size bytes */
	int rc;

	if (!text)
		return 0;
	memcpy(text, data, size);
	rc = cli_passwd_parse(text, size, "bucket", &c);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc == 0) {
		check_field(c.access_key);
		check_field(c.secret_key);
		if (c.security_token)
			check_field(c.security_token);
	} else {
		FUZZ_CHECK(!c.access_key && !c.secret_key && !c.security_token);
	}
	cli_credentials_free(&c);
	free(text);
	return 0;
}
