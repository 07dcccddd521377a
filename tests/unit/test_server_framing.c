/* Strict HTTP/1.1 request framing (src/server/http/framing.c): what goes on to libmicrohttpd, in
 * one piece and fed a byte at a time, and where the error marker lands. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/http/framing.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef";

/* Feeds in whole (step 0) or step bytes at a time; the forwarded bytes in *out (owned). */
static struct hframe feed(const char *in, size_t step, char **out)
{
	struct hframe f;
	hframe_init(&f, SECRET);
	struct strbuf o = {0};
	size_t n = strlen(in);
	if (!step)
		step = n ? n : 1;
	for (size_t i = 0; i < n; i += step)
		EXPECT(hframe_feed(&f, in + i, i + step < n ? step : n - i, &o) == 0);
	strbuf_put(&o, "", 1);
	*out = o.p ? o.p : strdup("");
	hframe_fini(&f);
	return f;
}

/* The forwarded bytes are the same whole and byte by byte. */
static struct hframe feed_both(const char *in, char **out)
{
	char *one;
	struct hframe f = feed(in, 1, &one);
	struct hframe g = feed(in, 0, out);
	EXPECTF(!strcmp(one, *out), "byte by byte: %s\nwhole: %s", one, *out);
	EXPECT_EQ_INT(f.st, g.st);
	free(one);
	return g;
}

static void expect_error(const char *in, int status)
{
	char *out;
	struct hframe f = feed_both(in, &out);
	EXPECTF(f.st == HF_FAILED && f.status == status, "%s: state %d status %d (%s), expected %d", in, f.st,
		f.status, f.msg, status);
	const char *m = strstr(out, HFRAME_MARK ": ");
	EXPECTF(m != NULL, "no marker in %s", out);
	if (m) {
		char val[300];
		const char *e = strstr(m, "\r\n");
		size_t vn = (size_t)(e - m) - sizeof HFRAME_MARK - 1;
		snprintf(val, sizeof val, "%.*s", (int)vn, m + sizeof HFRAME_MARK + 1);
		int st = 0;
		const char *msg;
		EXPECT(hframe_mark_parse(val, SECRET, &st, &msg));
		EXPECT_EQ_INT(st, status);
		EXPECT(!hframe_mark_parse(val, "ffffffffffffffffffffffffffffffff", &st, &msg));
		EXPECT(strstr(m + 1, HFRAME_MARK) == NULL); /* once */
	}
	free(out);
}

static void framing_canonical_heads(void)
{
	char *out;
	struct hframe f = feed_both("POST /v1/x HTTP/1.1\nHost: a\nContent-Length:  3 \n\nabc"
				    "GET /health HTTP/1.1\r\nHost: a\r\n\r\n",
				    &out);
	EXPECT_EQ_INT(f.st, HF_HEAD);
	EXPECT_EQ_INT(f.n_requests, 2);
	EXPECTF(!strcmp(out, "POST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
			     "GET /health HTTP/1.1\r\nHost: a\r\n\r\n"),
		"%s", out);
	free(out);
	/* equal repeated lengths are one */
	f = feed_both("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nab", &out);
	EXPECTF(!strcmp(out, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab"), "%s", out);
	free(out);
	/* a marker sent by the client is dropped */
	f = feed_both("GET / HTTP/1.0\r\n" HFRAME_MARK ": x 400 y\r\n\r\n", &out);
	EXPECTF(!strcmp(out, "GET / HTTP/1.0\r\n\r\n"), "%s", out);
	free(out);
}

static void framing_chunked(void)
{
	char *out;
	struct hframe f = feed_both("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"
				    "3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\nContent-Length: 9\r\n\r\n"
				    "GET / HTTP/1.0\r\n\r\n",
				    &out);
	EXPECT_EQ_INT(f.st, HF_HEAD);
	EXPECT_EQ_INT(f.n_requests, 2);
	EXPECTF(!strcmp(out, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: "
			     "1\r\n\r\n"
			     "GET / HTTP/1.0\r\n\r\n"),
		"%s", out);
	free(out);
	/* an error inside the body ends it with the marker in a trailer */
	f = feed_both("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n", &out);
	EXPECT_EQ_INT(f.status, 400);
	EXPECTF(!strncmp(out + strlen("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
			 "3\r\nabc\r\n0\r\n" HFRAME_MARK ": ", 10 + sizeof HFRAME_MARK),
		"%s", out);
	free(out);
}

static void framing_errors(void)
{
	expect_error("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400);
	expect_error("POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\nabcd", 400);
	expect_error("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400);
	expect_error("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
	expect_error("GET / HTTP/9.9\r\n\r\n", 505);
	expect_error("GET / HTTP/1.1 x\r\n\r\n", 400);
	expect_error("GET /\r\n\r\n", 400);
	expect_error("G(T / HTTP/1.1\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nHost x\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\n: x\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n", 400);
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n", 400);
	expect_error("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400); /* HTTP/1.1 without Host */
	expect_error("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n", 400);
	char *big = malloc(HFRAME_HEAD_MAX + 64);
	strcpy(big, "GET / HTTP/1.1\r\nX: ");
	memset(big + strlen(big), 'a', HFRAME_HEAD_MAX);
	big[HFRAME_HEAD_MAX + 20] = 0;
	expect_error(big, 431);
	strcpy(big, "GET /");
	memset(big + 5, 'a', HFRAME_LINE_MAX + 10);
	big[HFRAME_LINE_MAX + 15] = 0;
	expect_error(big, 414);
	free(big);
}

/* After an error, nothing more goes through: no request runs behind it. */
static void framing_nothing_after_an_error(void)
{
	char *out;
	struct hframe f = feed_both("GET /a HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 1\r\n"
				    "Content-Length: 30\r\n\r\nGET /c HTTP/1.1\r\n\r\n",
				    &out);
	EXPECT_EQ_INT(f.n_requests, 1);
	EXPECT(strstr(out, "/c") == NULL);
	EXPECT(strstr(out, "POST /b HTTP/1.1\r\nHost: mlaserve\r\n" HFRAME_MARK) != NULL);
	free(out);
}

TESTS(T(framing_canonical_heads), T(framing_chunked), T(framing_errors), T(framing_nothing_after_an_error))
