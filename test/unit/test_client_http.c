// SPDX-License-Identifier: MIT
/*
 * End-to-end tests of src/client/client.c against a scripted HTTP/1.1
 * server running in a thread of this process: what is sent (path, query,
 * headers, and a signature recomputed from the bytes received), keep-alive
 * reuse, ranged GET validation, resume after a broken body with If-Match,
 * retries on 5xx and Retry-After, error mapping and the listing request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/listxml.h"
#include "client/sigv2.h"
#include "client/sigv4.h"
#include "hoardfs/client.h"
#include "hoardfs/log.h"

#define MOCK_MAX_SCRIPT 16
#define MOCK_MAX_CONNS	16
#define MOCK_HEAD_MAX	8192

/* One canned answer. */
struct mock_resp {
	int status;	     /* HTTP status */
	const char *headers; /* extra header lines, each ending "\r\n" */
	const char *body;    /* body bytes actually sent (not for HEAD) */
	long content_length; /* announced length; -1: strlen(body) */
	int close_after;     /* close the connection after answering */
};

/* The server: a poll loop over the listener and open connections. */
struct mock {
	int lfd;				  /* listening socket */
	unsigned short port;			  /* its port */
	pthread_t thread;			  /* the poll loop */
	int stop_pipe[2];			  /* written to stop the loop */
	pthread_mutex_t lock;			  /* guards everything below */
	struct mock_resp script[MOCK_MAX_SCRIPT]; /* answers in order */
	size_t n_script;			  /* answers scripted */
	size_t n_reqs;				  /* requests answered */
	char reqs[MOCK_MAX_SCRIPT][MOCK_HEAD_MAX]; /* their heads */
	int n_accepted;				   /* connections accepted */
	int sig_bad;		   /* requests whose signature failed */
	enum client_signature sig; /* scheme to verify */
	const char *vhost_bucket;  /* V2/OBS: bucket not in the path */
};

static struct mock mock;

/* Copy the value of header @name in request @head into @out ("" if none). */
static int mock_header(const char *head, const char *name, char *out,
		       size_t size)
{
	size_t nlen = strlen(name);
	const char *line = strstr(head, "\r\n");

	out[0] = '\0';
	while (line && line[2] != '\r' && line[2] != '\0') {
		const char *l = line + 2, *end = strstr(l, "\r\n");

		if (!end)
			break;
		if ((size_t)(end - l) > nlen &&
		    strncasecmp(l, name, nlen) == 0 && l[nlen] == ':') {
			const char *v = l + nlen + 1;

			while (*v == ' ')
				v++;
			snprintf(out, size, "%.*s", (int)(end - v), v);
			return 1;
		}
		line = end;
	}
	return 0;
}

/*
 * A request sent through a proxy has an absolute target
 * "http://host/path": keep only the path.
 */
static void mock_strip_absolute(char *target)
{
	if (strncmp(target, "http://", 7) == 0) {
		char *path = strchr(target + 7, '/');

		memmove(target, path ? path : "/",
			strlen(path ? path : "/") + 1);
	}
}

/* Recompute a V4 signature from the request as received. */
static int mock_verify_v4(const char *head)
{
	char method[16], target[2048], auth[1024], sh[512], date[64];
	char values[8][512], *names[8], *query, *want = NULL;
	struct client_sig_header h[8];
	struct client_sig_param p[8];
	char *pstore[16] = {0};
	size_t nh = 0, np = 0;
	int ok = 0;

	if (sscanf(head, "%15s %2047s", method, target) != 2 ||
	    !mock_header(head, "Authorization", auth, sizeof(auth)) ||
	    !mock_header(head, "x-amz-date", date, sizeof(date)))
		return 0;
	mock_strip_absolute(target);
	char *s = strstr(auth, "SignedHeaders=");
	if (!s)
		return 0;
	snprintf(sh, sizeof(sh), "%.*s", (int)strcspn(s + 14, ","), s + 14);
	for (char *save = NULL, *n = strtok_r(sh, ";", &save); n && nh < 8;
	     n = strtok_r(NULL, ";", &save)) {
		names[nh] = n;
		mock_header(head, n, values[nh], sizeof(values[nh]));
		h[nh] = (struct client_sig_header){names[nh], values[nh]};
		nh++;
	}
	query = strchr(target, '?');
	if (query)
		*query++ = '\0';
	for (char *save = NULL,
		  *kv = query ? strtok_r(query, "&", &save) : NULL;
	     kv && np < 8; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');

		if (eq)
			*eq = '\0';
		if (client_url_decode(kv, 0, &pstore[2 * np]) != 0 ||
		    (eq &&
		     client_url_decode(eq + 1, 0, &pstore[2 * np + 1]) != 0))
			goto out;
		p[np] = (struct client_sig_param){pstore[2 * np],
						  pstore[2 * np + 1]};
		np++;
	}
	struct client_sigv4_request r = {
		.method = method,
		.path = target,
		.params = p,
		.n_params = np,
		.headers = h,
		.n_headers = nh,
		.payload_hash = "UNSIGNED-PAYLOAD",
	};
	if (client_sigv4_authorization(&r, "AK", "SK", "us-east-1", date, NULL,
				       &want) != 0)
		goto out;
	ok = strcmp(want, auth) == 0;
out:
	free(want);
	for (size_t i = 0; i < 16; i++)
		free(pstore[i]);
	return ok;
}

/* Recompute an OBS/V2 signature (object requests without sub-resources). */
static int mock_verify_v2(const char *head, int obs)
{
	char method[16], target[2100], auth[512], date[64], token[256];
	char sig[CLIENT_SIGV2_SIG_LEN + 1], *sts = NULL, want[600];
	struct client_sig_header h[2];
	size_t n = 0;
	int ok;

	if (sscanf(head, "%15s %2000s", method, target) != 2 ||
	    !mock_header(head, "Authorization", auth, sizeof(auth)) ||
	    !mock_header(head, obs ? "x-obs-date" : "x-amz-date", date,
			 sizeof(date)))
		return 0;
	target[strcspn(target, "?")] = '\0';
	mock_strip_absolute(target);
	if (mock.vhost_bucket) {
		/* Virtual-hosted: the resource is "/bucket" + the path. */
		size_t bl = strlen(mock.vhost_bucket);

		memmove(target + bl + 1, target, strlen(target) + 1);
		target[0] = '/';
		memcpy(target + 1, mock.vhost_bucket, bl);
	}
	h[n++] = (struct client_sig_header){obs ? "x-obs-date" : "x-amz-date",
					    date};
	if (mock_header(head,
			obs ? "x-obs-security-token" : "x-amz-security-token",
			token, sizeof(token)))
		h[n++] = (struct client_sig_header){
			obs ? "x-obs-security-token" : "x-amz-security-token",
			token};
	/* Path style: the target is the resource itself. */
	if (client_sigv2_string_to_sign(method, NULL, NULL, "", h, n,
					obs ? "x-obs-" : "x-amz-", target,
					&sts) != 0)
		return 0;
	ok = client_sigv2_signature("SK", sts, sig) == 0;
	free(sts);
	snprintf(want, sizeof(want), "%s AK:%s", obs ? "OBS" : "AWS", sig);
	return ok && strcmp(want, auth) == 0;
}

