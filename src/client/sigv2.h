/* SPDX-License-Identifier: MIT */
/*
 * The two HMAC-SHA1 signature schemes: AWS V2 [P §2.2] and native OBS
 * [P §2.1].  They share one algorithm and differ only in the header prefix
 * ("x-amz-" / "x-obs-") and the Authorization label ("AWS" / "OBS").
 * Pure functions, thread-safe, checked against the vectors in [P §2].
 */
#ifndef HOARDFS_CLIENT_SIGV2_H
#define HOARDFS_CLIENT_SIGV2_H

#include <stddef.h>

#include "client/sigv4.h"

#define CLIENT_SIGV2_SIG_LEN 28 /* Base64 of a 20-byte HMAC-SHA1 */

/*
 * client_sigv2_resource - the CanonicalizedResource: "/" + @bucket + "/" +
 * @encoded_key (already URI-encoded with "/" kept; "" for a bucket-level
 * request), then "?" and the sub-resources among @params, sorted by name,
 * "k=v" or a bare "k".  Listing parameters (prefix, marker, max-keys,
 * delimiter, encoding-type, list-type, continuation-token, start-after,
 * fetch-owner) are not sub-resources and are left out.
 * Returns 0 with *@out malloc'd, or -ENOMEM.
 */
int client_sigv2_resource(const char *bucket, const char *encoded_key,
			  const struct client_sig_param *params, size_t n,
			  char **out) __attribute__((warn_unused_result));

/*
 * client_sigv2_string_to_sign - VERB, Content-MD5, Content-Type and Date
 * lines, then one "name:value\n" line per header of @h whose lower-cased
 * name starts with @prefix ("x-amz-" or "x-obs-"): names lower-cased and
 * sorted, values trimmed, repeats joined with ",", then @resource.
 * NULL @content_md5, @content_type or @date give empty lines; pass ""
 * as @date whenever the prefixed date header is sent.
 * Returns 0 with *@out malloc'd, or -ENOMEM.
 */
int client_sigv2_string_to_sign(const char *method, const char *content_md5,
				const char *content_type, const char *date,
				const struct client_sig_header *h, size_t n,
				const char *prefix, const char *resource,
				char **out) __attribute__((warn_unused_result));

/*
 * client_sigv2_signature - Base64(HMAC-SHA1(@secret, @sts)) into @out
 * (CLIENT_SIGV2_SIG_LEN + 1 bytes).  Returns 0 or -EIO.
 */
int client_sigv2_signature(const char *secret, const char *sts,
			   char out[CLIENT_SIGV2_SIG_LEN + 1])
	__attribute__((warn_unused_result));

#endif
