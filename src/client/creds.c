// SPDX-License-Identifier: MIT
/*
 * The client's credentials (see "Credentials" in the DESIGN comment of
 * client.c): reference-counted sets swapped by client_set_credentials(),
 * and their renewal by the refresher, in the background or, for an expired
 * set, in the attempt that needs it.  Secrets are copied, never logged,
 * and wiped when their set is freed.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_int.h"
#include "hoardfs/client.h"
#include "hoardfs/log.h"
#include "hoardfs/util.h"

/* strdup of @s with leading and trailing white space removed. */
static char *client_strdup_trim(const char *s)
{
	size_t len;

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' ||
		       s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	return strndup(s, len);
}

/*
 * The access key as logs show it: its first four characters, enough to
 * tell two key sets apart.  An AK alone grants nothing, but logs travel
 * further than the host, so less is better.
 */
static const char *client_key_hint(const char *ak, char out[16])
{
	snprintf(out, 16, "%.4s...", ak);
	return out;
}

static void client_free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* ---- credentials -------------------------------------------------------- */

void client_creds_free(struct client_creds *cr)
{
	if (!cr)
		return;
	free(cr->access_key);
	client_free_secret(cr->secret_key);
	client_free_secret(cr->token);
	free(cr);
}

/* A new set from @in (trimmed copies, as the OBS SDK trims [P §2.5]). */
int client_creds_new(const struct client_credentials *in,
		     struct client_creds **out)
{
	struct client_creds *cr;

	*out = NULL;
	if (!in->access_key || !in->access_key[0] || !in->secret_key ||
	    !in->secret_key[0])
		return -EINVAL;
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	cr->refs = 1;
	cr->access_key = client_strdup_trim(in->access_key);
	cr->secret_key = client_strdup_trim(in->secret_key);
	if (in->security_token && in->security_token[0])
		cr->token = client_strdup_trim(in->security_token);
	if (!cr->access_key || !cr->secret_key ||
	    (in->security_token && in->security_token[0] && !cr->token)) {
		client_creds_free(cr);
		return -ENOMEM;
	}
	cr->expires_sec = in->expires_sec > 0 ? in->expires_sec : 0;
	cr->refresh_sec = client_refresh_at(util_now_sec(), cr->expires_sec);
	*out = cr;
	return 0;
}

/* A reference to the current set. */
static struct client_creds *creds_get(struct client *c)
{
	struct client_creds *cr;

	pthread_mutex_lock(&c->cred_lock);
	cr = c->creds;
	cr->refs++;
	pthread_mutex_unlock(&c->cred_lock);
	return cr;
}

void client_creds_put(struct client *c, struct client_creds *cr)
{
	int last;

	if (!cr)
		return;
	pthread_mutex_lock(&c->cred_lock);
	last = --cr->refs == 0;
	pthread_mutex_unlock(&c->cred_lock);
	if (last)
		client_creds_free(cr);
}

int client_set_credentials(struct client *c,
			   const struct client_credentials *creds)
{
	struct client_creds *cr, *old;
	char hint[16];
	int rc;

	rc = client_creds_new(creds, &cr);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->cred_lock);
	cr->gen = ++c->cred_gen;
	old = c->creds;
	c->creds = cr;
	pthread_mutex_unlock(&c->cred_lock);
	client_creds_put(c, old);
	if (cr->expires_sec)
		log_info("client: credentials with access key %s installed, "
			 "valid for %" PRId64 " s",
			 client_key_hint(cr->access_key, hint),
			 cr->expires_sec - util_now_sec());
	return 0;
}

/*
 * Run the refresher now, unless another refresh is running (then wait for
 * it) or the credentials changed since the caller signed with set @gen
 * (then there is nothing to do).  Returns 0 when a set newer than @gen is
 * installed on return, else a negative errno.
 */
