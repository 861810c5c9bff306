// SPDX-License-Identifier: MIT
/*
 * The client's growable text buffer (see buf.h): doubling growth, a sticky
 * error and an optional size cap used to bound response bodies.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/buf.h"

/* Make room for @extra more bytes plus the NUL; 0 or a negative errno. */
static int buf_reserve(struct client_buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (b->error)
		return b->error;
	if (extra > SIZE_MAX / 2 - b->len - 1)
		return b->error = -ENOMEM;
	need = b->len + extra + 1;
	if (b->max && need - 1 > b->max)
		return b->error = -EFBIG;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64; /* small first step: most uses are short */
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return b->error = -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

void client_buf_append(struct client_buf *b, const void *data, size_t len)
{
	if (buf_reserve(b, len) != 0)
		return;
	if (len)
		memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
}

void client_buf_puts(struct client_buf *b, const char *s)
{
	client_buf_append(b, s, strlen(s));
}

void client_buf_printf(struct client_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		if (!b->error)
			b->error = -EINVAL;
		return;
	}
	if (buf_reserve(b, (size_t)n) != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

int client_buf_take(struct client_buf *b, char **out)
{
	int rc = b->error;

	*out = NULL;
	if (rc == 0 && !b->p) {
		b->p = strdup("");
		if (!b->p)
			rc = -ENOMEM;
	}
	if (rc != 0) {
		client_buf_free(b);
		return rc;
	}
	*out = b->p;
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	return 0;
}

void client_buf_free(struct client_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	b->error = 0;
}
