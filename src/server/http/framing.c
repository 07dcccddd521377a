/* Strict HTTP/1.1 request framing (RFC 9112) in front of libmicrohttpd: see framing.h. */
#include "server/http/framing.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c) { return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c)); }

/* a field value's bytes: HTAB, SP, VCHAR, obs-text */
static bool is_value_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

/* An excerpt of client bytes for a message: printable ASCII only, at most 40 bytes. */
static void excerpt(char *dst, size_t size, const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 1 < size && i < 40; i++)
		dst[k++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (n > 40 && k + 4 < size)
		k += (size_t)snprintf(dst + k, size - k, "...");
	dst[k] = 0;
}

static int fail(char *msg, size_t size, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t size, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, size, fmt, ap);
	va_end(ap);
	return status;
}

/* Next line of [p, end): its length without CR LF; *next past its LF. -1: a bare CR. */
static long next_line(const char *p, const char *end, const char **next)
{
	const char *lf = memchr(p, '\n', (size_t)(end - p));
	if (!lf)
		lf = end;
	*next = lf < end ? lf + 1 : end;
	const char *e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
	if (memchr(p, '\r', (size_t)(e - p)))
		return -1;
	return e - p;
}

static void trim_ows(const char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t'))
		(*s)++, (*n)--;
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* The next non-empty element of a comma-separated field value (RFC 9110 5.6.1), trimmed. */
static bool next_element(const char **p, const char *end, const char **el, size_t *el_n)
{
	while (*p < end) {
		const char *c = memchr(*p, ',', (size_t)(end - *p));
		const char *e = c ? c : end;
		*el = *p;
		*el_n = (size_t)(e - *p);
		*p = c ? c + 1 : end;
		trim_ows(el, el_n);
		if (*el_n)
			return true;
	}
	return false;
}

static int head_check(const char *head, size_t n, struct hframe_head *h, struct strbuf *out, char *msg,
		      size_t msg_size)
{
	snprintf(h->method, sizeof h->method, "-");
	snprintf(h->target, sizeof h->target, "-");
	const char *p = head, *end = head + n, *next;
	char ex[64];
	/* the request line: method SP request-target SP HTTP-version */
	long len = next_line(p, end, &next);
	if (len < 0)
		return fail(msg, msg_size, 400, "malformed request line: a bare CR");
	const char *line = p, *le = p + len;
	const char *sp1 = memchr(line, ' ', (size_t)len);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
	excerpt(ex, sizeof ex, line, (size_t)len);
	if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1 || sp1 - line >= (long)sizeof h->method)
		return fail(msg, msg_size, 400, "malformed request line '%s'", ex);
	for (const char *c = line; c < sp1; c++)
		if (!is_tchar((unsigned char)*c))
			return fail(msg, msg_size, 400, "malformed request line '%s': bad method", ex);
	snprintf(h->method, sizeof h->method, "%.*s", (int)(sp1 - line), line);
	for (const char *c = sp1 + 1; c < sp2; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return fail(msg, msg_size, 400, "malformed request line '%s': bad request target", ex);
	int tn = (int)(sp2 - sp1 - 1);
	snprintf(h->target, sizeof h->target, "%.*s", tn < (int)sizeof h->target ? tn : (int)sizeof h->target - 1,
		 sp1 + 1);
	const char *ver = sp2 + 1;
	size_t vn = (size_t)(le - ver);
	if (vn != 8 || memcmp(ver, "HTTP/", 5) || !isdigit((unsigned char)ver[5]) || ver[6] != '.' ||
	    !isdigit((unsigned char)ver[7]))
		return fail(msg, msg_size, 400, "malformed request line '%s': bad HTTP version", ex);
	if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1'))
		return fail(msg, msg_size, 505, "HTTP version %.8s is not supported (HTTP/1.0 and HTTP/1.1 are)", ver);
	h->http10 = ver[7] == '0';
	if (strbuf_put(out, line, (size_t)len) < 0 || strbuf_put(out, "\r\n", 2) < 0)
		return fail(msg, msg_size, 500, "out of memory");
	p = next;

	/* the fields */
	int n_fields = 0, n_cl = 0, n_te = 0, n_host = 0, n_chunked = 0;
	uint64_t cl = 0;
	for (;;) {
		if (p >= end)
			return fail(msg, msg_size, 400, "the request head does not end with an empty line");
		len = next_line(p, end, &next);
		if (len < 0)
			return fail(msg, msg_size, 400, "malformed header line: a bare CR");
		line = p;
		p = next;
		if (len == 0)
			break;
		excerpt(ex, sizeof ex, line, (size_t)len);
		if (++n_fields > HFRAME_FIELDS_MAX)
			return fail(msg, msg_size, 431, "more than %d header fields", HFRAME_FIELDS_MAX);
		if (line[0] == ' ' || line[0] == '\t')
			return fail(msg, msg_size, 400, "obsolete line folding in the header line '%s'", ex);
		const char *colon = memchr(line, ':', (size_t)len);
		if (!colon)
			return fail(msg, msg_size, 400, "header line without a colon: '%s'", ex);
		if (colon == line)
			return fail(msg, msg_size, 400, "header line with an empty name: '%s'", ex);
		for (const char *c = line; c < colon; c++)
			if (!is_tchar((unsigned char)*c))
				return fail(msg, msg_size, 400, "malformed header name in '%s'", ex);
		const char *val = colon + 1;
		size_t val_n = (size_t)(line + len - val);
		for (size_t i = 0; i < val_n; i++)
			if (!is_value_char((unsigned char)val[i]))
				return fail(msg, msg_size, 400, "control character in the header line '%s'", ex);
		trim_ows(&val, &val_n);
		size_t name_n = (size_t)(colon - line);
#define NAME_IS(s) (name_n == sizeof(s) - 1 && !strncasecmp(line, s, name_n))
		if (NAME_IS(HFRAME_MARK))
			continue; /* ours alone */
		if (NAME_IS("Content-Length")) {
			n_cl++;
			bool any = false;
			const char *q = val, *el;
			size_t el_n;
			char vx[64];
			excerpt(vx, sizeof vx, val, val_n);
			while (next_element(&q, val + val_n, &el, &el_n)) {
				uint64_t v = 0;
				for (size_t i = 0; i < el_n; i++) {
					if (!isdigit((unsigned char)el[i]))
						return fail(msg, msg_size, 400, "invalid Content-Length '%s'", vx);
					if (v > (UINT64_MAX >> 2) / 10)
						return fail(msg, msg_size, 413, "Content-Length %.*s is too large",
							    (int)(el_n < 30 ? el_n : 30), el);
					v = v * 10 + (uint64_t)(el[i] - '0');
				}
				if ((any || n_cl > 1) && v != cl)
					return fail(msg, msg_size, 400,
						    "conflicting Content-Length values (%llu and %llu)",
						    (unsigned long long)cl, (unsigned long long)v);
				cl = v;
				any = true;
			}
			if (!any)
				return fail(msg, msg_size, 400, "invalid Content-Length '%s'", vx);
			continue;
		}
		if (NAME_IS("Transfer-Encoding")) {
			n_te++;
			const char *q = val, *el;
			size_t el_n;
			while (next_element(&q, val + val_n, &el, &el_n)) {
				const char *semi = memchr(el, ';', el_n);
				size_t cn = semi ? (size_t)(semi - el) : el_n;
				trim_ows(&el, &cn);
				if (cn != 7 || strncasecmp(el, "chunked", 7))
					return fail(msg, msg_size, 501,
						    "Transfer-Encoding '%.*s' is not supported (only chunked is)",
						    (int)(cn < 40 ? cn : 40), el);
				if (semi)
					return fail(msg, msg_size, 400,
						    "the chunked transfer coding takes no parameters");
				n_chunked++;
			}
			continue;
		}
		if (NAME_IS("Host"))
			n_host++;
#undef NAME_IS
		if (strbuf_put(out, line, name_n) < 0 || strbuf_put(out, ": ", 2) < 0 ||
		    strbuf_put(out, val, val_n) < 0 || strbuf_put(out, "\r\n", 2) < 0)
			return fail(msg, msg_size, 500, "out of memory");
	}
	if (p != end)
		return fail(msg, msg_size, 400, "bytes after the end of the request head");
	if (n_host > 1)
		return fail(msg, msg_size, 400, "more than one Host header");
	if (!n_host && !h->http10) /* RFC 9112 3.2: a MUST, as h11 (vLLM's uvicorn) has it */
		return fail(msg, msg_size, 400, "an HTTP/1.1 request without a Host header");
	if (n_te) {
		if (h->http10)
			return fail(msg, msg_size, 400, "Transfer-Encoding in an HTTP/1.0 request");
		if (n_chunked != 1)
			return fail(msg, msg_size, 400,
				    n_chunked ? "the chunked transfer coding is applied more than once"
					      : "an empty Transfer-Encoding");
		if (n_cl)
			return fail(msg, msg_size, 400, "both Transfer-Encoding and Content-Length");
		h->body = HFRAME_BODY_CHUNKED;
		if (strbuf_printf(out, "Transfer-Encoding: chunked\r\n") < 0)
			return fail(msg, msg_size, 500, "out of memory");
	} else if (n_cl) {
		h->body = cl ? HFRAME_BODY_LENGTH : HFRAME_BODY_NONE;
		h->length = cl;
		if (strbuf_printf(out, "Content-Length: %llu\r\n", (unsigned long long)cl) < 0)
			return fail(msg, msg_size, 500, "out of memory");
	}
	if (strbuf_put(out, "\r\n", 2) < 0)
		return fail(msg, msg_size, 500, "out of memory");
	return 0;
}

int hframe_head_check(const char *head, size_t n, struct hframe_head *h, struct strbuf *out, char *msg,
		      size_t msg_size)
{
	memset(h, 0, sizeof *h);
	size_t was = out->n;
	int st = head_check(head, n, h, out, msg, msg_size);
	if (st)
		out->n = was; /* nothing of a refused head goes out */
	return st;
}

void hframe_init(struct hframe *f, const char *secret)
{
	memset(f, 0, sizeof *f);
	snprintf(f->secret, sizeof f->secret, "%s", secret);
}

void hframe_fini(struct hframe *f)
{
	free(f->buf);
	f->buf = NULL;
	f->len = f->cap = 0;
}

bool hframe_idle(const struct hframe *f) { return f->st == HF_HEAD && f->len == 0; }

/* The marker's value, sanitized: it goes in a header line. */
static int put_mark(struct hframe *f, struct strbuf *out)
{
	char m[sizeof f->msg];
	size_t k = 0;
	for (const char *c = f->msg; *c && k + 1 < sizeof m; c++)
		m[k++] = (*c >= 0x20 && *c < 0x7f) ? *c : '?';
	m[k] = 0;
	return strbuf_printf(out, "%s: %s %d %s\r\n", HFRAME_MARK, f->secret, f->status, m);
}

/* Stops at an error: the marker goes out in the place where the server can read it. */
static int set_failed(struct hframe *f, struct strbuf *out, int status)
{
	enum hframe_state was = f->st;
	f->st = HF_FAILED;
	f->status = status;
	int rc = 0;
	switch (was) {
	case HF_HEAD:
		/* a request of our own, named as the client's where its request line was read */
		rc = strbuf_printf(out, "%s %s HTTP/1.1\r\nHost: mlaserve\r\n",
				   f->head.method[0] ? f->head.method : "-", f->head.target[0] ? f->head.target : "-");
		if (!rc)
			rc = put_mark(f, out);
		if (!rc)
			rc = strbuf_put(out, "\r\n", 2);
		break;
	case HF_CHUNK_CRLF:
		rc = strbuf_put(out, "\r\n", 2);
		/* fall through */
	case HF_CHUNK_SIZE:
		if (!rc)
			rc = strbuf_put(out, "0\r\n", 3);
		/* fall through */
	case HF_TRAILER:
		if (!rc)
			rc = put_mark(f, out);
		if (!rc)
			rc = strbuf_put(out, "\r\n", 2);
		break;
	default: break; /* no error is possible inside a body's bytes */
	}
	hframe_fini(f);
	return rc;
}

static int grow(struct hframe *f, size_t need)
{
	if (need <= f->cap)
		return 0;
	size_t cap = f->cap ? f->cap * 2 : 1024;
	while (cap < need)
		cap *= 2;
	char *b = realloc(f->buf, cap);
	if (!b)
		return -1;
	f->buf = b;
	f->cap = cap;
	return 0;
}

/* One byte of a head; 1 when the head is complete. */
static int head_byte(struct hframe *f, char c, struct strbuf *out)
{
	if (f->len >= HFRAME_HEAD_MAX) {
		snprintf(f->msg, sizeof f->msg, "the request head is larger than %d bytes", HFRAME_HEAD_MAX);
		return set_failed(f, out, 431) < 0 ? -1 : 2;
	}
	if (f->len == 0)
		memset(&f->head, 0, sizeof f->head);
	if (grow(f, f->len + 1) < 0)
		return -1;
	f->buf[f->len++] = c;
	if (f->line_start == 0 && f->len > HFRAME_LINE_MAX) {
		/* the request line is still being read */
		const char *sp = memchr(f->buf, ' ', f->len);
		if (sp && (size_t)(sp - f->buf) < sizeof f->head.method)
			snprintf(f->head.method, sizeof f->head.method, "%.*s", (int)(sp - f->buf), f->buf);
		snprintf(f->msg, sizeof f->msg, "the request line is longer than %d bytes", HFRAME_LINE_MAX);
		return set_failed(f, out, 414) < 0 ? -1 : 2;
	}
	if (c != '\n')
		return 0;
	size_t ll = f->len - 1 - f->line_start;
	if (ll && f->buf[f->len - 2] == '\r')
		ll--;
	if (ll == 0) {
		if (f->line_start == 0) { /* blank lines before a request line are ignored */
			f->len = 0;
			if (++f->n_blank > 8) {
				snprintf(f->msg, sizeof f->msg, "blank lines instead of a request");
				return set_failed(f, out, 400) < 0 ? -1 : 2;
			}
			return 0;
		}
		return 1;
	}
	f->line_start = f->len;
	return 0;
}

static int trailer_done(struct hframe *f, struct strbuf *out)
{
	/* the trailer section: fields as in a head, forwarded but for framing ones */
	const char *p = f->buf, *end = f->buf + f->len, *next;
	for (;;) {
		long len = next_line(p, end, &next);
		if (len < 0) {
			snprintf(f->msg, sizeof f->msg, "malformed trailer line: a bare CR");
			return 400;
		}
		if (len == 0)
			break;
		const char *colon = memchr(p, ':', (size_t)len);
		char ex[64];
		excerpt(ex, sizeof ex, p, (size_t)len);
		bool ok = colon && colon > p;
		for (const char *c = p; ok && c < colon; c++)
			ok = is_tchar((unsigned char)*c);
		for (const char *c = colon ? colon + 1 : p; ok && c < p + len; c++)
			ok = is_value_char((unsigned char)*c);
		if (!ok) {
			snprintf(f->msg, sizeof f->msg, "malformed trailer line '%s'", ex);
			return 400;
		}
		size_t nn = (size_t)(colon - p);
		bool skip = (nn == sizeof HFRAME_MARK - 1 && !strncasecmp(p, HFRAME_MARK, nn)) ||
			    (nn == 14 && !strncasecmp(p, "Content-Length", nn)) ||
			    (nn == 17 && !strncasecmp(p, "Transfer-Encoding", nn));
		if (!skip && (strbuf_put(out, p, (size_t)len) < 0 || strbuf_put(out, "\r\n", 2) < 0))
			return -1;
		p = next;
	}
	return strbuf_put(out, "\r\n", 2) < 0 ? -1 : 0;
}

int hframe_feed(struct hframe *f, const char *in, size_t n, struct strbuf *out)
{
	size_t i = 0;
	while (i < n) {
		switch (f->st) {
		case HF_FAILED: return 0;
		case HF_HEAD: {
			int rc = head_byte(f, in[i++], out);
			if (rc < 0)
				return -1;
			if (rc != 1)
				break;
			int st = hframe_head_check(f->buf, f->len, &f->head, out, f->msg, sizeof f->msg);
			f->len = f->line_start = 0;
			f->n_blank = 0;
			if (st) {
				if (set_failed(f, out, st) < 0)
					return -1;
				break;
			}
			f->n_requests++;
			f->st = f->head.body == HFRAME_BODY_LENGTH    ? HF_BODY
				: f->head.body == HFRAME_BODY_CHUNKED ? HF_CHUNK_SIZE
								      : HF_HEAD;
			f->left = f->head.length;
			break;
		}
		case HF_BODY:
		case HF_CHUNK_DATA: {
			size_t k = n - i < f->left ? n - i : (size_t)f->left;
			if (strbuf_put(out, in + i, k) < 0)
				return -1;
			i += k;
			f->left -= k;
			if (!f->left) {
				f->st = f->st == HF_BODY ? HF_HEAD : HF_CHUNK_CRLF;
				f->cr = false;
			}
			break;
		}
		case HF_CHUNK_CRLF: {
			char c = in[i++];
			if (c == '\r' && !f->cr) {
				f->cr = true;
			} else if (c == '\n') {
				if (strbuf_put(out, "\r\n", 2) < 0)
					return -1;
				f->st = HF_CHUNK_SIZE;
			} else {
				snprintf(f->msg, sizeof f->msg, "a chunk's data is longer than its size");
				if (set_failed(f, out, 400) < 0)
					return -1;
			}
			break;
		}
		case HF_CHUNK_SIZE: {
			char c = in[i++];
			if (f->len >= 4096) {
				snprintf(f->msg, sizeof f->msg, "a chunk-size line is longer than 4096 bytes");
				if (set_failed(f, out, 400) < 0)
					return -1;
				break;
			}
			if (grow(f, f->len + 1) < 0)
				return -1;
			f->buf[f->len++] = c;
			if (c != '\n')
				break;
			size_t ll = f->len - 1;
			if (ll && f->buf[ll - 1] == '\r')
				ll--;
			char ex[64];
			excerpt(ex, sizeof ex, f->buf, ll);
			uint64_t v = 0;
			size_t k = 0;
			while (k < ll && isxdigit((unsigned char)f->buf[k]) && k < 16) {
				char d = f->buf[k++];
				v = v * 16 + (uint64_t)(isdigit((unsigned char)d) ? d - '0' : (tolower(d) - 'a' + 10));
			}
			size_t j = k;
			while (j < ll && (f->buf[j] == ' ' || f->buf[j] == '\t'))
				j++;
			bool ok = k > 0 && k < 16 && (j == ll || f->buf[j] == ';');
			for (size_t t = j; ok && t < ll; t++)
				ok = is_value_char((unsigned char)f->buf[t]);
			f->len = 0;
			if (!ok) {
				snprintf(f->msg, sizeof f->msg, "invalid chunk size '%s'", ex);
				if (set_failed(f, out, 400) < 0)
					return -1;
				break;
			}
			if (strbuf_printf(out, "%llx\r\n", (unsigned long long)v) < 0)
				return -1;
			f->left = v;
			f->st = v ? HF_CHUNK_DATA : HF_TRAILER;
			f->line_start = 0;
			break;
		}
		case HF_TRAILER: {
			char c = in[i++];
			if (f->len >= HFRAME_HEAD_MAX) {
				snprintf(f->msg, sizeof f->msg, "the trailer section is larger than %d bytes",
					 HFRAME_HEAD_MAX);
				if (set_failed(f, out, 431) < 0)
					return -1;
				break;
			}
			if (grow(f, f->len + 1) < 0)
				return -1;
			f->buf[f->len++] = c;
			if (c != '\n')
				break;
			size_t ll = f->len - 1 - f->line_start;
			if (ll && f->buf[f->len - 2] == '\r')
				ll--;
			if (ll) {
				f->line_start = f->len;
				break;
			}
			int rc = trailer_done(f, out);
			f->len = f->line_start = 0;
			if (rc < 0)
				return -1;
			if (rc) {
				if (set_failed(f, out, rc) < 0)
					return -1;
				break;
			}
			f->st = HF_HEAD;
			break;
		}
		}
	}
	return 0;
}

bool hframe_mark_parse(const char *value, const char *secret, int *status, const char **msg)
{
	if (!value || strlen(secret) != HFRAME_SECRET_LEN)
		return false;
	unsigned char diff = 0;
	for (size_t i = 0; i < HFRAME_SECRET_LEN; i++) {
		if (!value[i])
			return false;
		diff |= (unsigned char)value[i] ^ (unsigned char)secret[i];
	}
	if (diff || value[HFRAME_SECRET_LEN] != ' ')
		return false;
	char *end;
	long st = strtol(value + HFRAME_SECRET_LEN + 1, &end, 10);
	if (st < 400 || st > 599 || *end != ' ')
		return false;
	*status = (int)st;
	*msg = end + 1;
	return true;
}