/* Answer one complete request head on @fd; returns 0, or -1 to close. */
static int mock_answer(int fd, const char *head)
{
	struct mock_resp r = {.status = 500, .body = "", .close_after = 1};
	char out[1024];
	size_t blen;
	int n, ok, is_head = strncmp(head, "HEAD ", 5) == 0;

	ok = mock.sig == CLIENT_SIG_V4	  ? mock_verify_v4(head)
	     : mock.sig == CLIENT_SIG_OBS ? mock_verify_v2(head, 1)
					  : mock_verify_v2(head, 0);
	pthread_mutex_lock(&mock.lock);
	if (!ok)
		mock.sig_bad++;
	if (mock.n_reqs < mock.n_script)
		r = mock.script[mock.n_reqs];
	if (mock.n_reqs < MOCK_MAX_SCRIPT) {
		size_t hl = strnlen(head, MOCK_HEAD_MAX - 1);

		memcpy(mock.reqs[mock.n_reqs], head, hl);
		mock.reqs[mock.n_reqs][hl] = '\0';
	}
	mock.n_reqs++;
	pthread_mutex_unlock(&mock.lock);

	blen = strlen(r.body);
	n = snprintf(out, sizeof(out),
		     "HTTP/1.1 %d X\r\nContent-Length: %ld\r\n%s\r\n", r.status,
		     r.content_length >= 0 ? r.content_length : (long)blen,
		     r.headers ? r.headers : "");
	if (send(fd, out, (size_t)n, MSG_NOSIGNAL) != n)
		return -1;
	if (!is_head && blen &&
	    send(fd, r.body, blen, MSG_NOSIGNAL) != (ssize_t)blen)
		return -1;
	return r.close_after ? -1 : 0;
}

static void *mock_loop(void *arg)
{
	struct pollfd pfd[MOCK_MAX_CONNS + 2];
	char buf[MOCK_MAX_CONNS][MOCK_HEAD_MAX];
	size_t used[MOCK_MAX_CONNS] = {0};
	int conn[MOCK_MAX_CONNS];

	(void)arg;
	for (int i = 0; i < MOCK_MAX_CONNS; i++)
		conn[i] = -1;
	for (;;) {
		pfd[0] = (struct pollfd){.fd = mock.lfd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = mock.stop_pipe[0],
					 .events = POLLIN};
		for (int i = 0; i < MOCK_MAX_CONNS; i++)
			pfd[i + 2] = (struct pollfd){.fd = conn[i],
						     .events = POLLIN};
		if (poll(pfd, MOCK_MAX_CONNS + 2, -1) < 0)
			continue;
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & POLLIN) {
			int fd = accept(mock.lfd, NULL, NULL);

			for (int i = 0; fd >= 0 && i < MOCK_MAX_CONNS; i++) {
				if (conn[i] < 0) {
					conn[i] = fd;
					used[i] = 0;
					fd = -1;
				}
			}
			if (fd >= 0)
				close(fd);
			pthread_mutex_lock(&mock.lock);
			mock.n_accepted++;
			pthread_mutex_unlock(&mock.lock);
		}
		for (int i = 0; i < MOCK_MAX_CONNS; i++) {
			char *end;
			ssize_t n;

			if (conn[i] < 0 || !pfd[i + 2].revents)
				continue;
			n = recv(conn[i], buf[i] + used[i],
				 MOCK_HEAD_MAX - 1 - used[i], 0);
			if (n <= 0) {
				close(conn[i]);
				conn[i] = -1;
				continue;
			}
			used[i] += (size_t)n;
			buf[i][used[i]] = '\0';
			end = strstr(buf[i], "\r\n\r\n");
			if (!end)
				continue;
			end[2] = '\0'; /* keep the last header's CRLF */
			if (mock_answer(conn[i], buf[i]) != 0) {
				close(conn[i]);
				conn[i] = -1;
			}
			used[i] = 0; /* GET/HEAD: no request bodies */
		}
	}
	for (int i = 0; i < MOCK_MAX_CONNS; i++)
		if (conn[i] >= 0)
			close(conn[i]);
	return NULL;
}

static int mock_setup(void **state)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);

	(void)state;
	memset(&mock, 0, sizeof(mock));
	pthread_mutex_init(&mock.lock, NULL);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	mock.lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (mock.lfd < 0 || bind(mock.lfd, (struct sockaddr *)&sa, len) ||
	    listen(mock.lfd, 16) ||
	    getsockname(mock.lfd, (struct sockaddr *)&sa, &len) ||
	    pipe(mock.stop_pipe))
		return -1;
	mock.port = ntohs(sa.sin_port);
	return pthread_create(&mock.thread, NULL, mock_loop, NULL);
}

static int mock_teardown(void **state)
{
	(void)state;
	if (write(mock.stop_pipe[1], "x", 1) != 1)
		return -1;
	pthread_join(mock.thread, NULL);
	close(mock.lfd);
	close(mock.stop_pipe[0]);
	close(mock.stop_pipe[1]);
	pthread_mutex_destroy(&mock.lock);
	return 0;
}

static void mock_script(const struct mock_resp *r, size_t n)
{
	pthread_mutex_lock(&mock.lock);
	memcpy(mock.script, r, n * sizeof(*r));
	mock.n_script = n;
	mock.n_reqs = 0;
	mock.n_accepted = 0;
	mock.sig_bad = 0;
	pthread_mutex_unlock(&mock.lock);
}

static struct client *mock_client(enum client_signature sig, unsigned retries,
				  unsigned conns)
{
	char endpoint[64];
	struct client_config cfg = {
		.endpoint = endpoint,
		.bucket = "bucket",
		.signature = sig,
		.creds = {"AK", "SK", NULL, 0},
		.max_connections = conns,
		.connect_timeout_ms = 2000,
		.low_speed_time_sec = 5,
		.max_retries = retries,
	};
	struct client *c = NULL;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", mock.port);
	mock.sig = sig;
	assert_int_equal(client_new(&cfg, &c), 0);
	return c;
}

