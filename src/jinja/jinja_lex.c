/* Jinja lexer with Hugging Face's environment settings (trim_blocks, lstrip_blocks), plus the
 * chunked pool and the growable buffer the interpreter uses. Mirrors jinja2/lexer.py: source
 * newlines normalised to "\n", one trailing newline dropped, "{%-"/"-%}" strip whitespace,
 * a block/comment tag alone on its line loses its indentation (lstrip_blocks) and the first
 * newline after it (trim_blocks). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

struct jpool_chunk {
	struct jpool_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

void jpool_init(struct jpool *p, size_t limit)
{
	memset(p, 0, sizeof *p);
	p->limit = limit;
}

void jpool_fini(struct jpool *p)
{
	struct jpool_chunk *c = p->head;
	while (c) {
		struct jpool_chunk *n = c->next;
		free(c);
		c = n;
	}
	p->head = NULL;
}

void *jpool_alloc(struct jpool *p, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	struct jpool_chunk *c = p->head;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > (64u << 10) ? n : (64u << 10);
		if (p->limit && p->total + cap > p->limit) {
			p->over = true;
			return NULL;
		}
		c = malloc(sizeof *c + cap);
		if (!c) {
			p->over = true;
			return NULL;
		}
		c->used = 0;
		c->cap = cap;
		c->next = p->head;
		p->head = c;
		p->total += cap;
	}
	void *r = (char *)c->data + c->used;
	c->used += n;
	memset(r, 0, n);
	return r;
}

char *jpool_strdup(struct jpool *p, const char *s, size_t n)
{
	char *r = jpool_alloc(p, n + 1);
	if (!r)
		return NULL;
	if (n)
		memcpy(r, s, n);
	r[n] = 0;
	return r;
}

/* ---- lexer ---- */

struct lexer {
	const char *s; /* normalised source */
	size_t n, pos;
	int line;
	struct jpool *pool;
	struct jtoken *toks;
	size_t ntok, cap;
	struct err *e;
};

static int count_nl(const char *s, size_t a, size_t b)
{
	int k = 0;
	for (size_t i = a; i < b; i++)
		k += s[i] == '\n';
	return k;
}

static struct jtoken *emit(struct lexer *L, enum jtok t, int line)
{
	if (L->ntok == L->cap) {
		size_t cap = L->cap ? L->cap * 2 : 256;
		struct jtoken *nt = realloc(L->toks, cap * sizeof *nt);
		if (!nt)
			return NULL;
		L->toks = nt;
		L->cap = cap;
	}
	struct jtoken *k = &L->toks[L->ntok++];
	memset(k, 0, sizeof *k);
	k->t = t;
	k->line = line;
	return k;
}

/* Python's \s / str.isspace for one character at s[i]; returns its byte length or 0. */
size_t jinja_space_len(const char *s, size_t n, size_t i)
{
	unsigned char c = (unsigned char)s[i];
	if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f))
		return 1;
	if (c == 0xc2 && i + 1 < n && ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xa0))
		return 2;
	if (c == 0xe1 && i + 2 < n && (unsigned char)s[i + 1] == 0x9a && (unsigned char)s[i + 2] == 0x80)
		return 3;
	if (c == 0xe2 && i + 2 < n) {
		unsigned char c1 = (unsigned char)s[i + 1], c2 = (unsigned char)s[i + 2];
		if (c1 == 0x80 && ((c2 >= 0x80 && c2 <= 0x8a) || c2 == 0xa8 || c2 == 0xa9 || c2 == 0xaf))
			return 3;
		if (c1 == 0x81 && c2 == 0x9f)
			return 3;
	}
	if (c == 0xe3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x80)
		return 3;
	return 0;
}

/* Length of the whitespace suffix of s[a..b) (whole characters). */
static size_t rspace(const char *s, size_t a, size_t b)
{
	size_t end = b;
	while (end > a) {
		size_t st = end - 1;
		while (st > a && ((unsigned char)s[st] & 0xc0) == 0x80 && end - st < 3)
			st--;
		size_t k = jinja_space_len(s, end, st);
		if (k == 0 || st + k != end)
			break;
		end = st;
	}
	return b - end;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
	size_t k;
	while (i < n && (k = jinja_space_len(s, n, i)))
		i += k;
	return i;
}

