// SPDX-License-Identifier: MIT
/*
 * Integrity: when an object filled by this daemon has a plain-MD5 ETag
 * (a single-part upload without SSE-KMS; [P §4] "ETag meaning"), one
 * thread reads its data file back and compares.  A mismatch drops the
 * object's parts and its extents in the index and fetches it once more;
 * a second mismatch means the store itself serves bytes that disagree
 * with its ETag, so the object is no longer cached and reads go straight
 * to the store.  Multipart ETags ("...-N") are not MD5s of the content and
 * are not checked.  The check runs off the read path: readers are not
 * delayed by it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "hoardfs/log.h"
#include "sched/sched_int.h"

#define VERIFY_CHUNK_BYTES (1 << 20) /* pread size while hashing */

/* Whether @etag is a quoted 32-digit hex MD5; its digest into @md5. */
static int etag_md5(const char *etag, unsigned char md5[16])
{
	size_t len = strlen(etag);

	if (len != 34 || etag[0] != '"' || etag[33] != '"')
		return 0;
	for (int i = 0; i < 16; i++) {
		unsigned v = 0;

		for (int j = 0; j < 2; j++) {
			char c = etag[1 + 2 * i + j];

			if (c >= '0' && c <= '9')
				v = v * 16 + (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				v = v * 16 + (unsigned)(c - 'a' + 10);
			else if (c >= 'A' && c <= 'F')
				v = v * 16 + (unsigned)(c - 'A' + 10);
			else
				return 0;
		}
		md5[i] = (unsigned char)v;
	}
	return 1;
}

void sched_verify_queue_locked(struct sched *s, struct sched_obj *o)
{
	unsigned char md5[16];

	if (!s->cfg.verify_md5 || o->verified || o->fetched == 0 ||
	    !etag_md5(o->etag, md5))
		return;
	o->verified = 1;
	o->refs++;
	s->nverify++;
	o->verify_next = NULL;
	if (s->verify_tail)
		s->verify_tail->verify_next = o;
	else
		s->verify_head = o;
	s->verify_tail = o;
	pthread_cond_signal(&s->verify_cond);
}

/* MD5 of the first @size bytes of @fd into @out.  Returns 0 or -errno. */
static int md5_fd(int fd, uint64_t size, unsigned char out[16],
		  const atomic_int *stopping)
{
	unsigned char *buf = malloc(VERIFY_CHUNK_BYTES);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int len = 0;
	uint64_t off = 0;
	int rc = 0;

	if (!buf || !ctx || !EVP_DigestInit_ex(ctx, EVP_md5(), NULL)) {
		rc = -EIO;
		goto out;
	}
	while (off < size && !atomic_load(stopping)) {
		size_t want = size - off < VERIFY_CHUNK_BYTES
				      ? (size_t)(size - off)
				      : VERIFY_CHUNK_BYTES;
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			goto out;
		}
		if (!EVP_DigestUpdate(ctx, buf, (size_t)n)) {
			rc = -EIO;
			goto out;
		}
		off += (uint64_t)n;
	}
	if (off < size)
		rc = -ECANCELED;
	else if (!EVP_DigestFinal_ex(ctx, out, &len) || len != 16)
		rc = -EIO;
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

/* React to a digest that does not match (no lock held). */
static void verify_failed(struct sched *s, struct sched_obj *o)
{
	int again;

	pthread_mutex_lock(&s->version_lock);
	pthread_mutex_lock(&s->lock);
	s->stats.verify_failures++;
	again = !o->refetched;
	o->refetched = 1;
	if (!again)
		o->bypass = 1; /* reads go to the store from now on */
	sched_obj_drop_parts_locked(o, again);
	pthread_mutex_unlock(&s->lock);
	if (idx_extents_drop(s->idx, o->idx_id) != 0)
		log_error("verify: cannot drop extents of s3://%s/%s",
			  s->bucket, o->key);
	pthread_mutex_unlock(&s->version_lock);
	if (again)
		log_error("verify: s3://%s/%s: content does not match its MD5 "
			  "ETag %s; discarded, fetching it again",
			  s->bucket, o->key, o->etag);
	else
		log_error("verify: s3://%s/%s: content does not match its MD5 "
			  "ETag %s after a second fetch; not caching it",
			  s->bucket, o->key, o->etag);
}

void *sched_verify_main(void *arg)
{
	struct sched *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		unsigned char want[16], got[16];
		struct sched_obj *o;
		unsigned generation;
		int rc;

		while (!s->verify_head && !atomic_load(&s->stopping))
			pthread_cond_wait(&s->verify_cond, &s->lock);
		if (atomic_load(&s->stopping))
			break;
		o = s->verify_head;
		s->verify_head = o->verify_next;
		if (!s->verify_head)
			s->verify_tail = NULL;
		generation = o->generation;
		pthread_mutex_unlock(&s->lock);
		rc = etag_md5(o->etag, want)
			     ? md5_fd(o->fd, o->size, got, &s->stopping)
			     : -EINVAL;
		if (rc == 0 && memcmp(want, got, sizeof(want)) != 0) {
			pthread_mutex_lock(&s->lock);
			rc = o->generation == generation && !o->stale;
			pthread_mutex_unlock(&s->lock);
			if (rc)
				verify_failed(s, o);
		} else if (rc != 0 && rc != -ECANCELED) {
			log_warn("verify: s3://%s/%s: cannot read back: %s",
				 s->bucket, o->key, strerror(-rc));
		}
		pthread_mutex_lock(&s->lock);
		s->nverify--;
		pthread_cond_broadcast(&s->room_cond);
		if (sched_obj_unref_locked(o)) {
			pthread_mutex_unlock(&s->lock);
			sched_obj_destroy(o);
			pthread_mutex_lock(&s->lock);
		}
	}
	/* Stopping: release what is still queued. */
	while (s->verify_head) {
		struct sched_obj *o = s->verify_head;

		s->verify_head = o->verify_next;
		if (sched_obj_unref_locked(o)) {
			pthread_mutex_unlock(&s->lock);
			sched_obj_destroy(o);
			pthread_mutex_lock(&s->lock);
		}
	}
	s->verify_tail = NULL;
	pthread_mutex_unlock(&s->lock);
	return NULL;
}