/* Collects a GET body and checks that offsets are contiguous. */
struct sink {
	char data[4096]; /* bytes received */
	size_t len;	 /* how many */
	uint64_t next;	 /* expected next offset */
	int fail_with;	 /* nonzero: return this errno on the first call */
};

static int sink_fn(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct sink *s = arg;

	if (s->fail_with)
		return s->fail_with;
	assert_true(off == s->next);
	assert_true(s->len + len <= sizeof(s->data));
	memcpy(s->data + s->len, buf, len);
	s->len += len;
	s->next += len;
	return 0;
}

#define ETAG_HDR "ETag: \"e1\"\r\n"
#define DIGITS	 "0123456789abcdefghijklmnopqrstuvwxyz" /* 36 bytes */

static void test_head(void **state)
{
	static const struct mock_resp r[] = {
		{200,
		 ETAG_HDR "Last-Modified: Fri, 24 May 2013 00:00:00 GMT\r\n"
			  "x-amz-request-id: R1\r\n",
		 "", 1234, 0},
		{200, ETAG_HDR, "", 5, 0},
		{404, "x-amz-request-id: R404\r\n", "", -1, 0},
	};
	struct client_object_meta meta;
	struct client_error err;
	struct client *c = mock_client(CLIENT_SIG_V4, 2, 1);
	char host[64], v[128];

	(void)state;
	mock_script(r, 3);
	assert_int_equal(client_head(c, "dir/a b+c.txt", &meta, &err), 0);
	assert_int_equal(meta.size, 1234);
	assert_string_equal(meta.etag, "\"e1\"");
	assert_int_equal(meta.mtime_sec, 1369353600);
	/* Path style (an IP endpoint), encoded key, Host with the port. */
	assert_true(strncmp(mock.reqs[0],
			    "HEAD /bucket/dir/a%20b%2Bc.txt HTTP/1.1\r\n",
			    40) == 0);
	snprintf(host, sizeof(host), "127.0.0.1:%u", mock.port);
	assert_true(mock_header(mock.reqs[0], "Host", v, sizeof(v)));
	assert_string_equal(v, host);
	/* Exactly one Host header: ours, the one that was signed. */
	const char *h1 = strcasestr(mock.reqs[0], "\r\nhost:");
	assert_non_null(h1);
	assert_null(strcasestr(h1 + 1, "\r\nhost:"));
	assert_true(mock_header(mock.reqs[0], "x-amz-content-sha256", v,
				sizeof(v)));
	assert_string_equal(v, "UNSIGNED-PAYLOAD");
	assert_false(mock_header(mock.reqs[0], "Expect", v, sizeof(v)));
	assert_false(
		mock_header(mock.reqs[0], "Accept-Encoding", v, sizeof(v)));
	/* Keys with "./.." go out as they are. */
	assert_int_equal(client_head(c, "a/../b/./c", &meta, &err), 0);
	assert_true(strncmp(mock.reqs[1], "HEAD /bucket/a/../b/./c ", 24) == 0);
	assert_int_equal(meta.size, 5);
	assert_int_equal(meta.mtime_sec, 0);
	/* 404: -ENOENT, no retry, request id kept. */
	assert_int_equal(client_head(c, "missing", &meta, &err), -ENOENT);
	assert_int_equal(err.http_status, 404);
	assert_string_equal(err.request_id, "R404");
	assert_int_equal(mock.n_reqs, 3);
	/* Three requests over one kept-alive connection. */
	assert_int_equal(mock.n_accepted, 1);
	assert_int_equal(mock.sig_bad, 0);
	/* Local checks, nothing sent. */
	char long_key[1100];
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	assert_int_equal(client_head(c, long_key, &meta, &err), -ENAMETOOLONG);
	assert_int_equal(client_head(c, "", &meta, &err), -EINVAL);
	assert_int_equal(mock.n_reqs, 3);
	client_free(c);
}

static void test_get_ranges(void **state)
{
	static const struct mock_resp r[] = {
		/* exact 206 */
		{206, ETAG_HDR "Content-Range: bytes 10-19/36\r\n",
		 "abcdefghij", -1, 0},
		/* the object ends first: clamped */
		{206, ETAG_HDR "Content-Range: bytes 30-35/36\r\n", "uvwxyz",
		 -1, 0},
		/* range ignored: whole object, slice delivered */
		{200, ETAG_HDR, DIGITS, -1, 0},
		/* wrong Content-Range */
		{206, ETAG_HDR "Content-Range: bytes 0-9/36\r\n", "0123456789",
		 -1, 0},
		{416, "", "<Error><Code>InvalidRange</Code></Error>", -1, 0},
		{412, "", "<Error><Code>PreconditionFailed</Code></Error>", -1,
		 0},
	};
	struct client_object_meta meta;
	struct client_error err;
	struct client *c = mock_client(CLIENT_SIG_V4, 2, 2);
	struct sink s = {.next = 10};
	char v[128];

	(void)state;
	mock_script(r, 6);
	assert_int_equal(
		client_get(c, "obj", 10, 10, NULL, sink_fn, &s, &meta, &err),
		0);
	assert_int_equal(s.len, 10);
	assert_memory_equal(s.data, "abcdefghij", 10);
	assert_int_equal(meta.size, 36);
	assert_string_equal(meta.etag, "\"e1\"");
	assert_true(mock_header(mock.reqs[0], "Range", v, sizeof(v)));
	assert_string_equal(v, "bytes=10-19");
	assert_false(mock_header(mock.reqs[0], "If-Match", v, sizeof(v)));

	memset(&s, 0, sizeof(s));
	s.next = 30;
	assert_int_equal(client_get(c, "obj", 30, 100, "\"e1\"", sink_fn, &s,
				    &meta, &err),
			 0);
	assert_int_equal(s.len, 6);
	assert_int_equal(meta.size, 36);
	assert_true(mock_header(mock.reqs[1], "If-Match", v, sizeof(v)));
	assert_string_equal(v, "\"e1\"");

	memset(&s, 0, sizeof(s));
	s.next = 5;
	assert_int_equal(
		client_get(c, "obj", 5, 3, NULL, sink_fn, &s, &meta, &err), 0);
	assert_int_equal(s.len, 3);
	assert_memory_equal(s.data, "567", 3);

	memset(&s, 0, sizeof(s));
	s.next = 5;
	assert_int_equal(
		client_get(c, "obj", 5, 10, NULL, sink_fn, &s, &meta, &err),
		-EIO);
	assert_int_equal(s.len, 0);
	assert_int_equal(
		client_get(c, "obj", 99, 10, NULL, sink_fn, &s, &meta, &err),
		-ERANGE);
	assert_string_equal(err.code, "InvalidRange");
	assert_int_equal(client_get(c, "obj", 0, 10, "\"old\"", sink_fn, &s,
				    &meta, &err),
			 -ESTALE);
	assert_int_equal(err.http_status, 412);
	/* len 0: nothing sent. */
	assert_int_equal(
		client_get(c, "obj", 0, 0, NULL, sink_fn, &s, &meta, &err), 0);
	assert_int_equal(mock.n_reqs, 6);
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);
}