static int emit_data(struct lexer *L, size_t a, size_t b, int line)
{
	if (b <= a)
		return 0;
	struct jtoken *k = emit(L, TK_DATA, line);
	if (!k || !(k->s = jpool_strdup(L->pool, L->s + a, b - a)))
		return err_set(L->e, "chat template: out of memory");
	k->n = b - a;
	return 0;
}

/* Decode a string literal body (Python unicode-escape on the raw text). */
static int lex_string(struct lexer *L, size_t *pos, int line)
{
	const char *s = L->s;
	char q = s[*pos];
	size_t i = *pos + 1;
	struct strbuf b = {0};
	for (;;) {
		if (i >= L->n) {
			free(b.p);
			return err_set(L->e, "chat template line %d: unterminated string literal", line);
		}
		char c = s[i];
		if (c == q)
			break;
		if (c != '\\' || i + 1 >= L->n) {
			strbuf_putc(&b, c);
			i++;
			continue;
		}
		char x = s[i + 1];
		i += 2;
		unsigned long cp = 0;
		int nhex = 0;
		switch (x) {
		case 'n': strbuf_putc(&b, '\n'); break;
		case 't': strbuf_putc(&b, '\t'); break;
		case 'r': strbuf_putc(&b, '\r'); break;
		case 'a': strbuf_putc(&b, '\a'); break;
		case 'b': strbuf_putc(&b, '\b'); break;
		case 'f': strbuf_putc(&b, '\f'); break;
		case 'v': strbuf_putc(&b, '\v'); break;
		case '\\': strbuf_putc(&b, '\\'); break;
		case '\'': strbuf_putc(&b, '\''); break;
		case '"': strbuf_putc(&b, '"'); break;
		case '\n': break; /* line continuation */
		case 'x': nhex = 2; break;
		case 'u': nhex = 4; break;
		case 'U': nhex = 8; break;
		default:
			if (x >= '0' && x <= '7') {
				cp = (unsigned long)(x - '0');
				for (int k = 0; k < 2 && i < L->n && s[i] >= '0' && s[i] <= '7'; k++)
					cp = cp * 8 + (unsigned long)(s[i++] - '0');
				nhex = -1;
			} else {
				strbuf_putc(&b, '\\'); /* unknown escapes stay as written */
				strbuf_putc(&b, x);
			}
		}
		if (nhex > 0) {
			for (int k = 0; k < nhex; k++, i++) {
				char h = i < L->n ? s[i] : 0;
				int d = h >= '0' && h <= '9'   ? h - '0'
					: h >= 'a' && h <= 'f' ? h - 'a' + 10
					: h >= 'A' && h <= 'F' ? h - 'A' + 10
							       : -1;
				if (d < 0) {
					free(b.p);
					return err_set(L->e,
						       "chat template line %d: bad \\%c escape in string literal",
						       line, x);
				}
				cp = cp * 16 + (unsigned long)d;
			}
		}
		if (nhex != 0) {
			if (cp > 0x10ffff) {
				free(b.p);
				return err_set(L->e, "chat template line %d: bad escape in string literal", line);
			}
			char u[4];
			int m = utf8_encode((uint32_t)cp, u);
			strbuf_put(&b, u, (size_t)m);
		}
	}
	if (b.oom) {
		free(b.p);
		return err_set(L->e, "chat template: out of memory");
	}
	struct jtoken *k = emit(L, TK_STRING, line);
	if (!k || !(k->s = jpool_strdup(L->pool, b.p ? b.p : "", b.n))) {
		free(b.p);
		return err_set(L->e, "chat template: out of memory");
	}
	k->n = b.n;
	free(b.p);
	*pos = i + 1;
	return 0;
}

