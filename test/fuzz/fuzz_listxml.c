// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the listing parser: any bytes as a ListObjects V1
 * and a V2 page (client_listxml_parse), and as an <Error> body
 * (client_listxml_error).  Beyond what the sanitizers catch, it checks the
 * promises of src/client/listxml.h: a failed parse leaves the page empty;
 * a parsed page has C-string names, empty ETags on prefixes, keys before
 * prefixes, and a next position exactly when it is truncated; error fields
 * stay NUL-terminated.
 */
#include <string.h>

#include <libxml/parser.h>

#include "client/listxml.h"
#include "fuzz.h"
#include "hoardfs/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	xmlInitParser();
	log_set_level(LOG_LEVEL_OFF); /* skipped keys warn; keep output short */
	return 0;
}

static void check_page(const struct client_list_page *page)
{
	int seen_prefix = 0;

	FUZZ_CHECK(page->n == 0 || page->v);
	for (size_t i = 0; i < page->n; i++) {
		const struct client_list_entry *e = &page->v[i];

		FUZZ_CHECK(e->name);
		FUZZ_CHECK(memchr(e->etag, '\0', sizeof(e->etag)));
		if (e->is_prefix) {
			seen_prefix = 1;
			FUZZ_CHECK(e->etag[0] == '\0' && e->size == 0);
		} else {
			FUZZ_CHECK(!seen_prefix);
		}
	}
	FUZZ_CHECK(!page->truncated == !page->next);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct client_list_page page;
	struct client_error err;

	for (int v2 = 0; v2 <= 1; v2++) {
		memset(&page, 0xa5, sizeof(page)); /* not pre-cleared */
		if (client_listxml_parse(body, size, v2, &page) == 0) {
			check_page(&page);
			client_list_page_clear(&page);
		} else {
			FUZZ_CHECK(page.n == 0 && !page.v && !page.next);
		}
	}
	memset(&err, 0, sizeof(err));
	if (client_listxml_error(body, size, &err) == 0) {
		FUZZ_CHECK(memchr(err.code, '\0', sizeof(err.code)));
		FUZZ_CHECK(memchr(err.message, '\0', sizeof(err.message)));
		FUZZ_CHECK(
			memchr(err.request_id, '\0', sizeof(err.request_id)));
	}
	return 0;
}