static void test_get_whole_object_tail(void **state)
{
	static char big[200000];
	struct mock_resp r[3] = {
		/* 200 with a long tail: stop after the range, drop the link */
		{200, ETAG_HDR, big, -1, 0},
		/* 200 with a short tail: drained, the link is kept */
		{200, ETAG_HDR, DIGITS, -1, 0},
		{200, ETAG_HDR, DIGITS, -1, 0},
	};
	struct client *c = mock_client(CLIENT_SIG_V4, 0, 1);
	struct client_object_meta meta;
	struct sink s = {0};

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[0] = 'A';
	mock_script(r, 3);
	assert_int_equal(
		client_get(c, "obj", 0, 10, NULL, sink_fn, &s, &meta, NULL), 0);
	assert_int_equal(s.len, 10);
	assert_memory_equal(s.data, "Axxxxxxxxx", 10);
	assert_int_equal(meta.size, sizeof(big) - 1);
	for (int i = 0; i < 2; i++) {
		memset(&s, 0, sizeof(s));
		s.next = 30;
		assert_int_equal(client_get(c, "obj", 30, 10, NULL, sink_fn, &s,
					    &meta, NULL),
				 0);
		assert_int_equal(s.len, 6);
		assert_memory_equal(s.data, "uvwxyz", 6);
	}
	assert_int_equal(mock.n_reqs, 3);
	assert_int_equal(mock.n_accepted, 2);
	client_free(c);
}

static void test_get_resume(void **state)
{
	static const struct mock_resp r[] = {
		/* announces 20 bytes, sends 8, hangs up */
		{206, ETAG_HDR "Content-Range: bytes 0-19/36\r\n", "01234567",
		 20, 1},
		/* a 503 on the way */
		{503, "Retry-After: 0\r\n",
		 "<Error><Code>SlowDown</Code></Error>", -1, 0},
		/* the rest */
		{206, ETAG_HDR "Content-Range: bytes 8-19/36\r\n",
		 "89abcdefghij", -1, 0},
	};
	struct client_object_meta meta;
	struct client_error err;
	struct client *c = mock_client(CLIENT_SIG_V4, 3, 1);
	struct sink s = {0};
	char v[128];

	(void)state;
	mock_script(r, 3);
	assert_int_equal(
		client_get(c, "obj", 0, 20, NULL, sink_fn, &s, &meta, &err), 0);
	assert_int_equal(s.len, 20);
	assert_memory_equal(s.data, "0123456789abcdefghij", 20);
	assert_int_equal(mock.n_reqs, 3);
	/* The resumed requests ask for the remainder of the same object. */
	assert_true(mock_header(mock.reqs[1], "Range", v, sizeof(v)));
	assert_string_equal(v, "bytes=8-19");
	assert_true(mock_header(mock.reqs[2], "If-Match", v, sizeof(v)));
	assert_string_equal(v, "\"e1\"");
	/* Each attempt is signed afresh and verifies. */
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);
}

static void test_get_failures(void **state)
{
	static const struct mock_resp r[] = {
		/* short body, no retries allowed */
		{206, ETAG_HDR "Content-Range: bytes 0-19/36\r\n", "0123", 20,
		 1},
		/* 503 three times with max_retries = 2 */
		{503, "Retry-After: 0\r\nx-amz-request-id: RQ\r\n",
		 "<Error><Code>SlowDown</Code><Message>m</Message></Error>", -1,
		 0},
		{503, "Retry-After: 0\r\n", "", -1, 0},
		{503, "Retry-After: 0\r\nx-amz-request-id: RQ3\r\n",
		 "<Error><Code>SlowDown</Code><Message>m</Message></Error>", -1,
		 0},
		/* resumed response for another object: refused */
		{206, ETAG_HDR "Content-Range: bytes 0-19/36\r\n", "0123", 20,
		 1},
		{206, "ETag: \"e2\"\r\nContent-Range: bytes 4-19/36\r\n",
		 "456789abcdefghij", -1, 0},
		/* the caller's callback aborts */
		{206, ETAG_HDR "Content-Range: bytes 0-3/36\r\n", "0123", -1,
		 0},
		/* 403 is not retried */
		{403, "", "<Error><Code>AccessDenied</Code></Error>", -1, 0},
	};
	struct client_error err;
	struct client *c0 = mock_client(CLIENT_SIG_V4, 0, 1);
	struct client *c2 = mock_client(CLIENT_SIG_V4, 2, 1);
	struct sink s = {0};

	(void)state;
	mock_script(r, 8);
	assert_int_equal(
		client_get(c0, "obj", 0, 20, NULL, sink_fn, &s, NULL, &err),
		-EIO);
	assert_int_equal(err.http_status, 0);

	memset(&s, 0, sizeof(s));
	assert_int_equal(
		client_get(c2, "obj", 0, 20, NULL, sink_fn, &s, NULL, &err),
		-EIO);
	assert_int_equal(err.http_status, 503);
	assert_string_equal(err.code, "SlowDown");
	assert_string_equal(err.request_id, "RQ3");
	assert_int_equal(mock.n_reqs, 4);

	memset(&s, 0, sizeof(s));
	assert_int_equal(
		client_get(c2, "obj", 0, 20, NULL, sink_fn, &s, NULL, &err),
		-ESTALE);
	assert_int_equal(s.len, 4);

	memset(&s, 0, sizeof(s));
	s.fail_with = -EINTR;
	assert_int_equal(
		client_get(c2, "obj", 0, 4, NULL, sink_fn, &s, NULL, &err),
		-EINTR);
	assert_int_equal(mock.n_reqs, 7);

	memset(&s, 0, sizeof(s));
	assert_int_equal(
		client_get(c2, "obj", 0, 4, NULL, sink_fn, &s, NULL, &err),
		-EACCES);
	assert_string_equal(err.code, "AccessDenied");
	assert_int_equal(mock.n_reqs, 8);
	assert_int_equal(mock.sig_bad, 0);
	client_free(c0);
	client_free(c2);
}