static const struct {
	const char *s;
	int op;
} ops[] = {
	{"//", OP_FLOORDIV}, {"**", OP_POW},   {"==", OP_EQ},      {"!=", OP_NE},      {"<=", OP_LE},
	{">=", OP_GE},       {"+", OP_ADD},    {"-", OP_SUB},      {"/", OP_DIV},      {"*", OP_MUL},
	{"%", OP_MOD},       {"~", OP_TILDE},  {"[", OP_LBRACKET}, {"]", OP_RBRACKET}, {"(", OP_LPAREN},
	{")", OP_RPAREN},    {"{", OP_LBRACE}, {"}", OP_RBRACE},   {"=", OP_ASSIGN},   {".", OP_DOT},
	{":", OP_COLON},     {"|", OP_PIPE},   {",", OP_COMMA},    {";", OP_SEMI},     {"<", OP_LT},
	{">", OP_GT},
};

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/* Digits with optional single underscores between them ("1_000"). */
static size_t digits(const char *s, size_t n, size_t i)
{
	while (i < n &&
	       (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]) && i > 0 && is_digit(s[i - 1]))))
		i++;
	return i;
}

/* Tokens of one {% %} or {{ }} tag, starting after the opening delimiter. On return *pos is
 * after the closing delimiter (and the whitespace it consumes); *nl_end tells whether that
 * consumed text ended with a newline. */
static int lex_tag(struct lexer *L, size_t *pos, bool block, int open_line, bool *nl_end)
{
	const char *s = L->s;
	size_t n = L->n, i = *pos;
	int depth = 0;   /* bracket balance: end delimiters inside brackets are operators */
	char stack[256]; /* expected closers */
	char close = block ? '%' : '}';
	for (;;) {
		int line = L->line + count_nl(s, *pos, i);
		if (i >= n && depth > 0)
			return err_set(L->e, "chat template line %d: unbalanced brackets in \"%s\" tag", open_line,
				       block ? "{%" : "{{");
		if (i >= n)
			return err_set(L->e, "chat template line %d: unclosed \"%s\" tag", open_line,
				       block ? "{%" : "{{");
		if (depth == 0) {
			if (s[i] == '-' && i + 2 < n && s[i + 1] == close && s[i + 2] == '}') {
				if (!emit(L, block ? TK_BLOCK_END : TK_VAR_END, line))
					return err_set(L->e, "chat template: out of memory");
				size_t j = skip_ws(s, n, i + 3);
				*nl_end = j > i + 3 && s[j - 1] == '\n';
				L->line += count_nl(s, *pos, j);
				*pos = j;
				return 0;
			}
			if (block && s[i] == '+' && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
				if (!emit(L, TK_BLOCK_END, line))
					return err_set(L->e, "chat template: out of memory");
				*nl_end = false;
				L->line += count_nl(s, *pos, i + 3);
				*pos = i + 3;
				return 0;
			}
			if (s[i] == close && i + 1 < n && s[i + 1] == '}') {
				if (!emit(L, block ? TK_BLOCK_END : TK_VAR_END, line))
					return err_set(L->e, "chat template: out of memory");
				size_t j = i + 2;
				if (block && j < n && s[j] == '\n') /* trim_blocks */
					j++;
				*nl_end = s[j - 1] == '\n';
				L->line += count_nl(s, *pos, j);
				*pos = j;
				return 0;
			}
		}
		size_t k = jinja_space_len(s, n, i);
		if (k) {
			i += k;
			continue;
		}
		char c = s[i];
		if (c == '\'' || c == '"') {
			size_t j = i;
			if (lex_string(L, &j, line) < 0)
				return -1;
			i = j;
			continue;
		}
		if (is_digit(c)) {
			size_t j = digits(s, n, i);
			bool flt = false;
			if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
				j = digits(s, n, j + 1);
				flt = true;
			}
			if (j < n && (s[j] == 'e' || s[j] == 'E')) {
				size_t q = j + 1;
				if (q < n && (s[q] == '+' || s[q] == '-'))
					q++;
				if (q < n && is_digit(s[q])) {
					j = digits(s, n, q);
					flt = true;
				}
			}
			char tmp[128];
			size_t m = 0;
			for (size_t q = i; q < j && m < sizeof tmp - 1; q++)
				if (s[q] != '_')
					tmp[m++] = s[q];
			tmp[m] = 0;
			struct jtoken *t = emit(L, flt ? TK_FLOAT : TK_INT, line);
			if (!t)
				return err_set(L->e, "chat template: out of memory");
			if (flt) {
				t->f = strtod(tmp, NULL);
			} else {
				char *end;
				unsigned long long v = strtoull(tmp, &end, 10);
				if (m > 18 || v > INT64_MAX)
					return err_set(L->e, "chat template line %d: integer literal too large", line);
				t->i = (long long)v;
			}
			i = j;
			continue;
		}
		if (is_name0(c)) {
			size_t j = i;
			while (j < n && (is_name0(s[j]) || is_digit(s[j])))
				j++;
			struct jtoken *t = emit(L, TK_NAME, line);
			if (!t || !(t->s = jpool_strdup(L->pool, s + i, j - i)))
				return err_set(L->e, "chat template: out of memory");
			t->n = j - i;
			i = j;
			continue;
		}
		int op = 0;
		size_t olen = 0;
		for (size_t q = 0; q < sizeof ops / sizeof ops[0]; q++) {
			size_t m = strlen(ops[q].s);
			if (i + m <= n && !memcmp(s + i, ops[q].s, m)) {
				op = ops[q].op;
				olen = m;
				break;
			}
		}
		if (!op) {
			if ((unsigned char)c < 0x80)
				return err_set(L->e, "chat template line %d: unexpected character '%c'", line, c);
			return err_set(L->e, "chat template line %d: unexpected byte 0x%02x", line, (unsigned char)c);
		}
		if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE) {
			if (depth == (int)sizeof stack)
				return err_set(L->e, "chat template line %d: brackets nested too deeply", line);
			stack[depth++] = op == OP_LPAREN ? ')' : op == OP_LBRACKET ? ']' : '}';
		} else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
			if (depth == 0)
				return err_set(L->e, "chat template line %d: unexpected '%c'", line, c);
			if (stack[depth - 1] != c)
				return err_set(L->e, "chat template line %d: unexpected '%c', expected '%c'", line, c,
					       stack[depth - 1]);
			depth--;
		}
		struct jtoken *t = emit(L, TK_OP, line);
		if (!t)
			return err_set(L->e, "chat template: out of memory");
		t->op = op;
		i += olen;
	}
}

