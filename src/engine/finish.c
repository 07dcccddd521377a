/* The one finish decision (finish.h). */
#include "engine/finish.h"

#include "engine/output.h"

const char *engine_finish_name(enum engine_finish f)
{
	switch (f) {
	case ENGINE_FINISH_STOP: return "stop";
	case ENGINE_FINISH_LENGTH: return "length";
	case ENGINE_FINISH_ABORT: return "abort";
	default: return NULL;
	}
}

static struct finish_verdict verdict(enum engine_finish why, int32_t stop_token, const char *error)
{
	return (struct finish_verdict){.why = why, .stop_token = stop_token, .error = error};
}

static struct finish_verdict guide_verdict(enum finish_guide g)
{
	switch (g) {
	case FINISH_GUIDE_GO_ON: break;
	case FINISH_GUIDE_ENDED: return verdict(ENGINE_FINISH_STOP, -1, NULL);
	case FINISH_GUIDE_STUCK:
		return verdict(ENGINE_FINISH_ABORT, -1,
			       "guided decoding: no token continues the output within the grammar (it "
			       "nests deeper or is more ambiguous than the matcher follows: 31 levels, 32 "
			       "parses)");
	case FINISH_GUIDE_BROKEN:
		return verdict(ENGINE_FINISH_ABORT, -1, "guided decoding: the sampled token does not fit the grammar");
	}
	return verdict(ENGINE_FINISH_NONE, -1, NULL);
}

/* the token rules: length first, then (past min_tokens) EOS and the stop ids */
static struct finish_verdict token_verdict(const struct finish_in *in)
{
	if (in->n_tokens >= in->max_model_len || in->n_tokens >= in->max_len || in->n_out >= in->max_tokens)
		return verdict(ENGINE_FINISH_LENGTH, -1, NULL);
	if (in->n_out < in->min_tokens)
		return verdict(ENGINE_FINISH_NONE, -1, NULL);
	if (!in->ignore_eos && in->eos >= 0 && in->tok == in->eos)
		return verdict(ENGINE_FINISH_STOP, -1, NULL);
	for (int i = 0; i < in->n_stop_ids; i++)
		if (in->tok == in->stop_ids[i])
			return verdict(ENGINE_FINISH_STOP, in->tok, NULL);
	return verdict(ENGINE_FINISH_NONE, -1, NULL);
}

struct finish_verdict finish_check(const struct finish_in *in)
{
	return in->tok < 0 ? guide_verdict(in->guide) : token_verdict(in);
}

struct finish_verdict finish_check_text(const struct finish_in *in, struct seq_text *text, bool include_stop_str,
					struct err *e)
{
	struct finish_verdict v = token_verdict(in);
	/* vLLM V1 detokenizer: the token that stop-terminated the request in the engine (EOS or
	 * a stop token id) is not detokenized unless include_stop_str_in_output; stop strings
	 * are not looked for in the text of the first min_tokens tokens */
	if (v.why == ENGINE_FINISH_STOP && !include_stop_str)
		return v;
	int stop = seq_text_push(text, in->tok, in->n_out > in->min_tokens, e);
	if (stop < 0)
		return verdict(ENGINE_FINISH_ABORT, v.stop_token, e->msg);
	if (stop == 1) /* a stop string in the very token that hit the length still wins */
		return verdict(ENGINE_FINISH_STOP, v.stop_token, NULL);
	return v;
}