static void test_list(void **state)
{
	static const struct mock_resp r[] = {
		{200, "Content-Type: application/xml\r\n",
		 "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/"
		 "2006-03-01/\"><IsTruncated>true</IsTruncated>"
		 "<Contents><Key>dir/a%20b</Key><Size>3</Size>"
		 "<ETag>&quot;x&quot;</ETag></Contents>"
		 "<CommonPrefixes><Prefix>dir/sub/</Prefix></CommonPrefixes>"
		 "<EncodingType>url</EncodingType></ListBucketResult>",
		 -1, 0},
		{200, "",
		 "<ListBucketResult><IsTruncated>true</IsTruncated>"
		 "<NextMarker>dir/sub/</NextMarker></ListBucketResult>",
		 -1, 0},
		{200, "", "<ListBucketResult><IsTruncated>", -1, 0},
		{404, "", "<Error><Code>NoSuchBucket</Code></Error>", -1, 0},
	};
	struct client_list_page page;
	struct client_error err;
	struct client *c = mock_client(CLIENT_SIG_V4, 1, 1);

	(void)state;
	mock_script(r, 4);
	assert_int_equal(client_list(c, "dir/", "/", NULL, 0, &page, &err), 0);
	assert_true(strncmp(mock.reqs[0],
			    "GET /bucket/?delimiter=%2F&encoding-type=url&"
			    "max-keys=1000&prefix=dir%2F HTTP/1.1\r\n",
			    81) == 0);
	assert_int_equal(page.n, 2);
	assert_string_equal(page.v[0].name, "dir/a b");
	assert_string_equal(page.v[0].etag, "\"x\"");
	assert_string_equal(page.v[1].name, "dir/sub/");
	assert_true(page.truncated);
	assert_string_equal(page.next, "dir/sub/");
	client_list_page_clear(&page);
	/* The same marker again would loop: refused. */
	assert_int_equal(
		client_list(c, "dir/", "/", "dir/sub/", 5000, &page, &err),
		-EIO);
	assert_non_null(strstr(mock.reqs[1], "marker=dir%2Fsub%2F&"
					     "max-keys=1000&"));
	assert_null(page.v);
	assert_int_equal(client_list(c, "", NULL, NULL, 10, &page, &err), -EIO);
	assert_true(strncmp(mock.reqs[2],
			    "GET /bucket/?encoding-type=url&max-keys=10 ",
			    43) == 0);
	assert_int_equal(client_list(c, "", NULL, NULL, 10, &page, &err),
			 -ENOENT);
	assert_string_equal(err.code, "NoSuchBucket");
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);
}

/* Requests by kind: attempts as the store sees them, retries, failures
 * (an unusable listing included) and GET bytes. */
static void test_op_stats(void **state)
{
	static const struct mock_resp r[] = {
		{200, ETAG_HDR, "", 5, 0},
		{404, "", "", -1, 0},
		{503, "Retry-After: 0\r\n", "", -1, 0},
		{206, ETAG_HDR "Content-Range: bytes 0-9/36\r\n", "0123456789",
		 -1, 0},
		{200, "",
		 "<ListBucketResult><IsTruncated>false</IsTruncated>"
		 "</ListBucketResult>",
		 -1, 0},
		{200, "", "<ListBucketResult><IsTruncated>", -1, 0},
	};
	struct client_object_meta meta;
	struct client_list_page page;
	struct client_op_stats st;
	struct client *c = mock_client(CLIENT_SIG_V4, 2, 1);
	struct sink s = {0};

	(void)state;
	mock_script(r, 6);
	client_op_stats_get(c, &st);
	assert_int_equal(st.attempts[CLIENT_KIND_GET], 0);
	assert_int_equal(client_head(c, "a", &meta, NULL), 0);
	assert_int_equal(client_head(c, "b", &meta, NULL), -ENOENT);
	assert_int_equal(
		client_get(c, "obj", 0, 10, NULL, sink_fn, &s, NULL, NULL), 0);
	assert_int_equal(client_list(c, "", "/", NULL, 0, &page, NULL), 0);
	client_list_page_clear(&page);
	assert_int_equal(client_list(c, "", "/", NULL, 0, &page, NULL), -EIO);
	client_op_stats_get(c, &st);
	assert_int_equal(st.attempts[CLIENT_KIND_HEAD], 2);
	assert_int_equal(st.failed[CLIENT_KIND_HEAD], 1);
	assert_int_equal(st.retries[CLIENT_KIND_HEAD], 0);
	assert_int_equal(st.attempts[CLIENT_KIND_GET],
			 2); /* as the store saw */
	assert_int_equal(st.retries[CLIENT_KIND_GET], 1);
	assert_int_equal(st.failed[CLIENT_KIND_GET], 0);
	assert_int_equal(st.get_bytes, 10);
	assert_int_equal(st.attempts[CLIENT_KIND_LIST], 2);
	assert_int_equal(st.failed[CLIENT_KIND_LIST], 1);
	assert_int_equal(mock.n_reqs, 6);
	client_free(c);
}

static void test_list_v2_and_obs(void **state)
{
	static const struct mock_resp r[] = {
		{200, "",
		 "<ListBucketResult><IsTruncated>false</IsTruncated>"
		 "</ListBucketResult>",
		 -1, 0},
		{200, ETAG_HDR, "", 7, 0},
		{200, ETAG_HDR, "", 8, 0},
	};
	char endpoint[64];
	struct client_config cfg = {
		.endpoint = endpoint,
		.bucket = "bucket",
		.list_v2 = 1,
		.creds = {"AK", "SK", "TOK", 0},
		.max_connections = 1,
	};
	struct client_list_page page;
	struct client_object_meta meta;
	struct client *c = NULL;
	char v[128];

	(void)state;
	snprintf(endpoint, sizeof(endpoint), "http://localhost:%u", mock.port);
	mock_script(r, 3);
	mock.sig = CLIENT_SIG_V4;
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_int_equal(client_list(c, "p", NULL, "tok/+=", 0, &page, NULL),
			 0);
	assert_true(strncmp(mock.reqs[0],
			    "GET /bucket/?continuation-token=tok%2F%2B%3D&"
			    "encoding-type=url&list-type=2&max-keys=1000&"
			    "prefix=p ",
			    95) == 0);
	assert_true(mock_header(mock.reqs[0], "x-amz-security-token", v,
				sizeof(v)));
	assert_string_equal(v, "TOK");
	assert_non_null(
		strstr(mock.reqs[0], "x-amz-date;x-amz-security-token,"));
	client_list_page_clear(&page);
	client_free(c);
	assert_int_equal(mock.sig_bad, 0);

	/* Native OBS signature, with a token. */
	cfg.signature = CLIENT_SIG_OBS;
	mock.sig = CLIENT_SIG_OBS;
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_int_equal(client_head(c, "a b", &meta, NULL), 0);
	assert_int_equal(meta.size, 7);
	assert_true(mock_header(mock.reqs[1], "Authorization", v, sizeof(v)));
	assert_true(strncmp(v, "OBS AK:", 7) == 0);
	assert_true(mock_header(mock.reqs[1], "x-obs-security-token", v,
				sizeof(v)));
	client_free(c);
	assert_int_equal(mock.sig_bad, 0);

	/* AWS V2. */
	cfg.signature = CLIENT_SIG_V2;
	mock.sig = CLIENT_SIG_V2;
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_int_equal(meta.size, 8);
	assert_true(mock_header(mock.reqs[2], "Authorization", v, sizeof(v)));
	assert_true(strncmp(v, "AWS AK:", 7) == 0);
	client_free(c);
	assert_int_equal(mock.sig_bad, 0);
}

