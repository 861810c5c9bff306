// SPDX-License-Identifier: MIT
/*
 * Credentials: the chain of [P §6.1] in the order the man page gives -- a
 * passwd file, the OBS_*, AWS_* and MoXing environment variables, an AWS
 * shared credentials file, and last the temporary keys of the ECS metadata
 * service, which come with a refresher for the client.  Secrets are copied
 * into owned strings and wiped on free; no function here writes a secret
 * to a log or an error message.  Fetching from the metadata service is
 * the client module's job (libcurl lives there).
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hoardfs/log.h"

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
	free(c->metadata_url);
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

int cli_passwd_parse(const char *text, size_t len, const char *bucket,
		     struct cli_credentials *c)
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
		if (nf == 2 && bucket &&
		    (size_t)(fe[0] - f[0]) == strlen(bucket) &&
		    memcmp(f[0], bucket, (size_t)(fe[0] - f[0])) == 0) {
			/* s3fs's "bucket:AK:SK" for this bucket. */
			f[0] = f[1];
			fe[0] = fe[1];
			f[1] = f[2];
			fe[1] = fe[2];
			nf = 1;
		} else if (nf == 2 && fe[2] - f[2] < CLI_MIN_TOKEN_LEN) {
			/* Too short for a temporary token: s3fs's
			 * "bucket:AK:SK" for another bucket.  Read as
			 * AK:SK:TOKEN it would send the secret key as a
			 * token header. */
			continue;
		}
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

/*
 * Read a small secrets file into *@buf (NUL-terminated, caller wipes and
 * frees).  With @strict the file must be private (mode 0600 or stricter).
 */
static int read_secret_file(const char *path, const char *what, int strict,
			    char **buf, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", what, path);
		rc = -EINVAL;
		goto out;
	}
	if (strict && (st.st_mode & 077)) {
		snprintf(err, errlen,
			 "%s %s has mode %04o; it must not be "
			 "accessible by group or others (chmod 600 %s)",
			 what, path, (unsigned)(st.st_mode & 07777), path);
		rc = -EPERM;
		goto out;
	}
	*buf = malloc(PASSWD_MAX_BYTES + 1);
	if (!*buf) {
		rc = -ENOMEM;
		goto out;
	}
	n = read(fd, *buf, PASSWD_MAX_BYTES);
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		free(*buf);
		*buf = NULL;
		goto out;
	}
	(*buf)[n] = '\0';
	*len = (size_t)n;
	rc = 0;
out:
	close(fd);
	return rc;
}

static void wipe_buf(char *buf, size_t len)
{
	if (buf)
		explicit_bzero(buf, len);
	free(buf);
}

static int from_file(const char *path, const char *bucket,
		     struct cli_credentials *c, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	rc = read_secret_file(path, "passwd file", 1, &buf, &len, err, errlen);
	if (rc)
		return rc;
	rc = cli_passwd_parse(buf, len, bucket, c);
	if (rc == -EINVAL)
		snprintf(err, errlen,
			 "passwd file %s: no line of the form "
			 "ACCESS_KEY:SECRET_KEY[:TOKEN]",
			 path);
	c->source = "passwd file";
	wipe_buf(buf, len);
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

/* [name] on the line [@b, @e)?  Sets *@name (into @buf) when so. */
static int ini_section(const char *b, const char *e, char *buf, size_t size)
{
	const char *close;
	char *t;

	if (b == e || *b != '[')
		return 0;
	close = memchr(b, ']', (size_t)(e - b));
	if (!close)
		return 0;
	t = trimmed(b + 1, close);
	if (!t)
		return -ENOMEM;
	snprintf(buf, size, "%s", t);
	free(t);
	return 1;
}

int cli_aws_credentials_parse(const char *text, size_t len, const char *profile,
			      struct cli_credentials *c)
{
	const char *p = text, *end = text + len;
	char section[256] = "";
	int in = 0, found = 0, rc;

	memset(c, 0, sizeof(*c));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *b = p, *e = nl ? nl : end, *eq;
		char *name = NULL, **dst = NULL;

		p = nl ? nl + 1 : end;
		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		if (b == e || *b == '#' || *b == ';')
			continue;
		rc = ini_section(b, e, section, sizeof(section));
		if (rc < 0)
			goto fail;
		if (rc > 0) {
			in = strcmp(section, profile) == 0;
			found |= in;
			continue;
		}
		eq = memchr(b, '=', (size_t)(e - b));
		if (!in || !eq)
			continue;
		name = trimmed(b, eq);
		if (!name) {
			rc = -ENOMEM;
			goto fail;
		}
		if (strcmp(name, "aws_access_key_id") == 0)
			dst = &c->access_key;
		else if (strcmp(name, "aws_secret_access_key") == 0)
			dst = &c->secret_key;
		else if (strcmp(name, "aws_session_token") == 0 ||
			 (strcmp(name, "aws_security_token") == 0 &&
			  !c->security_token))
			dst = &c->security_token;
		free(name);
		if (!dst)
			continue;
		wipe_free(*dst);
		*dst = trimmed(eq + 1, e);
		if (!*dst) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (!found)
		return -ENOENT;
	if (!c->access_key || !c->access_key[0] || !c->secret_key ||
	    !c->secret_key[0]) {
		rc = -EINVAL;
		goto fail;
	}
	if (c->security_token && !c->security_token[0]) {
		free(c->security_token);
		c->security_token = NULL;
	}
	return 0;
fail:
	cli_credentials_free(c);
	return rc;
}

/*
 * The AWS shared credentials file [P §7].  -ENOENT (and no error text)
 * when there is no file or it lacks the default profile; an explicit
 * AWS_PROFILE that the file lacks is an error the user must see.
 */
static int from_aws_file(struct cli_credentials *c, char *err, size_t errlen)
{
	const char *path = getenv("AWS_SHARED_CREDENTIALS_FILE");
	const char *profile = getenv("AWS_PROFILE"), *home;
	char *own = NULL, *buf = NULL;
	struct passwd *pw;
	struct stat st;
	size_t len = 0;
	int rc;

	if (!profile || !profile[0])
		profile = NULL;
	if (!path || !path[0]) {
		home = getenv("HOME");
		if ((!home || !home[0]) && (pw = getpwuid(getuid())))
			home = pw->pw_dir;
		if (!home || !home[0])
			return -ENOENT;
		if (asprintf(&own, "%s/.aws/credentials", home) < 0)
			return -ENOMEM;
		path = own;
	}
	/* Absent, or not a file (AWS_SHARED_CREDENTIALS_FILE=/dev/null is
	 * how tools say "none"): no credentials here. */
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = -ENOENT;
		if (profile)
			snprintf(err, errlen,
				 "AWS_PROFILE=%s, but there is no credentials "
				 "file %s",
				 profile, path);
		goto out;
	}
	rc = read_secret_file(path, "credentials file", 0, &buf, &len, err,
			      errlen);
	if (rc)
		goto out;
	rc = cli_aws_credentials_parse(buf, len, profile ? profile : "default",
				       c);
	if (rc == -ENOENT && profile)
		snprintf(err, errlen, "AWS_PROFILE=%s: no [%s] in %s", profile,
			 profile, path);
	else if (rc == -EINVAL)
		snprintf(err, errlen,
			 "credentials file %s: [%s] lacks aws_access_key_id "
			 "or aws_secret_access_key",
			 path, profile ? profile : "default");
	c->source = "AWS shared credentials file";
out:
	wipe_buf(buf, len);
	free(own);
	return rc;
}

