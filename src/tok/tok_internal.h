/* Internals of struct tok shared by tokenizer.c (load, encode) and detok.c (decoder,
 * decode, incremental detokenizer). Not for use outside src/tok/. */
#ifndef MLA_TOK_TOK_INTERNAL_H
#define MLA_TOK_TOK_INTERNAL_H

#include <jansson.h>
#include <pthread.h>

#include "tok/added.h"
#include "tok/bpe.h"
#include "tok/normalize.h"
#include "tok/pretok.h"
#include "tok/tiktoken.h"
#include "tok/tok_util.h"
#include "tok/tokenizer.h"

enum { TOKF_VALID = 1, TOKF_ADDED = 2, TOKF_SPECIAL = 4 };

/* Decoding of one id → bytes: dec.p[dec_off[id] .. dec_off[id + 1]) */
struct tok_dec_table {
	struct strbuf bytes;
	uint32_t *off; /* n_ids + 1 entries */
};

struct tok {
	char *what; /* the tokenizer.json path, for messages */
	int32_t n_ids;
	struct bpe bpe;
	struct added_set added;
	struct tok_strmap added_map; /* added content → id */
	struct norm norm;
	bool norm_identity;
	struct pretok pretok;
	struct tiktoken *tk;          /* Kimi's tiktoken.model: encoding goes through it (NULL otherwise) */
	const struct pretok **stages; /* its leaves, in order */
	size_t n_stages;
	bool byte_level;
	const char **id_str; /* id → token string, NULL for holes */
	uint8_t *flags;      /* id → TOKF_* */
	/* post-processor with add_special_tokens */
	struct tok_ids prefix, suffix;
	/* decoder */
	struct tok_dec_table dec;
	struct tok_dec_table *dec_first; /* variant for the first token (Metaspace), or NULL */
	bool join_space;                 /* no decoder: tokens joined with ' ' */
	int strip_leading;               /* Strip after Fuse: up to N leading `strip_char` */
	char strip_char[4];
	size_t strip_char_len;
	/* pool of encode scratch contexts (the only mutable state; under mu) */
	pthread_mutex_t mu;
	struct tok_ctx **pool;
	size_t n_pool, cap_pool;
};

/* tokenizer.c: id → string / flags tables from the BPE vocab and the added tokens. */
int tok_build_id_tables(struct tok *t, struct err *e);
/* tiktoken_open.c: fills t from DIR/tiktoken.model (t->what) and DIR/tokenizer_config.json. */
int tok_tiktoken_load(struct tok *t, const char *dir, struct err *e);

/* detok.c: parses "decoder" and builds the per-id tables (after id_str / flags exist). */
int tok_decoder_load(struct tok *t, const json_t *dec, struct err *e);
void tok_decoder_free(struct tok *t);

#endif
