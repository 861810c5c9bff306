// SPDX-License-Identifier: MIT
/*
 * ListBucketResult and <Error> parsing with libxml2 [P §3, §5].  Bodies
 * are parsed from memory with the network off and entities left alone;
 * elements are matched by local name, whatever namespace the deployment
 * uses.  The page's "next" position is computed here so that the caller
 * never has to look at raw XML.  Nothing here does I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "client/listxml.h"
#include "hoardfs/log.h"

/* libxml2 options: no network, no whitespace nodes, no stderr noise. */
#define LX_PARSE_OPTIONS                                                       \
	(XML_PARSE_NONET | XML_PARSE_NOBLANKS | XML_PARSE_NOERROR |            \
	 XML_PARSE_NOWARNING)

static int lx_hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int client_url_decode(const char *in, int plus_space, char **out)
{
	char *o, *res;

	*out = NULL;
	res = malloc(strlen(in) + 1);
	if (!res)
		return -ENOMEM;
	o = res;
	for (const char *p = in; *p; p++) {
		int hi, lo;

		if (*p == '+' && plus_space) {
			*o++ = ' ';
			continue;
		}
		if (*p != '%' || (hi = lx_hexval(p[1])) < 0 ||
		    (lo = lx_hexval(p[2])) < 0) {
			*o++ = *p;
			continue;
		}
		if (hi == 0 && lo == 0) {
			free(res);
			return -EILSEQ;
		}
		*o++ = (char)(hi << 4 | lo);
		p += 2;
	}
	*o = '\0';
	*out = res;
	return 0;
}

/* Parse exactly @n decimal digits at @s into *@v. */
static int lx_digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

int client_iso8601_parse(const char *s, int64_t *out)
{
	int year, mon, day, hour, min, sec, oh = 0, om = 0, sign = 0;
	struct tm tm = {0};
	const char *p;
	time_t t;

	/* "YYYY-MM-DDTHH:MM:SS" is 19 characters. */
	if (strlen(s) < 19 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' ||
	    s[16] != ':')
		return -EINVAL;
	if (lx_digits(s, 4, &year) || lx_digits(s + 5, 2, &mon) ||
	    lx_digits(s + 8, 2, &day) || lx_digits(s + 11, 2, &hour) ||
	    lx_digits(s + 14, 2, &min) || lx_digits(s + 17, 2, &sec))
		return -EINVAL;
	if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 ||
	    min > 59 || sec > 60)
		return -EINVAL;
	p = s + 19;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		if (lx_digits(p + 1, 2, &oh) || p[3] != ':' ||
		    lx_digits(p + 4, 2, &om) || oh > 23 || om > 59)
			return -EINVAL;
		p += 6;
	}
	if (*p != '\0')
		return -EINVAL;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* "+02:00" means local time is ahead of UTC: subtract the offset. */
	*out = (int64_t)t - (int64_t)sign * (oh * 3600 + om * 60);
	return 0;
}

/* Nonzero when @n is an element with local name @name. */
static int lx_is(const xmlNode *n, const char *name)
{
	return n->type == XML_ELEMENT_NODE &&
	       strcmp((const char *)n->name, name) == 0;
}

/* The text of @n as a malloc'd C string ("" when empty), or NULL. */
static char *lx_text(const xmlNode *n)
{
	xmlChar *t = xmlNodeGetContent(n);
	char *s = strdup(t ? (const char *)t : "");

	xmlFree(t);
	return s;
}

/* Parse a body into a document whose root has local name @root. */
static int lx_read(const char *body, size_t len, const char *root, xmlDoc **doc,
		   xmlNode **top)
{
	*doc = NULL;
	*top = NULL;
	if (len > CLIENT_XML_MAX_BYTES)
		return -EIO;
	*doc = xmlReadMemory(body, (int)len, NULL, NULL, LX_PARSE_OPTIONS);
	if (!*doc)
		return -EIO;
	*top = xmlDocGetRootElement(*doc);
	if (!*top || !lx_is(*top, root)) {
		xmlFreeDoc(*doc);
		*doc = NULL;
		*top = NULL;
		return -EIO;
	}
	return 0;
}

