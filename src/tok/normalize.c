/* Normalizers; Unicode normalization and case mapping through ICU (UTF-16 in between). */
#include "tok/normalize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "base/utf8.h"
#include "io/json_util.h"

int norm_load(struct norm *n, const json_t *j, const char *what, const char *path, struct err *e)
{
	memset(n, 0, sizeof *n);
	n->kind = NM_SEQUENCE;
	if (!j || json_is_null(j))
		return 0;
	const char *type;
	if (!json_is_object(j) || json_util_str(j, what, "type", NULL, &type, e) < 0 || !type)
		return err_set(e, "%s: %s: expected an object with a \"type\"", what, path);
	static const struct {
		const char *name;
		enum norm_kind kind;
	} simple[] = {{"NFC", NM_NFC},
		      {"NFD", NM_NFD},
		      {"NFKC", NM_NFKC},
		      {"NFKD", NM_NFKD},
		      {"Lowercase", NM_LOWERCASE},
		      {"StripAccents", NM_STRIP_ACCENTS}};
	for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
		if (!strcmp(type, simple[i].name)) {
			n->kind = simple[i].kind;
			return 0;
		}
	if (!strcmp(type, "Sequence")) {
		const json_t *arr = json_object_get(j, "normalizers");
		void *sub_v;
		if (tok_seq_alloc(j, "normalizers", what, path, sizeof *n->sub, &sub_v, &n->n_sub, e))
			return -1;
		n->sub = sub_v;
		for (size_t i = 0; i < n->n_sub; i++) {
			char sub[256];
			snprintf(sub, sizeof sub, "%s.normalizers[%zu]", path, i);
			if (norm_load(&n->sub[i], json_array_get(arr, i), what, sub, e)) {
				n->n_sub = i;
				norm_free(n);
				return -1;
			}
		}
		return 0;
	}
	if (!strcmp(type, "Replace")) {
		const json_t *pat = json_object_get(j, "pattern"), *c = json_object_get(j, "content");
		const json_t *rs = json_object_get(pat, "Regex"), *ss = json_object_get(pat, "String");
		if ((!json_is_string(rs) && !json_is_string(ss)) || !json_is_string(c))
			return err_set(e,
				       "%s: %s: Replace needs a pattern {\"String\"|\"Regex\": "
				       "...} and a content string",
				       what, path);
		const json_t *s = rs ? rs : ss;
		char sub[300];
		snprintf(sub, sizeof sub, "%s: %s.pattern", what, path);
		if (tok_regex_compile(&n->re, json_string_value(s), json_string_length(s), !rs, sub, e))
			return -1;
		n->content = tok_strndup(json_string_value(c), json_string_length(c));
		if (!n->content) {
			tok_regex_free(&n->re);
			return tok_oom(e);
		}
		n->kind = NM_REPLACE;
		n->content_len = json_string_length(c);
		return 0;
	}
	if (!strcmp(type, "Prepend")) {
		const json_t *c = json_object_get(j, "prepend");
		if (!json_is_string(c))
			return err_set(e, "%s: %s.prepend: expected a string", what, path);
		n->kind = NM_PREPEND;
		n->content = tok_strndup(json_string_value(c), json_string_length(c));
		if (!n->content)
			return tok_oom(e);
		n->content_len = json_string_length(c);
		return 0;
	}
	if (!strcmp(type, "Strip")) {
		n->kind = NM_STRIP;
		if (json_util_bool(j, what, "strip_left", true, &n->left, e) < 0 ||
		    json_util_bool(j, what, "strip_right", true, &n->right, e) < 0)
			return -1;
		return 0;
	}
	return err_set(e, "%s: %s: unsupported normalizer type '%s'", what, path, type);
}

void norm_free(struct norm *n)
{
	for (size_t i = 0; i < n->n_sub; i++)
		norm_free(&n->sub[i]);
	free(n->sub);
	if (n->kind == NM_REPLACE)
		tok_regex_free(&n->re);
	free(n->content);
	memset(n, 0, sizeof *n);
}

bool norm_is_identity(const struct norm *n)
{
	if (n->kind != NM_SEQUENCE)
		return false;
	for (size_t i = 0; i < n->n_sub; i++)
		if (!norm_is_identity(&n->sub[i]))
			return false;
	return true;
}

