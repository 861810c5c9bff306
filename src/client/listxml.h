/* SPDX-License-Identifier: MIT */
/*
 * Parsers for the XML bodies the client reads: a ListBucketResult page
 * (ListObjects V1 or V2) and an <Error> document [P §3, §5], plus the
 * URL decoding and ISO 8601 dates they need.  Elements are matched by
 * local name, so the AWS, OBS and OTC namespaces (or none) all work.
 * Pure functions over a memory buffer; thread-safe once libxml2 has been
 * initialised (client_global_init).
 */
#ifndef HOARDFS_CLIENT_LISTXML_H
#define HOARDFS_CLIENT_LISTXML_H

#include <stddef.h>
#include <stdint.h>

#include "hoardfs/client.h"

/*
 * The largest XML body accepted.  A full page is 1000 keys of at most 1024
 * bytes, tripled by URL encoding, plus ~500 bytes of markup per entry:
 * about 3.6 MiB; 16 MiB leaves room for verbose servers.
 */
#define CLIENT_XML_MAX_BYTES (16u << 20)

/*
 * client_url_decode - decode %XX escapes in @in; with @plus_space a "+"
 * becomes a space first, as Python's unquote_plus (the OBS SDK) does.
 * A "%" not followed by two hex digits is kept literally.
 * Returns 0 with *@out malloc'd, -EILSEQ when the result would hold a NUL
 * byte (a C string cannot carry it), or -ENOMEM.
 */
int client_url_decode(const char *in, int plus_space, char **out)
	__attribute__((warn_unused_result));

/*
 * client_iso8601_parse - "2015-07-01T00:32:16.482Z" (fraction optional,
 * "Z", "+hh:mm", "-hh:mm" or nothing for UTC) to epoch seconds, fraction
 * dropped.  Returns 0 or -EINVAL.
 */
int client_iso8601_parse(const char *s, int64_t *out)
	__attribute__((warn_unused_result));

/*
 * client_listxml_parse - parse one ListBucketResult page of @len bytes.
 * With @v2, page->next is NextContinuationToken, kept verbatim (tokens are
 * opaque); otherwise NextMarker when present, else the larger (strcmp) of
 * the last Key and the last CommonPrefixes/Prefix.  When EncodingType is
 * "url", Key, Prefix and NextMarker are decoded (client_url_decode with
 * "+" as space).  Keys come before prefixes in page->v; nothing is
 * filtered, except that an entry whose decoded name would hold a NUL byte
 * is dropped with a warning (it cannot be a C string).
 * Returns 0 with *@page filled (the caller frees it with
 * client_list_page_clear), -EIO for a body that is not a well-formed
 * ListBucketResult, too large, or truncated with no way to continue, or
 * -ENOMEM.  On error *@page is left empty.
 */
int client_listxml_parse(const char *body, size_t len, int v2,
			 struct client_list_page *page)
	__attribute__((warn_unused_result));

/*
 * client_listxml_error - read Code, Message and RequestId from an <Error>
 * body into @err (truncating to the field sizes).  Fields the body lacks
 * are left as they were, so a request id taken from a header survives.
 * Returns 0, or -EIO when the body is not an <Error> document.
 */
int client_listxml_error(const char *body, size_t len, struct client_error *err)
	__attribute__((warn_unused_result));

#endif
