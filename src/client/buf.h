/* SPDX-License-Identifier: MIT */
/*
 * A growable text buffer for building canonical requests, URLs and
 * response bodies inside the client.  Appends never fail loudly: the first
 * allocation failure is remembered and reported once by client_buf_take(),
 * so a builder can append a dozen pieces and check a single result.
 * Not thread-safe; each buffer belongs to one caller.
 */
#ifndef HOARDFS_CLIENT_BUF_H
#define HOARDFS_CLIENT_BUF_H

#include <stddef.h>

/* Invariant: p is NULL or holds len bytes plus a NUL, with len < cap. */
struct client_buf {
	char *p;    /* the bytes, NUL-terminated; NULL until the first append */
	size_t len; /* bytes used, without the NUL */
	size_t cap; /* bytes allocated at p */
	size_t max; /* refuse to grow past this many bytes; 0 = no limit */
	int error;  /* sticky: -ENOMEM, or -EFBIG past max; 0 while fine */
};

/* client_buf_append - add @len bytes at @data (may hold NULs). */
void client_buf_append(struct client_buf *b, const void *data, size_t len);

/* client_buf_puts - add the string @s. */
void client_buf_puts(struct client_buf *b, const char *s);

/* client_buf_printf - add formatted text. */
void client_buf_printf(struct client_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * client_buf_take - hand the text over: returns 0 with *@out a malloc'd
 * NUL-terminated string (never NULL, "" for an empty buffer) that the
 * caller frees, or the sticky error (-ENOMEM, -EFBIG).  Either way the
 * buffer is left empty and reusable.
 */
int client_buf_take(struct client_buf *b, char **out)
	__attribute__((warn_unused_result));

/* client_buf_free - release the bytes and reset the buffer. */
void client_buf_free(struct client_buf *b);

#endif
