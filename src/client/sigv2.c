// SPDX-License-Identifier: MIT
/*
 * HMAC-SHA1 request signing shared by AWS V2 and native OBS [P §2.1-2.2]:
 * the CanonicalizedResource, the StringToSign and the Base64 signature.
 * The caller picks the prefix and label; nothing here knows about HTTP.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "client/buf.h"
#include "client/sigv2.h"

/*
 * Query parameters that are part of the signed resource: the union of the
 * AWS V2 list [AWS-v2] and OBS's ALLOWED_RESOURCE_PARAMTER_NAMES
 * [PY-const].  Everything else (prefix, marker, ...) is left out.
 */
static const char *const sig2_subresources[] = {
	"acl",
	"append",
	"attname",
	"cors",
	"delete",
	"lifecycle",
	"location",
	"logging",
	"notification",
	"partNumber",
	"policy",
	"position",
	"quota",
	"replication",
	"requestPayment",
	"response-cache-control",
	"response-content-disposition",
	"response-content-encoding",
	"response-content-language",
	"response-content-type",
	"response-expires",
	"restore",
	"storageClass",
	"storagePolicy",
	"tagging",
	"torrent",
	"uploadId",
	"uploads",
	"versionId",
	"versioning",
	"versions",
	"website",
	"x-obs-security-token",
};

static int sig2_is_subresource(const char *name)
{
	for (size_t i = 0;
	     i < sizeof(sig2_subresources) / sizeof(sig2_subresources[0]); i++)
		if (strcmp(name, sig2_subresources[i]) == 0)
			return 1;
	return 0;
}

static int sig2_param_cmp(const void *a, const void *b)
{
	const struct client_sig_param *x =
		*(const struct client_sig_param *const *)a;
	const struct client_sig_param *y =
		*(const struct client_sig_param *const *)b;

	return strcmp(x->name, y->name);
}

int client_sigv2_resource(const char *bucket, const char *encoded_key,
			  const struct client_sig_param *params, size_t n,
			  char **out)
{
	const struct client_sig_param **sub = NULL;
	struct client_buf b = {0};
	size_t k = 0;
	int rc = -ENOMEM;

	*out = NULL;
	if (n) {
		sub = calloc(n, sizeof(*sub));
		if (!sub)
			goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (sig2_is_subresource(params[i].name))
			sub[k++] = &params[i];
	if (k > 1)
		qsort(sub, k, sizeof(*sub), sig2_param_cmp);
	client_buf_printf(&b, "/%s/%s", bucket, encoded_key);
	for (size_t i = 0; i < k; i++) {
		client_buf_puts(&b, i ? "&" : "?");
		client_buf_puts(&b, sub[i]->name);
		if (sub[i]->value) {
			client_buf_puts(&b, "=");
			client_buf_puts(&b, sub[i]->value);
		}
	}
	rc = client_buf_take(&b, out);
out:
	free(sub);
	client_buf_free(&b);
	return rc;
}

/* A header picked for CanonicalizedHeaders. */
struct sig2_hpair {
	char *name;	   /* lower-cased */
	const char *value; /* as given */
	size_t order;	   /* input position, keeps repeats in order */
};

static int sig2_hpair_cmp(const void *a, const void *b)
{
	const struct sig2_hpair *x = a, *y = b;
	int d = strcmp(x->name, y->name);

	if (d)
		return d;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Append @v without leading and trailing spaces or tabs. */
static void sig2_put_trimmed(struct client_buf *b, const char *v)
{
	size_t len;

	while (*v == ' ' || *v == '\t')
		v++;
	len = strlen(v);
	while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	client_buf_append(b, v, len);
}

int client_sigv2_string_to_sign(const char *method, const char *content_md5,
				const char *content_type, const char *date,
				const struct client_sig_header *h, size_t n,
				const char *prefix, const char *resource,
				char **out)
{
	struct sig2_hpair *v = NULL;
	struct client_buf b = {0};
	size_t plen = strlen(prefix), k = 0;
	int rc = -ENOMEM;

	*out = NULL;
	if (n) {
		v = calloc(n, sizeof(*v));
		if (!v)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (strncasecmp(h[i].name, prefix, plen) != 0)
			continue;
		v[k].name = strdup(h[i].name);
		if (!v[k].name)
			goto out;
		for (char *s = v[k].name; *s; s++)
			if (*s >= 'A' && *s <= 'Z')
				*s = (char)(*s - 'A' + 'a');
		v[k].value = h[i].value ? h[i].value : "";
		v[k].order = i;
		k++;
	}
	if (k > 1)
		qsort(v, k, sizeof(*v), sig2_hpair_cmp);
	client_buf_printf(&b, "%s\n%s\n%s\n%s\n", method,
			  content_md5 ? content_md5 : "",
			  content_type ? content_type : "", date ? date : "");
	for (size_t i = 0; i < k; i++) {
		if (i > 0 && strcmp(v[i].name, v[i - 1].name) == 0) {
			if (!b.error && b.len)
				b.len--; /* drop the "\n", join with "," */
			client_buf_puts(&b, ",");
		} else {
			client_buf_printf(&b, "%s:", v[i].name);
		}
		sig2_put_trimmed(&b, v[i].value);
		client_buf_puts(&b, "\n");
	}
	client_buf_puts(&b, resource);
	rc = client_buf_take(&b, out);
out:
	for (size_t i = 0; i < k; i++)
		free(v[i].name);
	free(v);
	client_buf_free(&b);
	return rc;
}

int client_sigv2_signature(const char *secret, const char *sts,
			   char out[CLIENT_SIGV2_SIG_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;

	if (!HMAC(EVP_sha1(), secret, (int)strlen(secret),
		  (const unsigned char *)sts, strlen(sts), md, &md_len) ||
	    md_len != 20)
		return -EIO;
	/* 20 bytes encode to 28 characters plus the NUL EVP writes. */
	EVP_EncodeBlock((unsigned char *)out, md, (int)md_len);
	return 0;
}