/* Strict unsigned decimal. */
static int lx_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' ||
		    v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

/* A growable array of entries under construction. */
struct lx_vec {
	struct client_list_entry *v; /* entries, owned */
	size_t n;		     /* used */
	size_t cap;		     /* allocated */
};

static int lx_push(struct lx_vec *a, struct client_list_entry *e)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct client_list_entry *v = realloc(a->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = *e;
	return 0;
}

static void lx_vec_free(struct lx_vec *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].name);
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

/*
 * Decode a name read from the body: URL-decoded when @url, as-is otherwise.
 * Sets *@out to NULL (and returns 0) for a name that cannot be a C string.
 */
static int lx_name(char *raw, int url, char **out)
{
	int rc;

	*out = NULL;
	if (!url) {
		*out = raw;
		return 0;
	}
	rc = client_url_decode(raw, 1, out);
	free(raw);
	if (rc == -EILSEQ) {
		log_warn("list: skipping a name with an encoded NUL byte");
		return 0;
	}
	return rc;
}

/* One <Contents> element into @keys. */
static int lx_contents(const xmlNode *c, int url, struct lx_vec *keys,
		       char **last)
{
	struct client_list_entry e = {0};
	char *raw = NULL, *text;
	int rc = 0;

	for (const xmlNode *n = c->children; n; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		text = lx_text(n);
		if (!text) {
			rc = -ENOMEM;
			goto out;
		}
		if (lx_is(n, "Key")) {
			free(raw);
			raw = text;
			continue;
		}
		if (lx_is(n, "Size") && lx_u64(text, &e.size) != 0)
			rc = -EIO;
		else if (lx_is(n, "LastModified") &&
			 client_iso8601_parse(text, &e.mtime_sec) != 0)
			rc = -EIO;
		else if (lx_is(n, "ETag") && strlen(text) >= sizeof(e.etag))
			rc = -EIO;
		else if (lx_is(n, "ETag"))
			memcpy(e.etag, text, strlen(text) + 1);
		free(text);
		if (rc)
			goto out;
	}
	if (!raw) {
		rc = -EIO;
		goto out;
	}
	rc = lx_name(raw, url, &e.name);
	raw = NULL;
	if (rc || !e.name)
		goto out;
	rc = lx_push(keys, &e);
	if (rc)
		goto out;
	*last = e.name;
	e.name = NULL;
out:
	free(raw);
	free(e.name);
	return rc;
}

/* One <CommonPrefixes> element (one or more <Prefix>) into @prefixes. */
static int lx_prefixes(const xmlNode *c, int url, struct lx_vec *prefixes,
		       char **last)
{
	for (const xmlNode *n = c->children; n; n = n->next) {
		struct client_list_entry e = {0};
		char *raw;
		int rc;

		if (!lx_is(n, "Prefix"))
			continue;
		raw = lx_text(n);
		if (!raw)
			return -ENOMEM;
		rc = lx_name(raw, url, &e.name);
		if (rc)
			return rc;
		if (!e.name)
			continue;
		e.is_prefix = 1;
		rc = lx_push(prefixes, &e);
		if (rc) {
			free(e.name);
			return rc;
		}
		*last = e.name;
	}
	return 0;
}

int client_listxml_parse(const char *body, size_t len, int v2,
			 struct client_list_page *page)
{
	struct lx_vec keys = {0}, prefixes = {0};
	char *last_key = NULL, *last_prefix = NULL; /* borrowed from vecs */
	char *next_raw = NULL, *text;
	int url = 0, truncated = 0, rc;
	xmlNode *root;
	xmlDoc *doc;