/* UTF-8 → UTF-16 → f → UTF-8, through malloc'd UTF-16 buffers. */
static int icu_apply(const struct norm *n, struct strbuf *s, struct strbuf *tmp, struct err *e)
{
	UErrorCode st = U_ZERO_ERROR;
	int32_t n16 = 0;
	if (s->n > INT32_MAX / 4)
		return err_set(e, "normalizer: text too long (%zu bytes)", s->n);
	u_strFromUTF8(NULL, 0, &n16, s->p, (int32_t)s->n, &st);
	if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
		return err_set(e, "normalizer: %s", u_errorName(st));
	UChar *a = malloc(((size_t)n16 + 1) * sizeof(UChar)), *b = NULL;
	if (!a)
		return tok_oom(e);
	st = U_ZERO_ERROR;
	u_strFromUTF8(a, n16 + 1, NULL, s->p, (int32_t)s->n, &st);
	int32_t cap = n16 * 4 + 16, nb = 0; /* NFKD/lowercase can grow; retry on overflow */
	for (int attempt = 0; attempt < 2; attempt++) {
		UChar *nb2 = realloc(b, (size_t)cap * sizeof(UChar));
		if (!nb2) {
			free(a);
			free(b);
			return tok_oom(e);
		}
		b = nb2;
		st = U_ZERO_ERROR;
		if (n->kind == NM_LOWERCASE) {
			nb = u_strToLower(b, cap, a, n16, "", &st);
		} else {
			const UNormalizer2 *nm = n->kind == NM_NFC    ? unorm2_getNFCInstance(&st)
						 : n->kind == NM_NFD  ? unorm2_getNFDInstance(&st)
						 : n->kind == NM_NFKC ? unorm2_getNFKCInstance(&st)
								      : unorm2_getNFKDInstance(&st);
			if (U_SUCCESS(st))
				nb = unorm2_normalize(nm, a, n16, b, cap, &st);
		}
		if (st != U_BUFFER_OVERFLOW_ERROR)
			break;
		cap = nb + 16;
	}
	free(a);
	if (U_FAILURE(st)) {
		free(b);
		return err_set(e, "normalizer: %s", u_errorName(st));
	}
	int32_t n8 = 0;
	st = U_ZERO_ERROR;
	u_strToUTF8(NULL, 0, &n8, b, nb, &st);
	tmp->n = 0;
	if (strbuf_reserve(tmp, (size_t)n8 + 1)) {
		free(b);
		return tok_oom(e);
	}
	st = U_ZERO_ERROR;
	u_strToUTF8(tmp->p, n8 + 1, NULL, b, nb, &st);
	free(b);
	if (U_FAILURE(st))
		return err_set(e, "normalizer: %s", u_errorName(st));
	tmp->n = (size_t)n8;
	struct strbuf t = *s;
	*s = *tmp, *tmp = t;
	return 0;
}

static bool space_at(const char *p, size_t n, size_t *len)
{
	uint32_t cp;
	size_t l = utf8_decode((const unsigned char *)p, n, &cp);
	*len = l;
	return l && (cp < 0x80 ? (cp == ' ' || (cp >= 9 && cp <= 13))
			       : u_hasBinaryProperty((UChar32)cp, UCHAR_WHITE_SPACE));
}

int norm_apply(const struct norm *n, struct strbuf *s, struct strbuf *tmp, struct tok_regex_ctx *rx, struct err *e)
{
	switch (n->kind) {
	case NM_SEQUENCE:
		for (size_t i = 0; i < n->n_sub; i++) {
			int rc = norm_apply(&n->sub[i], s, tmp, rx, e);
			if (rc)
				return rc;
		}
		return 0;
	case NM_NFC:
	case NM_NFD:
	case NM_NFKC:
	case NM_NFKD:
	case NM_LOWERCASE: return s->n ? icu_apply(n, s, tmp, e) : 0;
	case NM_STRIP_ACCENTS: {
		tmp->n = 0;
		for (size_t i = 0; i < s->n;) {
			uint32_t cp;
			size_t l = utf8_decode((const unsigned char *)s->p + i, s->n - i, &cp);
			if (!l)
				l = 1, cp = 0xFFFD;
			if (u_charType((UChar32)cp) != U_NON_SPACING_MARK)
				strbuf_put(tmp, s->p + i, l);
			i += l;
		}
		break;
	}
	case NM_REPLACE: {
		tmp->n = 0;
		size_t pos = 0, last = 0;
		while (pos <= s->n) {
			size_t ms, me;
			int rc = tok_regex_find(&n->re, rx, s->p, s->n, pos, &ms, &me, e);
			if (rc < 0)
				return -1;
			if (!rc)
				break;
			if (me == ms) { /* empty match: replace nothing, move on one character */
				size_t l;
				space_at(s->p + ms, s->n - ms, &l);
				pos = ms + (l ? l : 1);
				continue;
			}
			strbuf_put(tmp, s->p + last, ms - last);
			strbuf_put(tmp, n->content, n->content_len);
			last = pos = me;
		}
		strbuf_put(tmp, s->p + last, s->n - last);
		break;
	}
	case NM_PREPEND:
		if (!s->n)
			return 0;
		tmp->n = 0;
		strbuf_put(tmp, n->content, n->content_len);
		strbuf_put(tmp, s->p, s->n);
		break;
	case NM_STRIP: {
		size_t a = 0, b = s->n, l;
		while (n->left && a < b && space_at(s->p + a, b - a, &l))
			a += l;
		while (n->right && b > a) {
			size_t k = b - 1;
			while (k > a && ((unsigned char)s->p[k] & 0xC0) == 0x80)
				k--;
			if (!space_at(s->p + k, b - k, &l))
				break;
			b = k;
		}
		tmp->n = 0;
		strbuf_put(tmp, s->p + a, b - a);
		break;
	}
	}
	if (tmp->oom)
		return tok_oom(e);
	struct strbuf t = *s;
	*s = *tmp, *tmp = t;
	return 0;
}