static void test_virtual_hosted(void **state)
{
	static const struct mock_resp r[] = {
		{200, ETAG_HDR, "", 3, 0},
		{200, "", "<ListBucketResult/>", -1, 0},
		{200, ETAG_HDR, "", 4, 0},
		{200, "", "<ListBucketResult/>", -1, 0},
	};
	char proxy[64], v[256];
	struct client_config cfg = {
		.endpoint = "http://s3.example.test:8080",
		.bucket = "bucket",
		.creds = {"AK", "SK", NULL, 0},
		.max_connections = 1,
	};
	struct client_object_meta meta;
	struct client_list_page page;
	struct client *c = NULL;

	(void)state;
	/* The mock server acts as an HTTP proxy: no DNS needed. */
	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%u", mock.port);
	setenv("http_proxy", proxy, 1);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");
	mock_script(r, 4);
	for (int sig = CLIENT_SIG_V4; sig <= CLIENT_SIG_OBS; sig += 2) {
		int i = sig == CLIENT_SIG_V4 ? 0 : 2;

		cfg.signature = (enum client_signature)sig;
		mock.sig = cfg.signature;
		mock.vhost_bucket = "bucket";
		assert_int_equal(client_new(&cfg, &c), 0);
		assert_int_equal(client_head(c, "dir/k", &meta, NULL), 0);
		assert_true(strncmp(mock.reqs[i],
				    "HEAD http://bucket.s3.example.test:8080"
				    "/dir/k HTTP/1.1\r\n",
				    56) == 0);
		assert_true(mock_header(mock.reqs[i], "Host", v, sizeof(v)));
		assert_string_equal(v, "bucket.s3.example.test:8080");
		assert_int_equal(client_list(c, "", NULL, NULL, 1, &page, NULL),
				 0);
		assert_true(strncmp(mock.reqs[i + 1],
				    "GET http://bucket.s3.example.test:8080"
				    "/?encoding-type=url&max-keys=1 ",
				    69) == 0);
		client_list_page_clear(&page);
		client_free(c);
	}
	unsetenv("http_proxy");
	mock.vhost_bucket = NULL;
	assert_int_equal(mock.sig_bad, 0);
}

/* Many threads through a pool of two handles. */
struct worker {
	struct client *c; /* shared client */
	int rc;		  /* result of its HEAD requests */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct client_object_meta meta;

	for (int i = 0; i < 2 && w->rc == 0; i++)
		w->rc = client_head(w->c, "k", &meta, NULL);
	return NULL;
}

static void test_pool_threads(void **state)
{
	struct mock_resp r[MOCK_MAX_SCRIPT];
	struct worker w[8];
	pthread_t t[8];
	struct client *c = mock_client(CLIENT_SIG_V4, 0, 2);

	(void)state;
	for (int i = 0; i < MOCK_MAX_SCRIPT; i++)
		r[i] = (struct mock_resp){200, ETAG_HDR, "", 1, 0};
	mock_script(r, MOCK_MAX_SCRIPT);
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){c, 0};
		assert_int_equal(
			pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].rc, 0);
	}
	assert_int_equal(mock.n_reqs, 16);
	assert_true(mock.n_accepted <= 2);
	client_free(c);
}

static void test_transport_and_config(void **state)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	struct client_config cfg = {
		.bucket = "b",
		.creds = {"AK", "SK", NULL, 0},
		.max_connections = 1,
		.max_retries = 1,
	};
	struct client_object_meta meta;
	struct client_error err;
	struct client *c = NULL;
	char endpoint[64];
	int fd;

	(void)state;
	/* A port nobody listens on. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u",
		 ntohs(sa.sin_port));
	cfg.endpoint = endpoint;
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_string_equal(client_bucket(c), "b");
	assert_int_equal(client_head(c, "k", &meta, &err), -ECONNREFUSED);
	assert_int_equal(err.http_status, 0);
	assert_true(err.message[0] != '\0');
	client_free(c);

	cfg.endpoint = "http://host/path";
	assert_int_equal(client_new(&cfg, &c), -EINVAL);
	cfg.endpoint = "http://host";
	cfg.creds.secret_key = "";
	assert_int_equal(client_new(&cfg, &c), -EINVAL);
	cfg.creds.secret_key = "SK";
	cfg.max_connections = 0;
	assert_int_equal(client_new(&cfg, &c), -EINVAL);
	cfg.max_connections = 1;
	cfg.signature = (enum client_signature)7;
	assert_int_equal(client_new(&cfg, &c), -EINVAL);
	assert_null(c);
	client_free(NULL);
}

/* A refresher for the tests: installs token "TOK<n>" (AK/SK stay, so
 * the mock's signature check still holds) valid for @refresh_ttl s. */
static int refresh_calls;
static int64_t refresh_ttl;

static int test_refresher(void *arg, struct client *c)
{
	char tok[32];

	(void)arg;
	snprintf(tok, sizeof(tok), "TOK%d", ++refresh_calls);
	return client_set_credentials(
		c, &(struct client_credentials){
			   "AK", "SK", tok,
			   refresh_ttl ? time(NULL) + refresh_ttl : 0});
}

