/* HTTP/1.1 request framing checked strictly (RFC 9112) before libmicrohttpd sees a byte.
 *
 * libmicrohttpd 0.9.75 takes the first of two conflicting Content-Length headers, waits for
 * the end of the connection on a Transfer-Encoding it does not decode, and answers the
 * protocol errors it finds itself with HTML pages (a bad Content-Length with the status line
 * sent twice). So the plain-HTTP server puts a relay in front of it (server/http/relay.c) that
 * feeds every byte a client sends through this parser: request heads are read whole,
 * checked and forwarded in a canonical form (one Content-Length, "Transfer-Encoding:
 * chunked", CRLF line ends), bodies are forwarded as their framing says, chunk by chunk.
 * At the first error nothing more of the client's bytes goes through: the parser emits,
 * in order after the requests before it, either a request of its own (an error in a head)
 * or the end of the chunked body with a trailer (an error inside a body), both carrying the
 * header HFRAME_MARK = "<secret> <status> <message>". The access handler answers it as
 * an OpenAI-style JSON error and closes the connection (http.c). TLS keeps libmicrohttpd's own
 * listener (no relay), with the same checks on the parsed headers (http.c: framing_check). */
#ifndef MLA_SERVER_HTTP_FRAMING_H
#define MLA_SERVER_HTTP_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http/sse.h"

#define HFRAME_MARK "X-Mlaserve-Framing-Error"
#define HFRAME_SECRET_LEN 32       /* hex digits */
#define HFRAME_HEAD_MAX (32 << 10) /* a request head (request line + fields), bytes: else 431 */
#define HFRAME_LINE_MAX (8 << 10)  /* the request line: else 414 */
#define HFRAME_FIELDS_MAX 256      /* header fields of one head: else 431 */

enum hframe_body { HFRAME_BODY_NONE, HFRAME_BODY_LENGTH, HFRAME_BODY_CHUNKED };

/* A complete head, checked. */
struct hframe_head {
	char method[32];
	char target[128]; /* truncated to fit (it only names the request in errors) */
	bool http10;
	enum hframe_body body;
	uint64_t length; /* HFRAME_BODY_LENGTH */
};

/* Checks one complete request head (from the request line to the empty line, included;
 * lines end in CRLF or LF) and appends its canonical form to out. Returns 0, or the HTTP
 * status of the error (400, 413, 414, 431, 501, 505) with msg filled. */
int hframe_head_check(const char *head, size_t n, struct hframe_head *h, struct strbuf *out, char *msg,
		      size_t msg_size);

enum hframe_state { HF_HEAD, HF_BODY, HF_CHUNK_SIZE, HF_CHUNK_DATA, HF_CHUNK_CRLF, HF_TRAILER, HF_FAILED };

/* The parser of one connection's bytes, client to server. */
struct hframe {
	enum hframe_state st;
	char secret[HFRAME_SECRET_LEN + 1];
	char *buf; /* the head, a chunk-size line or the trailer section so far */
	size_t len, cap;
	size_t line_start;        /* where the current line starts in buf */
	int n_blank;              /* blank lines before a request line */
	bool cr;                  /* HF_CHUNK_CRLF: the CR was seen */
	uint64_t left;            /* HF_BODY, HF_CHUNK_DATA: bytes still to forward */
	struct hframe_head head;  /* of the current request */
	unsigned long n_requests; /* heads forwarded */
	int status;               /* HF_FAILED: the error */
	char msg[200];
};

void hframe_init(struct hframe *f, const char *secret);
void hframe_fini(struct hframe *f);
/* Feeds n client bytes; what is to be forwarded is appended to out. After an error
 * (f->st == HF_FAILED) the error's marker has been appended once and every later byte is
 * dropped. Returns 0, -1 out of memory. */
int hframe_feed(struct hframe *f, const char *in, size_t n, struct strbuf *out);
/* Whether the parser is between requests (nothing of a request pending). */
bool hframe_idle(const struct hframe *f);

/* Parses a marker's value "<secret> <status> <message>"; true when the secret matches. */
bool hframe_mark_parse(const char *value, const char *secret, int *status, const char **msg);

#endif