static int creds_refresh(struct client *c, uint64_t gen)
{
	int rc;

	pthread_mutex_lock(&c->cred_lock);
	for (;;) {
		if (c->cred_gen != gen) {
			pthread_mutex_unlock(&c->cred_lock);
			return 0;
		}
		/* A refresh "running" in the parent of a fork is not. */
		if (!c->refresh_busy || c->refresh_pid != getpid())
			break;
		pthread_cond_wait(&c->cred_cond, &c->cred_lock);
	}
	c->refresh_busy = 1;
	c->refresh_pid = getpid();
	pthread_mutex_unlock(&c->cred_lock);

	rc = c->refresh(c->refresh_arg, c);

	pthread_mutex_lock(&c->cred_lock);
	c->refresh_busy = 0;
	c->refresh_done_ms = util_mono_ms();
	if (rc == 0 && c->cred_gen == gen)
		rc = -EACCES; /* the refresher installed nothing */
	pthread_cond_broadcast(&c->cred_cond);
	pthread_mutex_unlock(&c->cred_lock);
	pthread_mutex_lock(&c->lock);
	c->stats.refreshes++;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_warn("client: refreshing the credentials failed (%s); "
			 "keeping the current ones",
			 strerror(-rc));
	return rc;
}

/* The background refresh thread: one refresh, then it ends. */
static void *creds_refresher_main(void *arg)
{
	struct client *c = arg;
	uint64_t gen;
	int rc;

	pthread_mutex_lock(&c->cred_lock);
	gen = c->cred_gen;
	pthread_mutex_unlock(&c->cred_lock);
	rc = creds_refresh(c, gen);
	/* After a failure, do not hammer the metadata service: wait a while.
	 * Until here the claim taken by the starter keeps others out. */
	pthread_mutex_lock(&c->cred_lock);
	c->refresh_retry_ms = rc ? util_mono_ms() + CLIENT_REFRESH_RETRY_MS : 0;
	pthread_mutex_unlock(&c->cred_lock);
	return NULL;
}

/* Start the background refresh unless one runs or failed recently. */
static void creds_refresh_in_background(struct client *c)
{
	pthread_t old;
	int join = 0;

	pthread_mutex_lock(&c->cred_lock);
	if ((c->refresh_busy && c->refresh_pid == getpid()) ||
	    util_mono_ms() < c->refresh_retry_ms) {
		pthread_mutex_unlock(&c->cred_lock);
		return;
	}
	if (c->refresher_started && c->refresher_pid == getpid()) {
		old = c->refresher; /* finished: its refresh is not busy */
		join = 1;
	}
	c->refresher_started = 0;
	/* Claim the slot so that no other caller starts a thread too. */
	c->refresh_retry_ms = util_mono_ms() + CLIENT_REFRESH_RETRY_MS;
	pthread_mutex_unlock(&c->cred_lock);
	if (join)
		pthread_join(old, NULL);
	pthread_mutex_lock(&c->cred_lock);
	if (pthread_create(&c->refresher, NULL, creds_refresher_main, c) == 0) {
		c->refresher_started = 1;
		c->refresher_pid = getpid();
	}
	pthread_mutex_unlock(&c->cred_lock);
}

/*
 * Set @gen is no good (expired, or refused by the server): renew it now,
 * unless that was just tried (a refresh that ended less than
 * CLIENT_REFRESH_MIN_GAP_MS ago with no newer set would only ask a failing
 * metadata service again).  Returns 0 when a newer set is there.
 */
int client_creds_refresh_gapped(struct client *c, uint64_t gen)
{
	int recent;

	pthread_mutex_lock(&c->cred_lock);
	recent =
		c->cred_gen == gen && c->refresh_done_ms &&
		util_mono_ms() - c->refresh_done_ms < CLIENT_REFRESH_MIN_GAP_MS;
	pthread_mutex_unlock(&c->cred_lock);
	if (recent)
		return -EACCES;
	return creds_refresh(c, gen);
}

/*
 * The set an attempt signs with.  Past its refresh time a background
 * refresh starts; past its expiry the caller waits for a refresh.
 */
struct client_creds *client_creds_for_attempt(struct client *c)
{
	struct client_creds *cr = creds_get(c);
	char hint[16];
	int64_t now;

	if (!c->refresh || !cr->refresh_sec)
		return cr;
	now = util_now_sec();
	if (now < cr->refresh_sec)
		return cr;
	if (now < cr->expires_sec) {
		creds_refresh_in_background(c);
		return cr;
	}
	log_info("client: credentials with access key %s expired; renewing",
		 client_key_hint(cr->access_key, hint));
	(void)client_creds_refresh_gapped(c, cr->gen);
	client_creds_put(c, cr);
	return creds_get(c);
}
