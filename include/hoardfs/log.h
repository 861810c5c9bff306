/* SPDX-License-Identifier: MIT */
/*
 * Logging for every module: one line per event, to stderr in the
 * foreground or to syslog when daemonized.  Lines never carry secrets:
 * callers pass keys and request ids, never credentials or Authorization
 * headers.
 */
#ifndef HOARDFS_LOG_H
#define HOARDFS_LOG_H

enum log_level {
	LOG_LEVEL_OFF = -1, /* nothing is written */
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

/*
 * log_init - choose the sink and the threshold.
 * @level: lines above this level are dropped.
 * @use_syslog: nonzero sends lines to syslog(3) (facility LOG_DAEMON,
 *              ident "hoardfs"), zero to stderr with a UTC timestamp.
 * Call once before other threads start; not thread-safe against log_msg.
 */
void log_init(enum log_level level, int use_syslog);

/*
 * log_set_level - change the threshold; returns the previous one.  For
 * short quiet spells in a single thread (a start-up probe whose failure
 * the caller reports itself).
 */
enum log_level log_set_level(enum log_level level);

/*
 * log_level_parse - "error", "warn", "info" or "debug" to a level.
 * Returns the level, or -EINVAL for any other text.
 */
int log_level_parse(const char *text);

/* log_enabled - nonzero when a line at @level would be written. */
int log_enabled(enum log_level level);

/*
 * log_msg - write one line at @level.  Thread-safe: each line is written
 * with a single write(2) (stderr) or syslog(3) call, so lines from several
 * threads never interleave.  Lines longer than 4 KiB are truncated.
 */
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * log_always - write one line at info priority whatever the threshold,
 * unless logging is off: for lines a user asked for explicitly (the status
 * line that SIGUSR1 requests).  Thread-safe as log_msg().
 */
void log_always(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_enabled(LOG_LEVEL_DEBUG))                              \
			log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__);                 \
	} while (0)

#endif