/* Does a "{% raw %}" / "{% endraw %}" tag start at i? Returns the index after "raw"/"endraw"
 * word and the closing "%}" handling is done by the caller. */
static bool word_tag(const char *s, size_t n, size_t i, const char *word, size_t *after)
{
	if (i + 2 > n || s[i] != '{' || s[i + 1] != '%')
		return false;
	size_t j = i + 2;
	if (j < n && (s[j] == '-' || s[j] == '+'))
		j++;
	j = skip_ws(s, n, j);
	size_t m = strlen(word);
	if (j + m > n || memcmp(s + j, word, m) || (j + m < n && (is_name0(s[j + m]) || is_digit(s[j + m]))))
		return false;
	j = skip_ws(s, n, j + m);
	if (j + 2 <= n && s[j] == '%' && s[j + 1] == '}') {
		*after = j;
		return true;
	}
	if (j + 3 <= n && (s[j] == '-' || s[j] == '+') && s[j + 1] == '%' && s[j + 2] == '}') {
		*after = j;
		return true;
	}
	return false;
}

/* After a tag's inner text at j (pointing at "%}", "-%}" or "+%}"): consume it. */
static size_t close_tag(const char *s, size_t n, size_t j, bool *nl_end)
{
	if (s[j] == '-') {
		size_t k = skip_ws(s, n, j + 3);
		*nl_end = k > j + 3 && s[k - 1] == '\n';
		return k;
	}
	if (s[j] == '+') {
		*nl_end = false;
		return j + 3;
	}
	j += 2;
	if (j < n && s[j] == '\n')
		j++;
	*nl_end = s[j - 1] == '\n';
	return j;
}