static void test_clock_skew(void **state)
{
	static char hdr[128];
	struct mock_resp r[4];
	struct client_object_meta meta;
	struct client_stats st;
	struct client *c;
	char v[64], want[32];
	time_t ahead = time(NULL) + 3600;
	struct tm tm;

	(void)state;
	gmtime_r(&ahead, &tm);
	strftime(hdr, sizeof(hdr), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
	r[0] = (struct mock_resp){
		403, hdr, "<Error><Code>RequestTimeTooSkewed</Code></Error>",
		-1, 0};
	r[1] = (struct mock_resp){200, ETAG_HDR, "", 3, 0};
	r[2] = (struct mock_resp){200, ETAG_HDR, "", 3, 0};
	/* HEAD has no error body: a 403 whose Date is far off is skew. */
	r[3] = (struct mock_resp){200, ETAG_HDR, "", 3, 0};
	c = mock_client(CLIENT_SIG_V4, 0, 1);
	mock_script(r, 3);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_int_equal(mock.n_reqs, 2);
	/* The retry is signed with the server's time, and so is the next. */
	strftime(want, sizeof(want), "%Y%m%dT%H", &tm);
	for (int i = 1; i < 3; i++) {
		if (i == 2)
			assert_int_equal(client_head(c, "k", &meta, NULL), 0);
		assert_true(
			mock_header(mock.reqs[i], "x-amz-date", v, sizeof(v)));
		assert_true(strncmp(v, want, strlen(want)) == 0);
	}
	client_get_stats(c, &st);
	assert_true(st.clock_offset_sec > 3590 && st.clock_offset_sec < 3610);
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);

	/* OBS signing, HEAD, a bare 403 with a Date 20 minutes behind. */
	ahead = time(NULL) - 1200;
	gmtime_r(&ahead, &tm);
	strftime(hdr, sizeof(hdr), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
	r[0] = (struct mock_resp){403, hdr, "", -1, 0};
	c = mock_client(CLIENT_SIG_OBS, 0, 1);
	mock_script(r, 2);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_int_equal(mock.n_reqs, 2);
	strftime(want, sizeof(want), "%a, %d %b %Y %H:", &tm);
	assert_true(mock_header(mock.reqs[1], "x-obs-date", v, sizeof(v)));
	assert_true(strncmp(v, want, strlen(want)) == 0);
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);
}

static void test_credentials_refresh(void **state)
{
	static const struct mock_resp r[] = {
		{403, "", "<Error><Code>ExpiredToken</Code></Error>", -1, 0},
		{200, ETAG_HDR, "", 3, 0},
		/* refused again right after a refresh: no second refresh */
		{403, "", "<Error><Code>ExpiredToken</Code></Error>", -1, 0},
		/* AccessDenied is policy, not expiry */
		{403, "", "<Error><Code>AccessDenied</Code></Error>", -1, 0},
		{200, ETAG_HDR, "", 3, 0},
		{200, ETAG_HDR, "", 3, 0},
		{200, ETAG_HDR, "", 3, 0},
	};
	char endpoint[64], v[64];
	struct client_config cfg = {
		.endpoint = endpoint,
		.bucket = "bucket",
		.signature = CLIENT_SIG_V2,
		.creds = {"AK", "SK", "TOK0", 0},
		.max_connections = 2,
		.refresh = test_refresher,
	};
	struct client_object_meta meta;
	struct client_error err;
	struct client_stats st;
	struct client *c = NULL;

	(void)state;
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", mock.port);
	mock.sig = CLIENT_SIG_V2;
	refresh_calls = 0;
	refresh_ttl = 0;
	mock_script(r, 7);
	assert_int_equal(client_new(&cfg, &c), 0);
	/* Refused as expired: refreshed once, retried with the new token. */
	assert_int_equal(client_head(c, "k", &meta, &err), 0);
	assert_int_equal(refresh_calls, 1);
	assert_true(mock_header(mock.reqs[0], "x-amz-security-token", v,
				sizeof(v)));
	assert_string_equal(v, "TOK0");
	assert_true(mock_header(mock.reqs[1], "x-amz-security-token", v,
				sizeof(v)));
	assert_string_equal(v, "TOK1");
	assert_int_equal(client_get(c, "k", 0, 3, NULL, sink_fn,
				    &(struct sink){0}, NULL, &err),
			 -EACCES);
	assert_int_equal(refresh_calls, 1);
	assert_int_equal(client_get(c, "k", 0, 3, NULL, sink_fn,
				    &(struct sink){0}, NULL, &err),
			 -EACCES);
	assert_string_equal(err.code, "AccessDenied");
	assert_int_equal(refresh_calls, 1);
	assert_int_equal(mock.n_reqs, 4);

	/* Keys that expire in 4 s are renewed from 2 s on, in the
	 * background: the request that notices goes on with the old ones. */
	refresh_ttl = 3600;
	time_t t0 = time(NULL);
	assert_int_equal(
		client_set_credentials(
			c, &(struct client_credentials){"AK", "SK", "SHORT",
							t0 + 4}),
		0);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_int_equal(refresh_calls, 1);
	while (time(NULL) < t0 + 2)
		usleep(20 * 1000);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_true(mock_header(mock.reqs[5], "x-amz-security-token", v,
				sizeof(v)));
	assert_string_equal(v, "SHORT");
	for (int i = 0; i < 200; i++) {
		client_get_stats(c, &st);
		if (st.refreshes >= 2)
			break;
		usleep(10 * 1000);
	}
	assert_int_equal(refresh_calls, 2);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_true(mock_header(mock.reqs[6], "x-amz-security-token", v,
				sizeof(v)));
	assert_string_equal(v, "TOK2");
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);

	/* Keys already expired: renewed before the first attempt. */
	cfg.creds.expires_sec = time(NULL) - 1;
	cfg.signature = CLIENT_SIG_OBS;
	mock.sig = CLIENT_SIG_OBS;
	mock_script(r + 1, 1);
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	assert_int_equal(refresh_calls, 3);
	assert_true(mock_header(mock.reqs[0], "x-obs-security-token", v,
				sizeof(v)));
	assert_string_equal(v, "TOK3");
	assert_false(mock_header(mock.reqs[0], "x-amz-security-token", v,
				 sizeof(v)));
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);
	/* Without a refresher an expired token is just refused. */
	cfg.refresh = NULL;
	mock_script(r, 1);
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_int_equal(client_head(c, "k", &meta, &err), -EACCES);
	assert_int_equal(mock.n_reqs, 1);
	assert_int_equal(
		client_set_credentials(
			c, &(struct client_credentials){"", "SK", NULL, 0}),
		-EINVAL);
	client_free(c);
}