/* Copy temporary keys into @c; -ENOMEM leaves @c empty. */
static int take_temp(struct cli_credentials *c,
		     const struct client_temp_credentials *t)
{
	c->access_key = strdup(t->access_key);
	c->secret_key = strdup(t->secret_key);
	c->security_token =
		t->security_token ? strdup(t->security_token) : NULL;
	c->expires_sec = t->expires_sec;
	if (!c->access_key || !c->secret_key ||
	    (t->security_token && !c->security_token)) {
		cli_credentials_free(c);
		return -ENOMEM;
	}
	return 0;
}

/* The ECS metadata service [P §6.2]; -ENOENT when it is not there. */
static int from_metadata(struct cli_credentials *c, char *err, size_t errlen)
{
	const char *url = getenv("HOARDFS_ECS_METADATA_URL");
	struct client_temp_credentials t;
	int rc;

	if (!url)
		url = CLI_ECS_METADATA_URL;
	if (!url[0] || strcmp(url, "off") == 0)
		return -ENOENT;
	rc = client_ecs_credentials(url, &t, err, errlen);
	if (rc == -EHOSTUNREACH || rc == -ENOENT)
		return -ENOENT; /* not on ECS: "no credentials" says it all */
	if (rc)
		return rc;
	rc = take_temp(c, &t);
	client_temp_credentials_clear(&t);
	if (rc)
		return rc;
	c->metadata_url = strdup(url);
	if (!c->metadata_url) {
		cli_credentials_free(c);
		return -ENOMEM;
	}
	c->refresh = cli_credentials_refresh;
	c->source = "the ECS metadata service";
	return 0;
}

int cli_credentials_refresh(void *arg, struct client *c)
{
	const struct cli_credentials *from = arg;
	struct client_temp_credentials t;
	char err[256];
	int rc;

	rc = client_ecs_credentials(from->metadata_url, &t, err, sizeof(err));
	if (rc) {
		log_warn("credentials: %s", err);
		return rc;
	}
	rc = client_set_credentials(c,
				    &(struct client_credentials){
					    .access_key = t.access_key,
					    .secret_key = t.secret_key,
					    .security_token = t.security_token,
					    .expires_sec = t.expires_sec,
				    });
	client_temp_credentials_clear(&t);
	return rc;
}

int cli_credentials_load(const char *passwd_file, const char *bucket,
			 struct cli_credentials *c, char *err, size_t errlen)
{
	char why[256] = "";
	int rc;

	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	if (passwd_file)
		return from_file(passwd_file, bucket, c, err, errlen);
	rc = from_env("OBS_ACCESS_KEY_ID", "OBS_SECRET_ACCESS_KEY",
		      "OBS_SECURITY_TOKEN", c);
	if (rc == -ENOENT)
		rc = from_env("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
			      "AWS_SESSION_TOKEN", c);
	if (rc == -ENOENT)
		rc = from_env("ACCESS_KEY_ID", "SECRET_ACCESS_KEY",
			      "SECURITY_TOKEN", c);
	if (rc == -ENOENT) {
		rc = from_aws_file(c, err, errlen);
		if (rc == -ENOENT && err[0])
			return rc; /* AWS_PROFILE names nothing */
	}
	if (rc == -ENOENT)
		rc = from_metadata(c, why, sizeof(why));
	if (rc == -ENOENT)
		snprintf(err, errlen,
			 "no credentials: give --passwd-file, set "
			 "OBS_ACCESS_KEY_ID/OBS_SECRET_ACCESS_KEY or "
			 "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, add a "
			 "profile to ~/.aws/credentials, or run on ECS with "
			 "an IAM agency%s%s",
			 why[0] ? " -- " : "", why);
	else if (rc && !err[0])
		snprintf(err, errlen, "%s", why[0] ? why : strerror(-rc));
	return rc;
}
