/* PCRE2 wrapper for the tokenizer's patterns. */
#include "tok/regex.h"

#include <string.h>

int tok_regex_compile(struct tok_regex *r, const char *pat, size_t len, bool literal, const char *what, struct err *e)
{
	int code;
	PCRE2_SIZE off;
	uint32_t flags = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
	r->code = pcre2_compile((PCRE2_SPTR)pat, len, flags, &code, &off, NULL);
	if (!r->code) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(code, msg, sizeof msg);
		return err_set(e, "%s: bad regex at offset %zu: %s", what, (size_t)off, (char *)msg);
	}
	/* JIT is an optimisation: without it (unsupported CPU, no exec memory) matching still
	 * works through the interpreter */
	r->jit = pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE) == 0;
	/* start-of-match bytes, unless the pattern can match the empty string */
	uint32_t empty = 1, type = 0, unit = 0;
	const uint8_t *bitmap = NULL;
	pcre2_pattern_info(r->code, PCRE2_INFO_MATCHEMPTY, &empty);
	pcre2_pattern_info(r->code, PCRE2_INFO_FIRSTBITMAP, &bitmap);
	pcre2_pattern_info(r->code, PCRE2_INFO_FIRSTCODETYPE, &type);
	pcre2_pattern_info(r->code, PCRE2_INFO_FIRSTCODEUNIT, &unit);
	uint32_t opts = 0;
	pcre2_pattern_info(r->code, PCRE2_INFO_ALLOPTIONS, &opts);
	memset(r->first, 0, sizeof r->first);
	r->has_first = false;
	if (!empty && !(opts & PCRE2_CASELESS)) {
		if (bitmap) {
			memcpy(r->first, bitmap, sizeof r->first);
			r->has_first = true;
		} else if (type == 1 && unit < 256) {
			r->first[unit >> 3] |= (uint8_t)(1u << (unit & 7));
			r->has_first = true;
		}
	}
	return 0;
}

void tok_regex_free(struct tok_regex *r)
{
	pcre2_code_free(r->code);
	r->code = NULL;
}

int tok_regex_ctx_init(struct tok_regex_ctx *c)
{
	c->md = pcre2_match_data_create(1, NULL);
	c->mctx = pcre2_match_context_create(NULL);
	c->jit = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
	if (!c->md || !c->mctx) {
		tok_regex_ctx_fini(c);
		return -1;
	}
	/* without a JIT stack of its own, PCRE2 uses a small default one */
	if (c->jit)
		pcre2_jit_stack_assign(c->mctx, NULL, c->jit);
	return 0;
}

void tok_regex_ctx_fini(struct tok_regex_ctx *c)
{
	pcre2_match_data_free(c->md);
	pcre2_match_context_free(c->mctx);
	pcre2_jit_stack_free(c->jit);
	memset(c, 0, sizeof *c);
}

int tok_regex_find(const struct tok_regex *r, struct tok_regex_ctx *c, const char *s, size_t n, size_t from,
		   size_t *ms, size_t *me, struct err *e)
{
	/* the text was validated as UTF-8 once, up front */
	int rc = r->jit ? pcre2_jit_match(r->code, (PCRE2_SPTR)s, n, from, 0, c->md, c->mctx)
			: pcre2_match(r->code, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, c->md, c->mctx);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(rc, msg, sizeof msg);
		return err_set(e, "pre-tokenizer regex failed on a %zu-byte piece: %s", n, (char *)msg);
	}
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
	*ms = ov[0];
	*me = ov[1];
	return 1;
}
