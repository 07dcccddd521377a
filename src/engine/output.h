/* The output stage of one choice: incremental detokenization and stop strings (docs/reference.md B.6:
 * stop strings are found in the detokenized text, which is truncated before the stop string
 * unless include_stop_str_in_output). Text that could still become the start of a stop
 * string is held back (vLLM's stop buffer) so a delta never has to be taken back; deltas
 * end on UTF-8 character boundaries. */
#ifndef MLA_ENGINE_OUTPUT_H
#define MLA_ENGINE_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/params.h"

struct tok;
struct tok_detok;

struct seq_text {
	struct tok_detok *detok;         /* NULL: no tokenizer (text stays empty) */
	const struct sampling_params *p; /* not owned */
	char *buf;                       /* the choice's whole output text so far (after truncation) */
	size_t len, cap, emitted;
	size_t hold;  /* bytes held back for a possible stop string */
	int stop_idx; /* index into p->stop of the stop string that fired, or -1 */
	bool done;
};

int seq_text_init(struct seq_text *st, const struct tok *t, const struct sampling_params *p, const int32_t *prompt,
		  int n_prompt, struct err *e);
void seq_text_fini(struct seq_text *st);
/* Appends the text of one generated token. Returns 1 when a stop string ending in that
 * token's text completed (the text is truncated; stop further pushes), 0 otherwise (also
 * when check_stops_in_it is false: within min_tokens), -1 on error. */
int seq_text_push(struct seq_text *st, int32_t token, bool check_stops_in_it, struct err *e);
/* End of generation: flushes the detokenizer (and checks stop strings in that tail). */
int seq_text_finish(struct seq_text *st, struct err *e);
/* The next delta [*out, *out + returned) that is safe to emit; advances. With `final`
 * nothing is held back. */
size_t seq_text_take(struct seq_text *st, bool final, const char **out);

#endif
