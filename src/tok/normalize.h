/* Normalizers of tokenizer.json: Sequence, NFC, NFD, NFKC, NFKD (ICU), Lowercase,
 * StripAccents, Replace (String / Regex), Prepend, Strip. Applied to each text segment
 * between added tokens before pre-tokenization. */
#ifndef MLA_TOK_NORMALIZE_H
#define MLA_TOK_NORMALIZE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "tok/regex.h"
#include "tok/tok_util.h"

enum norm_kind {
	NM_SEQUENCE,
	NM_NFC,
	NM_NFD,
	NM_NFKC,
	NM_NFKD,
	NM_LOWERCASE,
	NM_STRIP_ACCENTS,
	NM_REPLACE,
	NM_PREPEND,
	NM_STRIP,
};

struct norm {
	enum norm_kind kind;
	struct norm *sub;
	size_t n_sub;
	struct tok_regex re; /* Replace */
	char *content;       /* Replace / Prepend */
	size_t content_len;
	bool left, right; /* Strip */
};

/* j may be NULL or null: no normalizer (an empty Sequence). */
int norm_load(struct norm *n, const json_t *j, const char *what, const char *path, struct err *e);
void norm_free(struct norm *n);
/* True when n does nothing (no normalizer, or empty sequences only). */
bool norm_is_identity(const struct norm *n);
/* Normalizes s in place (tmp is scratch). Errors: out of memory (s or tmp then keeps its
 * sticky oom), a regex failure. */
int norm_apply(const struct norm *n, struct strbuf *s, struct strbuf *tmp, struct tok_regex_ctx *rx, struct err *e);

#endif
