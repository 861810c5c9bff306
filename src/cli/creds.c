// SPDX-License-Identifier: MIT
/*
 * Credentials: a passwd file or the environment, in the order the man page
 * gives.  Secrets are copied into owned strings and wiped on free; no
 * function here writes a secret to a log or an error message.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* A passwd file holds a line or three; anything larger is not one. */
#define PASSWD_MAX_BYTES (64 << 10)

static void wipe_free(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

void cli_credentials_free(struct cli_credentials *c)
{
	wipe_free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->security_token);
	memset(c, 0, sizeof(*c));
}

/* A copy of [b, e) without surrounding blanks. */
static char *trimmed(const char *b, const char *e)
{
	while (b < e && (*b == ' ' || *b == '\t' || *b == '\r'))
		b++;
	while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	return strndup(b, (size_t)(e - b));
}

int cli_passwd_parse(const char *text, size_t len, struct cli_credentials *c)
{
	const char *p = text, *end = text + len;

	memset(c, 0, sizeof(*c));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *f[3], *fe[3];
		int nf = 0;

		f[0] = p;
		for (const char *q = p; q < le && nf < 3; q++) {
			if (*q != ':')
				continue;
			fe[nf++] = q;
			if (nf < 3)
				f[nf] = q + 1;
		}
		if (nf < 3)
			fe[nf] = le;
		p = nl ? nl + 1 : end;
		/* Fields: AK, SK, optional token; a fourth ':' is an error. */
		if (f[0] < le && *f[0] == '#')
			continue;
		if (nf < 1 || nf > 2)
			continue;
		/* A NUL byte would silently cut a field short (strndup). */
		if (memchr(f[0], '\0', (size_t)(le - f[0])))
			continue;
		c->access_key = trimmed(f[0], fe[0]);
		c->secret_key = trimmed(f[1], fe[1]);
		c->security_token = nf == 2 ? trimmed(f[2], fe[2]) : NULL;
		if (!c->access_key || !c->secret_key ||
		    (nf == 2 && !c->security_token)) {
			cli_credentials_free(c);
			return -ENOMEM;
		}
		if (c->access_key[0] && c->secret_key[0]) {
			if (c->security_token && !c->security_token[0]) {
				free(c->security_token);
				c->security_token = NULL;
			}
			return 0;
		}
		cli_credentials_free(c);
	}
	return -EINVAL;
}

static int from_file(const char *path, struct cli_credentials *c, char *err,
		     size_t errlen)
{
	char *buf = NULL;
	struct stat st;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "passwd file %s: %s", path,
			 strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "passwd file %s: not a regular file",
			 path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen,
			 "passwd file %s has mode %04o; it must not be "
			 "accessible by group or others (chmod 600 %s)",
			 path, (unsigned)(st.st_mode & 07777), path);
		rc = -EPERM;
		goto out;
	}
	buf = malloc(PASSWD_MAX_BYTES);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	n = read(fd, buf, PASSWD_MAX_BYTES);
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "passwd file %s: %s", path,
			 strerror(errno));
		goto out;
	}
	rc = cli_passwd_parse(buf, (size_t)n, c);
	if (rc == -EINVAL)
		snprintf(err, errlen,
			 "passwd file %s: no line of the form "
			 "ACCESS_KEY:SECRET_KEY[:TOKEN]",
			 path);
	c->source = "passwd file";
	explicit_bzero(buf, (size_t)(n > 0 ? n : 0));
out:
	free(buf);
	close(fd);
	return rc;
}

static int from_env(const char *ak_var, const char *sk_var,
		    const char *token_var, struct cli_credentials *c)
{
	const char *ak = getenv(ak_var), *sk = getenv(sk_var);
	const char *token = getenv(token_var);

	if (!ak || !ak[0] || !sk || !sk[0])
		return -ENOENT;
	c->access_key = strdup(ak);
	c->secret_key = strdup(sk);
	c->security_token = token && token[0] ? strdup(token) : NULL;
	if (!c->access_key || !c->secret_key ||
	    (token && token[0] && !c->security_token)) {
		cli_credentials_free(c);
		return -ENOMEM;
	}
	c->source = ak_var;
	return 0;
}

int cli_credentials_load(const char *passwd_file, struct cli_credentials *c,
			 char *err, size_t errlen)
{
	int rc;

	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	if (passwd_file)
		return from_file(passwd_file, c, err, errlen);
	rc = from_env("OBS_ACCESS_KEY_ID", "OBS_SECRET_ACCESS_KEY",
		      "OBS_SECURITY_TOKEN", c);
	if (rc == -ENOENT)
		rc = from_env("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
			      "AWS_SESSION_TOKEN", c);
	if (rc == -ENOENT)
		snprintf(err, errlen,
			 "no credentials: give --passwd-file or set "
			 "OBS_ACCESS_KEY_ID/OBS_SECRET_ACCESS_KEY or "
			 "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY");
	return rc;
}
