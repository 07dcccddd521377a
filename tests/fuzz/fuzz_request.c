/* Fuzz target "request": any bytes as the body of /v1/chat/completions, /v1/completions or
 * /v1/responses (first byte: which), through what the server does before the engine:
 * parsing and validation (server/openai/request.c, structured.c), the Responses translation, the
 * chat template (tiny-v3's), tokenization, bad_words, the length checks, and the guided
 * decoding grammar fed the input's tail as output bytes.
 * Properties: a refused request is a 4xx with a message; nothing leaks or crashes. */
#include <string.h>

#include "engine/engine.h"
#include "fuzz/fuzz.h"
#include "guide/matcher.h"
#include "server/openai/request.h"
#include "server/openai/responses.h"
#include "tok/chat_template.h"
#include "io/hf_config.h"
#include "tok/tokenizer.h"

const char fuzz_name[] = "request";

static struct tok *tok;
static struct hf_config hf;
static struct chat_template *tpl;
static struct sampling_params base;
static const struct srv_limits lim = {
	.vocab_size = 1024, .max_n = 8, .max_prompts = 8, .auto_tools = true, .priority = true};

static void setup(void)
{
	struct err e;
	FUZZ_SETUP(tok_load("tests/fixtures/tiny-v3", &tok, &e) == 0, e.msg);
	FUZZ_SETUP(hf_config_load("tests/fixtures/tiny-v3", &hf, &e) == 0, e.msg);
	FUZZ_SETUP(hf.chat_template, "tiny-v3 has no chat template");
	FUZZ_SETUP(chat_template_compile(hf.chat_template, &tpl, &e) == 0, e.msg);
	struct sampling_defaults d;
	sampling_defaults_init(&d);
	sampling_params_init(&base, &d);
}

static void check_error(const struct api_error *ae)
{
	FUZZ_CHECK(ae->status >= 400 && ae->status < 500);
	FUZZ_CHECK(ae->message[0]);
}

/* The grammar against bytes: whatever they are, the matcher accepts a prefix of them. */
static void run_guide(const struct guide_grammar *g, const uint8_t *p, size_t n)
{
	static struct jm_state s, t;
	jm_init(&s, g);
	for (size_t i = 0; i < n && i < 512; i++) {
		jm_copy(&t, &s);
		if (!jm_feed(&s, g, p[i])) {
			/* refused: unchanged (the live part: what jm_copy copies) */
			FUZZ_CHECK(t.n == s.n);
			for (int k = 0; k < s.n; k++)
				FUZZ_CHECK(t.s[k].depth == s.s[k].depth &&
					   !memcmp(t.s[k].f, s.s[k].f, (size_t)s.s[k].depth * sizeof s.s[k].f[0]));
			break;
		}
		(void)jm_complete(&s, g);
		(void)jm_finished(&s, g);
	}
}

static void prepare(const json_t *body, enum srv_api api, const uint8_t *tail, size_t n_tail)
{
	struct srv_request r;
	struct api_error ae = {0};
	char unknown[256];
	if (srv_request_parse(body, api, &base, &lim, &r, &ae, unknown, sizeof unknown) < 0) {
		check_error(&ae);
		srv_request_fini(&r);
		return;
	}
	struct err e;
	int32_t *bad = NULL, *bad_lens = NULL;
	if (r.bad_words && srv_bad_words_tokenize(tok, r.bad_words, &bad, &bad_lens, &r.sp.n_bad, &ae) < 0)
		check_error(&ae);
	r.sp.bad_words = bad;
	r.sp.bad_lens = bad_lens;
	(void)sampling_params_validate(&r.sp, lim.vocab_size, &e);
	int n_prompts = api == SRV_API_CHAT ? 1 : r.n_prompts;
	for (int i = 0; i < n_prompts; i++) {
		int32_t *ids = NULL;
		size_t n = 0;
		if (api == SRV_API_CHAT) {
			char *text = NULL;
			if (chat_template_render(tpl, r.messages, r.add_generation_prompt, hf.bos_token, hf.eos_token,
						 r.chat_template_kwargs, &text, &e) < 0)
				break;
			size_t len = strlen(text);
			if (r.continue_final_message) {
				long cut = srv_continue_final_cut(r.messages, text, len, &ae);
				if (cut < 0)
					check_error(&ae);
				len = cut < 0 ? 0 : (size_t)cut;
			}
			(void)tok_encode(tok, text, len, r.add_special_tokens, &ids, &n, &e);
			free(text);
		} else if (r.prompts[i].text) {
			(void)tok_encode(tok, r.prompts[i].text, r.prompts[i].text_len, r.add_special_tokens, &ids, &n,
					 &e);
		} else {
			char *text = NULL;
			if (tok_decode(tok, r.prompts[i].ids, (size_t)r.prompts[i].n_ids, false, &text, NULL, &e) == 0)
				free(text);
			n = (size_t)r.prompts[i].n_ids;
		}
		if (srv_request_check_length(&r, (int)n, 64, &ae) < 0)
			check_error(&ae);
		free(ids);
	}
	if (r.sp.guide)
		run_guide(r.sp.guide, tail, n_tail);
	free(bad);
	free(bad_lens);
	srv_request_fini(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!tok)
		setup();
	if (size < 1)
		return 0;
	/* byte 0: the endpoint; then the body, up to a NUL after which come the output bytes
	 * the grammar is fed */
	const uint8_t *body_p = data + 1, *nul = memchr(body_p, 0, size - 1);
	size_t body_n = nul ? (size_t)(nul - body_p) : size - 1;
	const uint8_t *tail = nul ? nul + 1 : data + size;
	size_t n_tail = (size_t)(data + size - tail);
	json_error_t je;
	json_t *body = json_loadb((const char *)body_p, body_n, JSON_DECODE_ANY, &je);
	if (!body)
		return 0;
	switch (data[0] % 3) {
	case 0: prepare(body, SRV_API_CHAT, tail, n_tail); break;
	case 1: prepare(body, SRV_API_COMPLETION, tail, n_tail); break;
	default: {
		json_t *chat = NULL;
		struct resp_state *rs = NULL;
		struct api_error ae = {0};
		if (resp_translate(body, NULL, true, &chat, &rs, &ae) < 0) {
			check_error(&ae);
		} else {
			prepare(chat, SRV_API_CHAT, tail, n_tail);
			json_decref(chat);
		}
		resp_state_free(rs);
	}
	}
	json_decref(body);
	return 0;
}