static void test_throttling_and_budget(void **state)
{
	struct mock_resp r[MOCK_MAX_SCRIPT];
	char endpoint[64];
	struct client_config cfg = {
		.endpoint = endpoint,
		.bucket = "bucket",
		.creds = {"AK", "SK", NULL, 0},
		.max_connections = 8,
		.max_retries = 8,
	};
	struct client_object_meta meta;
	struct client_error err;
	struct client_stats st;
	struct client *c = NULL;
	int64_t t0;

	(void)state;
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", mock.port);
	mock.sig = CLIENT_SIG_V4;
	assert_int_equal(client_new(&cfg, &c), 0);
	/* SlowDown, SlowDown, 429, then fine: the cap halves once per
	 * window (each retry started after the cut before it). */
	r[0] = (struct mock_resp){503, "Retry-After: 0\r\n",
				  "<Error><Code>SlowDown</Code></Error>", -1,
				  0};
	r[1] = r[0];
	r[2] = (struct mock_resp){429, "", "", -1, 0};
	r[3] = (struct mock_resp){200, ETAG_HDR, "", 3, 0};
	mock_script(r, 4);
	assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	client_get_stats(c, &st);
	assert_int_equal(st.throttled, 3);
	assert_int_equal(st.inflight_cap_min, 1); /* 8 -> 4 -> 2 -> 1 */
	assert_int_equal(st.inflight_cap, 2);	  /* the success: +1 */
	assert_int_equal(st.retries, 3);
	/* It grows back by one per window of successes, up to the max. */
	for (int i = 0; i < MOCK_MAX_SCRIPT; i++)
		r[i] = (struct mock_resp){200, ETAG_HDR, "", 3, 0};
	mock_script(r, MOCK_MAX_SCRIPT);
	for (int i = 0; i < 6; i++)
		assert_int_equal(client_head(c, "k", &meta, NULL), 0);
	client_get_stats(c, &st);
	assert_int_equal(st.inflight_cap, 4); /* 2 (2 ok) 3 (3 ok) 4 (1) */

	client_free(c);

	/* Always 500: retries stop at the deadline, well before 8. */
	cfg.retry_deadline_ms = 400;
	assert_int_equal(client_new(&cfg, &c), 0);
	for (int i = 0; i < MOCK_MAX_SCRIPT; i++)
		r[i] = (struct mock_resp){500, "", "", -1, 0};
	mock_script(r, MOCK_MAX_SCRIPT);
	t0 = (int64_t)time(NULL);
	assert_int_equal(client_head(c, "k", &meta, &err), -EIO);
	assert_true((int64_t)time(NULL) - t0 <= 2);
	assert_true(mock.n_reqs >= 2 && mock.n_reqs < 9);
	client_get_stats(c, &st);
	assert_int_equal(st.failed, 1);
	client_free(c);

	/* A body that keeps breaking but makes progress each time is
	 * resumed beyond max_retries: only failures in a row count. */
	cfg.max_retries = 1;
	cfg.retry_deadline_ms = 0;
	r[0] = (struct mock_resp){206,
				  ETAG_HDR "Content-Range: bytes 0-19/36\r\n",
				  "0123", 20, 1};
	r[1] = (struct mock_resp){206,
				  ETAG_HDR "Content-Range: bytes 4-19/36\r\n",
				  "4567", 16, 1};
	r[2] = (struct mock_resp){206,
				  ETAG_HDR "Content-Range: bytes 8-19/36\r\n",
				  "89ab", 12, 1};
	r[3] = (struct mock_resp){206,
				  ETAG_HDR "Content-Range: bytes 12-19/36\r\n",
				  "cdefghij", -1, 0};
	mock_script(r, 4);
	assert_int_equal(client_new(&cfg, &c), 0);
	struct sink s = {0};
	assert_int_equal(
		client_get(c, "obj", 0, 20, NULL, sink_fn, &s, NULL, &err), 0);
	assert_int_equal(s.len, 20);
	assert_memory_equal(s.data, "0123456789abcdefghij", 20);
	client_get_stats(c, &st);
	assert_int_equal(st.resumed, 3);
	assert_int_equal(mock.sig_bad, 0);
	client_free(c);
}

static void test_resolve_virtual_hosted(void **state)
{
	static const struct mock_resp r[] = {{200, ETAG_HDR, "", 3, 0}};
	char endpoint[64], resolve[96], v[128], host[96];
	struct client_config cfg = {
		.endpoint = endpoint,
		.bucket = "bucket",
		.signature = CLIENT_SIG_OBS,
		.creds = {"AK", "SK", NULL, 0},
		.max_connections = 1,
		.resolve = resolve,
	};
	struct client_object_meta meta;
	struct client *c = NULL;

	(void)state;
	/* No DNS, no proxy: the bucket host is pinned to the mock. */
	unsetenv("http_proxy");
	snprintf(endpoint, sizeof(endpoint), "http://obs.test.invalid:%u",
		 mock.port);
	snprintf(resolve, sizeof(resolve),
		 "bucket.obs.test.invalid:%u:127.0.0.1", mock.port);
	snprintf(host, sizeof(host), "bucket.obs.test.invalid:%u", mock.port);
	mock.sig = CLIENT_SIG_OBS;
	mock.vhost_bucket = "bucket";
	mock_script(r, 1);
	assert_int_equal(client_new(&cfg, &c), 0);
	assert_int_equal(client_head(c, "d/k", &meta, NULL), 0);
	assert_true(strncmp(mock.reqs[0], "HEAD /d/k HTTP/1.1\r\n", 20) == 0);
	assert_true(mock_header(mock.reqs[0], "Host", v, sizeof(v)));
	assert_string_equal(v, host);
	assert_int_equal(mock.sig_bad, 0);
	mock.vhost_bucket = NULL;
	client_free(c);
	cfg.resolve = "no-port";
	assert_int_equal(client_new(&cfg, &c), -EINVAL);
	cfg.resolve = "h:99999:1.2.3.4";
	assert_int_equal(client_new(&cfg, &c), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_get_ranges),
		cmocka_unit_test(test_get_whole_object_tail),
		cmocka_unit_test(test_get_resume),
		cmocka_unit_test(test_get_failures),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_op_stats),
		cmocka_unit_test(test_list_v2_and_obs),
		cmocka_unit_test(test_virtual_hosted),
		cmocka_unit_test(test_pool_threads),
		cmocka_unit_test(test_transport_and_config),
		cmocka_unit_test(test_clock_skew),
		cmocka_unit_test(test_credentials_refresh),
		cmocka_unit_test(test_throttling_and_budget),
		cmocka_unit_test(test_resolve_virtual_hosted),
	};
	int rc;

	log_init(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN, 0);
	if (client_global_init() != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, mock_setup, mock_teardown);
	client_global_cleanup();
	return rc;
}
