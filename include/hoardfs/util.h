/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every module: hashing and hex (OpenSSL EVP),
 * clocks, and parsing of sizes and durations given on the command line.
 * Nothing here allocates except where a function says so.
 */
#ifndef HOARDFS_UTIL_H
#define HOARDFS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define UTIL_SHA256_HEX_LEN 64 /* hex digits of a SHA-256 digest */
#define UTIL_MD5_HEX_LEN    32 /* hex digits of an MD5 digest */

/*
 * util_hex - write @len bytes of @in as lower-case hex into @out, which
 * must hold 2 * @len + 1 bytes; @out is NUL-terminated.
 */
void util_hex(const unsigned char *in, size_t len, char *out);

/*
 * util_sha256_hex - SHA-256 of @len bytes at @data as 64 lower-case hex
 * digits plus NUL into @out (UTIL_SHA256_HEX_LEN + 1 bytes).
 * Returns 0, or -EIO if OpenSSL fails.  Thread-safe.
 */
int util_sha256_hex(const void *data, size_t len, char *out)
	__attribute__((warn_unused_result));

/* util_now_sec - wall-clock seconds since the epoch (CLOCK_REALTIME). */
int64_t util_now_sec(void);

/* util_mono_ms - monotonic milliseconds (CLOCK_MONOTONIC), for timeouts. */
int64_t util_mono_ms(void);

/*
 * util_parse_bytes - "4096", "8M", "8MiB", "1G", "512k" (binary units, case
 * insensitive, optional "B"/"iB") to bytes in @out.
 * Returns 0, or -EINVAL for empty, negative or malformed text, -ERANGE on
 * overflow.
 */
int util_parse_bytes(const char *text, uint64_t *out)
	__attribute__((warn_unused_result));

/*
 * util_parse_seconds - a whole number of seconds, or "forever"/"indefinite"
 * (stored as -1), into @out.
 * Returns 0, or -EINVAL for malformed text, -ERANGE on overflow.
 */
int util_parse_seconds(const char *text, int64_t *out)
	__attribute__((warn_unused_result));

#endif
