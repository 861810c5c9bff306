// SPDX-License-Identifier: MIT
/*
 * The kernel read-ahead of the mount: a FUSE mount gets the kernel's
 * default of 128 KiB, so a sequential reader of a cached file asks the
 * daemon for 128 KiB at a time.  Here the mount's backing device is found
 * in /proc/self/mountinfo and its read_ahead_kb set in sysfs (gcsfuse's
 * --max-read-ahead-kb does the same).  Nothing here sends a FUSE request,
 * so it is safe from the mount's own FUSE threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* Undo mountinfo's octal escapes (\040 space, \011 tab, \012 newline,
 * \134 backslash; proc(5)) of the @n bytes at @s into @out (@outlen).
 * Returns 0 or -ENAMETOOLONG. */
static int mountinfo_unescape(const char *s, size_t n, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '\\' && i + 3 < n && s[i + 1] >= '0' &&
		    s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
		    s[i + 3] >= '0' && s[i + 3] <= '7') {
			c = (char)((s[i + 1] - '0') * 64 +
				   (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
			i += 3;
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/* The @idx-th (from 0) space-separated field of the line [@p, @end). */
static int field(const char *p, const char *end, int idx, const char **f,
		 size_t *n)
{
	for (int i = 0; p < end; i++) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		const char *fe = sp ? sp : end;

		if (i == idx) {
			*f = p;
			*n = (size_t)(fe - p);
			return 0;
		}
		p = sp ? sp + 1 : end;
	}
	return -EINVAL;
}

int cli_mount_bdi(FILE *mountinfo, const char *mountpoint, char *out,
		  size_t outlen)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = -ENOENT;

	while ((len = getline(&line, &cap, mountinfo)) > 0) {
		const char *le = line + len - (line[len - 1] == '\n');
		const char *dev, *mnt;
		size_t dev_n, mnt_n;

		/* Fields: id, parent id, MAJOR:MINOR, root, mount point. */
		if (field(line, le, 2, &dev, &dev_n) != 0 ||
		    field(line, le, 4, &mnt, &mnt_n) != 0 ||
		    mountinfo_unescape(mnt, mnt_n, path, sizeof(path)) != 0 ||
		    strcmp(path, mountpoint) != 0)
			continue;
		/* The last match wins: it hides the earlier ones. */
		if (dev_n + 1 > outlen) {
			rc = -ENAMETOOLONG;
			break;
		}
		memcpy(out, dev, dev_n);
		out[dev_n] = '\0';
		rc = 0;
	}
	free(line);
	return rc;
}

int cli_set_read_ahead(const char *mountpoint, unsigned kib)
{
	char dev[32], sysfs[64], value[16];
	FILE *f;
	int fd, rc;
	ssize_t n;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	rc = cli_mount_bdi(f, mountpoint, dev, sizeof(dev));
	fclose(f);
	if (rc != 0)
		return rc;
	snprintf(sysfs, sizeof(sysfs), "/sys/class/bdi/%s/read_ahead_kb", dev);
	fd = open(sysfs, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(value, sizeof(value), "%u\n", kib);
	n = write(fd, value, strlen(value));
	rc = n == (ssize_t)strlen(value) ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}
