// SPDX-License-Identifier: MIT
/*
 * Endpoint URL parsing, addressing style, region derivation and the Host
 * authority (see endpoint.h).  String work only; no DNS lookups.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/endpoint.h"

int client_endpoint_parse(const char *url, struct client_endpoint *ep)
{
	const char *p = url, *host, *host_end, *end;
	unsigned long port = 0;

	memset(ep, 0, sizeof(*ep));
	if (!url)
		return -EINVAL;
	ep->https = 1;
	if (strncasecmp(p, "https://", 8) == 0) {
		p += 8;
	} else if (strncasecmp(p, "http://", 7) == 0) {
		ep->https = 0;
		p += 7;
	} else if (strstr(p, "://")) {
		return -EINVAL; /* another scheme */
	}
	end = p + strcspn(p, "/?#");
	if (*end == '/' && end[1] == '\0')
		; /* a trailing "/" is harmless */
	else if (*end != '\0')
		return -EINVAL;
	host = p;
	if (*host == '[') {
		host_end = memchr(host, ']', (size_t)(end - host));
		if (!host_end)
			return -EINVAL;
		host_end++;
	} else {
		host_end = memchr(host, ':', (size_t)(end - host));
		if (!host_end)
			host_end = end;
	}
	if (host_end == host)
		return -EINVAL;
	for (const char *s = host; s < host_end; s++) {
		unsigned char ch = (unsigned char)*s;

		if (!isalnum(ch) && !strchr("-._[]:", ch))
			return -EINVAL;
		if (*host != '[' && (ch == '[' || ch == ']' || ch == ':'))
			return -EINVAL;
	}
	if (host_end < end) {
		const char *s = host_end;

		if (*s++ != ':' || s == end)
			return -EINVAL;
		for (; s < end; s++) {
			if (!isdigit((unsigned char)*s))
				return -EINVAL;
			port = port * 10 + (unsigned long)(*s - '0');
			if (port > 65535)
				return -EINVAL;
		}
		if (port == 0)
			return -EINVAL;
	}
	ep->host = strndup(host, (size_t)(host_end - host));
	if (!ep->host)
		return -ENOMEM;
	ep->port = (unsigned)port;
	return 0;
}

void client_endpoint_clear(struct client_endpoint *ep)
{
	free(ep->host);
	ep->host = NULL;
}

int client_path_style(const char *host, int cfg_path_style)
{
	unsigned char addr[16];
	char inner[64];
	size_t len = strlen(host);

	if (cfg_path_style)
		return 1;
	if (strcasecmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, addr) == 1)
		return 1;
	if (len > 2 && host[0] == '[' && host[len - 1] == ']' &&
	    len - 2 < sizeof(inner)) {
		memcpy(inner, host + 1, len - 2);
		inner[len - 2] = '\0';
		if (inet_pton(AF_INET6, inner, addr) == 1)
			return 1;
	}
	return 0;
}

/*
 * If @host is @pre + REGION + @suf (case-insensitive) with a plausible
 * region id, return REGION's length and set *@start; else 0.
 */
static size_t ep_match(const char *host, const char *pre, const char *suf,
		       const char **start)
{
	size_t hl = strlen(host), pl = strlen(pre), sl = strlen(suf);

	if (hl <= pl + sl || strncasecmp(host, pre, pl) != 0 ||
	    strcasecmp(host + hl - sl, suf) != 0)
		return 0;
	for (size_t i = pl; i < hl - sl; i++)
		if (!isalnum((unsigned char)host[i]) && host[i] != '-')
			return 0;
	*start = host + pl;
	return hl - sl - pl;
}

int client_region(const char *cfg_region, const char *host, char **out)
{
	static const char *const pats[][2] = {
		{"obs.", ".myhuaweicloud.com"},
		{"obs.", ".myhuaweicloud.eu"},
		{"obs.", ".otc.t-systems.com"},
		{"s3.", ".amazonaws.com"},
	};
	const char *start = NULL;
	size_t n = 0;

	*out = NULL;
	if (cfg_region && cfg_region[0]) {
		*out = strdup(cfg_region);
		return *out ? 0 : -ENOMEM;
	}
	for (size_t i = 0; host && !n && i < sizeof(pats) / sizeof(pats[0]);
	     i++)
		n = ep_match(host, pats[i][0], pats[i][1], &start);
	*out = n ? strndup(start, n) : strdup("us-east-1");
	if (!*out)
		return -ENOMEM;
	for (char *s = *out; *s; s++)
		*s = (char)tolower((unsigned char)*s);
	return 0;
}

int client_authority(const struct client_endpoint *ep, const char *bucket,
		     char **out)
{
	unsigned def = ep->https ? 443 : 80;
	int n;

	if (ep->port && ep->port != def)
		n = asprintf(out, "%s%s%s:%u", bucket ? bucket : "",
			     bucket ? "." : "", ep->host, ep->port);
	else
		n = asprintf(out, "%s%s%s", bucket ? bucket : "",
			     bucket ? "." : "", ep->host);
	if (n < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}
