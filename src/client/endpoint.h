/* SPDX-License-Identifier: MIT */
/*
 * Endpoint handling: parsing "http(s)://host[:port]", choosing path-style
 * or virtual-hosted addressing, deriving the signing region from an OBS
 * endpoint name, and building the Host value that curl sends and the
 * signature covers.  Pure functions; thread-safe.
 */
#ifndef HOARDFS_CLIENT_ENDPOINT_H
#define HOARDFS_CLIENT_ENDPOINT_H

/* A parsed endpoint URL. */
struct client_endpoint {
	int https;     /* nonzero for https:// */
	char *host;    /* host name or IP literal, IPv6 in brackets; owned */
	unsigned port; /* port given in the URL; 0 when none was */
};

/*
 * client_endpoint_parse - parse "http(s)://host[:port]" with an optional
 * trailing "/"; a missing scheme means https.  Paths, queries, user info
 * and bad ports are refused.  Returns 0 with *@ep filled (free with
 * client_endpoint_clear), -EINVAL or -ENOMEM.
 */
int client_endpoint_parse(const char *url, struct client_endpoint *ep)
	__attribute__((warn_unused_result));

/* client_endpoint_clear - free what @ep owns. */
void client_endpoint_clear(struct client_endpoint *ep);

/*
 * client_path_style - whether to address the bucket in the path: nonzero
 * when @cfg_path_style is, and also when @host is an IP literal or
 * "localhost", where a "bucket.host" name cannot resolve (the OBS SDK
 * does the same).  A deployment that needs virtual-hosted addressing on
 * such a host must give it a DNS name.
 */
int client_path_style(const char *host, int cfg_path_style);

/*
 * client_region - the signing region: @cfg_region when not NULL or empty;
 * else taken from an endpoint host "obs.<region>.myhuaweicloud.com",
 * "obs.<region>.myhuaweicloud.eu", "obs.<region>.otc.t-systems.com" or
 * "s3.<region>.amazonaws.com"; else "us-east-1".
 * Returns 0 with *@out malloc'd, or -ENOMEM.
 */
int client_region(const char *cfg_region, const char *host, char **out)
	__attribute__((warn_unused_result));

/*
 * client_authority - "[bucket.]host[:port]": the Host header value and the
 * URL authority.  The port is included only when it is not the scheme's
 * default, exactly as curl does for its own Host header.  @bucket is NULL
 * for path-style addressing.  Returns 0 with *@out malloc'd, or -ENOMEM.
 */
int client_authority(const struct client_endpoint *ep, const char *bucket,
		     char **out) __attribute__((warn_unused_result));

#endif
