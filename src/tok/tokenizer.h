/* Hugging Face `tokenizer.json` tokenizer: added tokens, normalizer, pre-tokenizer, BPE
 * model, post-processor (BOS), decoder; and an incremental detokenizer for streaming.
 *
 * A loaded struct tok may be used from many threads at once without locking by the caller
 * (encode takes per-thread scratch, with a per-piece result cache, from a small pool inside
 * the tokenizer under a mutex; everything else is read-only).
 *
 * Token ids are int32_t. Text is UTF-8 with an explicit byte length (it may contain NUL).
 * Output buffers (ids, text) are malloc'd and owned by the caller (free()).
 */
#ifndef MLA_TOK_TOKENIZER_H
#define MLA_TOK_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct tok;
struct hf_config;

/* What tok_encode, tok_decode and the detokenizer return when out of memory (their other
 * errors return -1; both fill the struct err): a server answers it with 500, not 400. */
#define TOK_ENOMEM (-2)

/* Which tokenizer a directory holds: tokenizer.json, else Kimi's tiktoken.model (read with
 * tokenizer_config.json's special tokens, tok/tiktoken.h), else none. */
enum tok_dir_kind { TOK_DIR_NONE, TOK_DIR_JSON, TOK_DIR_TIKTOKEN };
enum tok_dir_kind tok_dir_kind(const char *dir);

/* Loads a tokenizer. `path` is either a directory (reads DIR/tokenizer.json and, if present,
 * DIR/tokenizer_config.json and DIR/generation_config.json through hf_config_load; without a
 * tokenizer.json, DIR/tiktoken.model and DIR/tokenizer_config.json as Kimi's
 * tokenization_kimi.py reads them) or the path of a tokenizer.json file (then only that file
 * is read) or of a tiktoken.model (read with its folder's tokenizer_config.json). A directory with tokenizer files and no weights is fine. Errors name the file
 * and the construct ("DIR/tiktoken.model: line 7: ...",
 * "DIR/tokenizer.json: pre_tokenizer: unsupported pre-tokenizer type 'Foo'",
 * "DIR/tokenizer.json: model.merges[12]: 'ab' is not in the vocab", ...). */
int tok_load(const char *path, struct tok **out, struct err *e);
void tok_free(struct tok *t);

/* Encodes `len` bytes of UTF-8 text. Added tokens (special or not) in the text are matched
 * first and become their ids. add_special_tokens: add what the post-processor adds (the
 * BOS of TemplateProcessing; when tokenizer_config.json has add_bos_token / add_eos_token,
 * those decide instead, as transformers' update_post_processor does) — true for
 * /v1/completions prompts, false for rendered chat templates (which already contain BOS).
 * Invalid UTF-8 → error "invalid utf-8 at byte N of the text" (nothing allocated); out of
 * memory → error "out of memory". On success *ids is malloc'd (may be NULL when *n == 0).
 * Thread-safe. */
int tok_encode(const struct tok *t, const char *text, size_t len, bool add_special_tokens, int32_t **ids, size_t *n,
	       struct err *e);

/* Decodes ids into UTF-8 text (always valid: byte sequences that do not form UTF-8 become
 * U+FFFD, like Hugging Face's lossy decoding). Added tokens are emitted verbatim; other
 * tokens go through the decoder (ByteLevel, Metaspace, ...). skip_special_tokens drops
 * tokens marked special. Ids the tokenizer does not define (>= tok_vocab_size, e.g. the
 * padding rows of a model's larger vocab, or holes) decode to nothing, as in Hugging Face;
 * a negative id is an error naming it. *text is malloc'd and NUL-terminated; *len (may be
 * NULL) receives its byte length. */
int tok_decode(const struct tok *t, const int32_t *ids, size_t n, bool skip_special_tokens, char **text, size_t *len,
	       struct err *e);

/* Number of ids: 1 + the largest id in the vocab or added tokens. (The model's vocab_size
 * from config.json may be larger; ids in between decode to nothing.) */
int32_t tok_vocab_size(const struct tok *t);
/* Id of a token by its exact vocab string (added tokens included; byte-level vocab strings
 * as written in tokenizer.json, e.g. "Ġthe"), or -1. */
int32_t tok_token_to_id(const struct tok *t, const char *token);
/* Fills cfg's bos/eos/pad/unk_token_id that are still -1 by looking their strings up. */
void tok_resolve_special_ids(const struct tok *t, struct hf_config *cfg);
/* The vocab string of an id (as written in tokenizer.json), or NULL when the id is unused or
 * out of range. Valid as long as the tokenizer. */
const char *tok_id_to_token(const struct tok *t, int32_t id);
/* True for added tokens marked "special": true (BOS, EOS, role tokens, ...). */
bool tok_is_special(const struct tok *t, int32_t id);
/* The id the post-processor puts in front with add_special_tokens (BOS), or -1 if none;
 * likewise the id appended at the end (EOS, rare), or -1. */
int32_t tok_bos_id(const struct tok *t);
int32_t tok_eos_id(const struct tok *t);

/* The bytes id adds to a decoded text after other tokens (its decoder output before any
 * UTF-8 repair; added tokens: their content), or NULL for an unused id. Valid as long as the
 * tokenizer. */
const char *tok_id_bytes(const struct tok *t, int32_t id, size_t *len);
/* True when a decoded text is exactly the concatenation of its ids' tok_id_bytes (byte-level
 * BPE; false for decoders that treat the first token apart or join tokens with spaces). */
bool tok_decode_concatenates(const struct tok *t);

/* Incremental detokenizer: feed generated ids one at a time, get text deltas that contain
 * only complete UTF-8 characters. The concatenation of every delta plus tok_detok_finish's
 * equals tok_decode() of all the pushed ids (same skip_special_tokens), byte for byte.
 *
 * prompt_ids (may be NULL / 0) give context: they are not decoded into the output, but a
 * decoder that strips the leading space of the first token of a text (Metaspace, Strip)
 * does not strip it from the first generated token when the prompt has a non-skipped
 * token — matching decode(prompt + output) minus decode(prompt). One detokenizer per
 * request; not thread-safe by itself (the tokenizer it reads is). */
struct tok_detok;

int tok_detok_new(const struct tok *t, bool skip_special_tokens, const int32_t *prompt_ids, size_t n_prompt,
		  struct tok_detok **out, struct err *e);
/* Pushes one id. *delta points to the new complete text (NUL-terminated; may be "" while a
 * multi-byte character is incomplete), valid until the next call on d. Unknown ids give no
 * text (as in tok_decode); a negative id → error, state unchanged; out of memory → error
 * (*delta ""; the detokenizer is then unusable). */
int tok_detok_push(struct tok_detok *d, int32_t id, const char **delta, size_t *delta_len, struct err *e);
/* Flushes what is left at the end of generation: bytes of a character that never completed
 * become one U+FFFD. Same lifetime rule for *delta. The detokenizer can not be pushed to
 * afterwards. Error (out of memory): *delta is "" and the text left is lost. */
int tok_detok_finish(struct tok_detok *d, const char **delta, size_t *delta_len, struct err *e);
void tok_detok_free(struct tok_detok *d);

#endif
