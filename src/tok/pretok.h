/* Pre-tokenizers of tokenizer.json: Sequence, Split (String / Regex pattern, every
 * behaviour, invert), ByteLevel (add_prefix_space, use_regex), Digits, Metaspace,
 * WhitespaceSplit, Whitespace, Punctuation. A text segment becomes a list of pieces (byte
 * ranges of a work buffer); each piece is then one word for the model. */
#ifndef MLA_TOK_PRETOK_H
#define MLA_TOK_PRETOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "tok/regex.h"
#include "tok/tok_util.h"

enum pretok_kind {
	PT_SEQUENCE,
	PT_SPLIT, /* also Digits, Whitespace, WhitespaceSplit, Punctuation (fixed patterns) */
	PT_BYTE_LEVEL,
	PT_METASPACE,
};

enum split_behavior { SB_REMOVED, SB_ISOLATED, SB_MERGED_PREV, SB_MERGED_NEXT, SB_CONTIGUOUS };

struct pretok {
	enum pretok_kind kind;
	struct pretok *sub; /* Sequence */
	size_t n_sub;
	struct tok_regex re; /* Split; ByteLevel with use_regex (GPT-2 pattern) */
	bool has_re;
	bool invert;
	enum split_behavior behavior;
	bool add_prefix_space; /* ByteLevel */
	char repl[8];          /* Metaspace replacement character (UTF-8) */
	size_t repl_len;
	int prepend; /* Metaspace: 0 never, 1 first, 2 always */
	bool split;  /* Metaspace */
};

struct pretok_piece {
	size_t off, len; /* in pretok_work.buf */
	bool at_start;   /* begins at offset 0 of the original text (Metaspace "first") */
};

struct pretok_list {
	struct pretok_piece *v;
	size_t n, cap;
	bool oom; /* sticky: a piece could not be added */
};

/* Scratch of one encode call: the text and every modified copy of a piece live in buf. */
struct pretok_work {
	struct strbuf buf;
	struct pretok_list pieces; /* pretok_begin / pretok_run */
	struct tok_regex_ctx rx;
};

/* j may be NULL or null (no pre-tokenizer). */
int pretok_load(struct pretok *p, const json_t *j, const char *what, const char *path, struct err *e);
void pretok_free(struct pretok *p);
/* True when a ByteLevel pre-tokenizer is present (the model then sees raw bytes). Also
 * validates the placement: nothing but ByteLevel may follow it (error otherwise). */
int pretok_byte_level(const struct pretok *p, bool *byte_level, const char *what, struct err *e);

/* The leaf pre-tokenizers of p in order (Sequences flattened); *stages is malloc'd and
 * points into p. Every leaf works on each piece independently, which lets the tokenizer
 * run them depth first and cache the result of a short piece. 0, or -1 out of memory. */
int pretok_flatten(const struct pretok *p, const struct pretok ***stages, size_t *n);
/* True when leaf p certainly leaves the piece s[0..n) as it is (a Split whose pattern
 * can not match in it), so a caller may skip it. */
static inline bool pretok_passes(const struct pretok *p, const char *s, size_t n)
{
	return p->kind == PT_SPLIT && !p->invert && !tok_regex_may_match(&p->re, s, n);
}
/* Applies p to one piece (of w->buf), appending the resulting pieces to out. Errors: out of
 * memory (w->buf or out then keeps its sticky oom), a regex failure. */
int pretok_apply(const struct pretok *p, struct pretok_work *w, struct pretok_piece pc, struct pretok_list *out,
		 struct err *e);

/* Breadth-first convenience (tests): pretok_begin puts s[0..n) in the buffer as one piece,
 * pretok_run replaces w->pieces by the pieces p makes of them (p NULL: no-op). */
int pretok_begin(struct pretok_work *w, const char *s, size_t n, bool at_start, struct err *e);
int pretok_run(const struct pretok *p, struct pretok_work *w, struct err *e);
void pretok_work_free(struct pretok_work *w);

#endif
