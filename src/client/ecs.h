/* SPDX-License-Identifier: MIT */
/*
 * Temporary credentials from the ECS/CCE metadata service [P §6.2]: the
 * pure part, parsing the securitykey JSON document (with jansson, Debian's
 * libjansson).  The fetch itself is client_ecs_credentials() in ecs.c.
 * Thread-safe; no I/O here.
 */
#ifndef HOARDFS_CLIENT_ECS_H
#define HOARDFS_CLIENT_ECS_H

#include <stddef.h>

#include "hoardfs/client.h"

/* A securitykey document is ~2-4 KiB (the token dominates); 64 KiB is
 * plenty and bounds what a confused server can make us hold. */
#define CLIENT_ECS_MAX_BYTES (64u << 10)

/*
 * client_ecs_parse - read {"credential": {"access", "secret",
 * "securitytoken", "expires_at"}} from @body (@len bytes).  expires_at is
 * ISO 8601 with any fraction ("...T18:42:00.000000Z", "...00.000Z");
 * absent or unparsable gives expires_sec 0.  Surrounding whitespace of
 * the three strings is trimmed (as the OBS SDK does [P §2.5]).
 * Returns 0 with *@out filled (free with client_temp_credentials_clear()),
 * -EIO when the document is not JSON or lacks access/secret, -ENOMEM.
 */
int client_ecs_parse(const char *body, size_t len,
		     struct client_temp_credentials *out)
	__attribute__((warn_unused_result));

#endif
