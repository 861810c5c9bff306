// SPDX-License-Identifier: MIT
/*
 * Hashing through OpenSSL's EVP interface, clocks, and parsers for the
 * sizes and durations users type on the command line.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "hoardfs/util.h"

void util_hex(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

int util_sha256_hex(const void *data, size_t len, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;

	if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL))
		return -EIO;
	util_hex(md, md_len, out);
	return 0;
}

int64_t util_now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

int64_t util_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int util_parse_bytes(const char *text, uint64_t *out)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {
		{"", 0},     {"b", 0},	 {"k", 10},   {"kb", 10},  {"kib", 10},
		{"m", 20},   {"mb", 20}, {"mib", 20}, {"g", 30},   {"gb", 30},
		{"gib", 30}, {"t", 40},	 {"tb", 40},  {"tib", 40},
	};
	unsigned long long v;
	char *end;

	if (!text || !isdigit((unsigned char)text[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].suffix) != 0)
			continue;
		if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
			return -ERANGE;
		*out = (uint64_t)v << units[i].shift;
		return 0;
	}
	return -EINVAL;
}

int util_parse_seconds(const char *text, int64_t *out)
{
	long long v;
	char *end;

	if (!text)
		return -EINVAL;
	if (strcmp(text, "forever") == 0 || strcmp(text, "indefinite") == 0) {
		*out = -1;
		return 0;
	}
	if (!isdigit((unsigned char)text[0]))
		return -EINVAL;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}
