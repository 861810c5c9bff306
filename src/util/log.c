// SPDX-License-Identifier: MIT
/*
 * Line logging to stderr or syslog.  Each line is formatted into a local
 * buffer and written with one call, so concurrent threads never interleave
 * within a line.  No locks are taken.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "hoardfs/log.h"

static enum log_level log_threshold = LOG_LEVEL_INFO;
static int log_to_syslog;

static const char *const log_names[] = {"error", "warn", "info", "debug"};

void log_init(enum log_level level, int use_syslog)
{
	log_threshold = level;
	log_to_syslog = use_syslog;
	if (use_syslog)
		openlog("hoardfs", LOG_PID, LOG_DAEMON);
}

enum log_level log_set_level(enum log_level level)
{
	enum log_level old = log_threshold;

	log_threshold = level;
	return old;
}

int log_level_parse(const char *text)
{
	for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++)
		if (strcmp(text, log_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

int log_enabled(enum log_level level)
{
	return level <= log_threshold;
}

static void log_vemit(enum log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Format and write one line at @level, threshold already checked. */
static void log_vemit(enum log_level level, const char *fmt, va_list ap)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char line[4096];
	size_t used = 0, start;
	int n;

	if (!log_to_syslog) {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		used = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n = snprintf(line + used, sizeof(line) - used,
			     ".%03ldZ hoardfs %s: ", ts.tv_nsec / 1000000,
			     log_names[level]);
		if (n > 0)
			used += (size_t)n;
	}
	start = used;
	n = vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	if (n > 0)
		used += (size_t)n;
	if (used > sizeof(line) - 2)
		used = sizeof(line) - 2;
	/* Object keys may hold newlines or terminal escapes: one event must
	 * stay one line, and nobody's terminal is steered by a bucket. */
	for (size_t i = start; i < used; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
	if (log_to_syslog) {
		line[used] = '\0';
		syslog(prio[level], "%s", line);
		return;
	}
	line[used++] = '\n';
	/* One write per line; a failed write to stderr has nowhere to go. */
	if (write(STDERR_FILENO, line, used) < 0)
		return;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	log_vemit(level, fmt, ap);
	va_end(ap);
}

void log_always(const char *fmt, ...)
{
	va_list ap;

	if (log_threshold == LOG_LEVEL_OFF)
		return;
	va_start(ap, fmt);
	log_vemit(LOG_LEVEL_INFO, fmt, ap);
	va_end(ap);
}