	memset(page, 0, sizeof(*page));
	rc = lx_read(body, len, "ListBucketResult", &doc, &root);
	if (rc)
		return rc;
	/* EncodingType may follow the entries, so look for it first. */
	for (const xmlNode *n = root->children; n; n = n->next) {
		if (!lx_is(n, "EncodingType"))
			continue;
		text = lx_text(n);
		if (!text) {
			rc = -ENOMEM;
			goto out;
		}
		url = strcmp(text, "url") == 0;
		free(text);
	}
	for (const xmlNode *n = root->children; n && rc == 0; n = n->next) {
		if (lx_is(n, "Contents")) {
			rc = lx_contents(n, url, &keys, &last_key);
		} else if (lx_is(n, "CommonPrefixes")) {
			rc = lx_prefixes(n, url, &prefixes, &last_prefix);
		} else if (lx_is(n, "IsTruncated")) {
			text = lx_text(n);
			if (!text)
				rc = -ENOMEM;
			else if (strcmp(text, "true") == 0)
				truncated = 1;
			else if (strcmp(text, "false") != 0)
				rc = -EIO;
			free(text);
		} else if (lx_is(n,
				 v2 ? "NextContinuationToken" : "NextMarker")) {
			free(next_raw);
			next_raw = lx_text(n);
			if (!next_raw)
				rc = -ENOMEM;
		}
	}
	if (rc)
		goto out;

	if (truncated) {
		if (next_raw && next_raw[0] && (v2 || !url)) {
			page->next = next_raw;
			next_raw = NULL;
		} else if (next_raw && next_raw[0]) {
			rc = client_url_decode(next_raw, 1, &page->next);
			if (rc == -EILSEQ)
				rc = -EIO;
		} else if (!v2 && (last_key || last_prefix)) {
			const char *m = last_key;

			if (!m || (last_prefix && strcmp(last_prefix, m) > 0))
				m = last_prefix;
			page->next = strdup(m);
			if (!page->next)
				rc = -ENOMEM;
		} else {
			/* Truncated with nothing to continue from. */
			rc = -EIO;
		}
		if (rc)
			goto out;
	}

	page->n = keys.n + prefixes.n;
	if (page->n) {
		page->v = realloc(keys.v, page->n * sizeof(*page->v));
		if (!page->v) {
			page->n = 0;
			rc = -ENOMEM;
			goto out;
		}
		if (prefixes.n)
			memcpy(page->v + keys.n, prefixes.v,
			       prefixes.n * sizeof(*page->v));
		keys.v = NULL;
		keys.n = keys.cap = 0;
		free(prefixes.v);
		prefixes.v = NULL;
		prefixes.n = prefixes.cap = 0;
	}
	page->truncated = truncated;
out:
	if (rc) {
		free(page->next);
		page->next = NULL;
	}
	lx_vec_free(&keys);
	lx_vec_free(&prefixes);
	free(next_raw);
	xmlFreeDoc(doc);
	return rc;
}

/* Copy @n's text into a fixed field of @size bytes, truncating. */
static int lx_copy_field(const xmlNode *n, char *field, size_t size)
{
	char *t = lx_text(n);

	if (!t)
		return -ENOMEM;
	snprintf(field, size, "%s", t);
	free(t);
	return 0;
}

int client_listxml_error(const char *body, size_t len, struct client_error *err)
{
	xmlNode *root;
	xmlDoc *doc;
	int rc;

	rc = lx_read(body, len, "Error", &doc, &root);
	if (rc)
		return rc;
	for (const xmlNode *n = root->children; n && rc == 0; n = n->next) {
		if (lx_is(n, "Code"))
			rc = lx_copy_field(n, err->code, sizeof(err->code));
		else if (lx_is(n, "Message"))
			rc = lx_copy_field(n, err->message,
					   sizeof(err->message));
		else if (lx_is(n, "RequestId"))
			rc = lx_copy_field(n, err->request_id,
					   sizeof(err->request_id));
	}
	xmlFreeDoc(doc);
	return rc;
}