int jinja_lex(const char *src, struct jpool *pool, struct jtoken **out, size_t *n_out, struct err *e)
{
	struct lexer L = {.pool = pool, .e = e, .line = 1};
	size_t sn = strlen(src);
	char *s = jpool_alloc(pool, sn + 1);
	if (!s)
		return err_set(e, "chat template: out of memory");
	size_t n = 0;
	for (size_t i = 0; i < sn; i++) { /* \r\n and \r -> \n */
		if (src[i] == '\r') {
			s[n++] = '\n';
			if (i + 1 < sn && src[i + 1] == '\n')
				i++;
		} else {
			s[n++] = src[i];
		}
	}
	if (n && s[n - 1] == '\n') /* keep_trailing_newline=False */
		n--;
	s[n] = 0;
	L.s = s;
	L.n = n;
	size_t pos = 0;
	bool line_starting = true;
	while (pos < n) {
		/* next tag start */
		size_t t = pos;
		while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')))
			t++;
		if (t + 1 >= n) {
			if (emit_data(&L, pos, n, L.line) < 0)
				goto fail;
			break;
		}
		char kind = s[t + 1];
		char sign = t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
		size_t dend = t;
		if (sign == '-') {
			dend = t - rspace(s, pos, t);
		} else if (sign != '+' && kind != '{') { /* lstrip_blocks */
			size_t l = t;
			while (l > pos && s[l - 1] != '\n')
				l--;
			/* only whitespace between the line start and the tag: drop it */
			if ((l > pos || line_starting) && t > l && rspace(s, l, t) == t - l)
				dend = l;
		}
		if (emit_data(&L, pos, dend, L.line) < 0)
			goto fail;
		L.line += count_nl(s, pos, t);
		int tag_line = L.line;
		size_t after;
		bool nl_end = false;
		if (kind == '#') {
			size_t j = t + 2;
			while (j + 1 < n && !(s[j] == '#' && s[j + 1] == '}'))
				j++;
			if (j + 1 >= n) {
				err_set(e, "chat template line %d: unclosed comment", tag_line);
				goto fail;
			}
			size_t k;
			if (j > t + 2 && s[j - 1] == '-') {
				k = skip_ws(s, n, j + 2);
				nl_end = k > j + 2 && s[k - 1] == '\n';
			} else if (j > t + 2 && s[j - 1] == '+') {
				k = j + 2;
			} else {
				k = j + 2;
				if (k < n && s[k] == '\n')
					k++;
				nl_end = s[k - 1] == '\n';
			}
			L.line += count_nl(s, t, k);
			pos = k;
		} else if (kind == '%' && word_tag(s, n, t, "raw", &after)) {
			size_t body = close_tag(s, n, after, &nl_end);
			size_t j = body, end_after = 0;
			while (j < n && !word_tag(s, n, j, "endraw", &end_after))
				j++;
			if (j >= n) {
				err_set(e, "chat template line %d: unclosed \"raw\" block", tag_line);
				goto fail;
			}
			size_t rend = j;
			if (j + 2 < n && s[j + 2] == '-')
				rend = j - rspace(s, body, j);
			if (emit_data(&L, body, rend, tag_line) < 0)
				goto fail;
			pos = close_tag(s, n, end_after, &nl_end);
			L.line += count_nl(s, t, pos);
		} else {
			if (!emit(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, tag_line)) {
				err_set(e, "chat template: out of memory");
				goto fail;
			}
			pos = t + 2 + (sign != 0);
			if (lex_tag(&L, &pos, kind == '%', tag_line, &nl_end) < 0)
				goto fail;
		}
		line_starting = nl_end;
	}
	if (!emit(&L, TK_EOF, L.line)) {
		err_set(e, "chat template: out of memory");
		goto fail;
	}
	/* move tokens into the pool so the caller frees one thing */
	struct jtoken *pt = jpool_alloc(pool, L.ntok * sizeof *pt);
	if (!pt) {
		err_set(e, "chat template: out of memory");
		goto fail;
	}
	memcpy(pt, L.toks, L.ntok * sizeof *pt);
	*out = pt;
	*n_out = L.ntok;
	free(L.toks);
	return 0;
fail:
	free(L.toks);
	return -1;
}
