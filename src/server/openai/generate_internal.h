/* Private to generate.c and generate_stream.c: one request's generation (struct gen) and the
 * helpers both halves use. */
#ifndef MLA_SERVER_GENERATE_INTERNAL_H
#define MLA_SERVER_GENERATE_INTERNAL_H

#include "server/openai/openai_json.h"
#include "server/parsers/reasoning.h"
#include "server/openai/responses.h"
#include "server/openai/generate.h"
#include "server/openai/routes.h"
#include "server/openai/state.h"
#include "server/parsers/tool_calls.h"

struct gen {
	struct server *s;
	struct hreq *r;		/* one reference held */
	enum srv_api api;
	json_t *body;		/* req points into it */
	struct srv_request req;
	char id[64];
	long long created;
	const char *model;	/* name used in responses: the first served name */
	int n_handles;		/* one per prompt */
	struct engine_req **h;
	bool *h_ended;
	int *h_prompt_tokens;
	int32_t *h_first;	/* per prompt: its first token (echoed logprobs name it) */
	int *h_cached;		/* per prompt: its tokens read from the prefix cache (choice 0's) */
	int32_t *bad_tok, *bad_lens; /* bad_words tokenized (req.sp points here) */
	int n;			/* choices per prompt */
	int n_choices;		/* n_handles * n */
	struct oj_choice *ch;
	char **echo;		/* per prompt: text to prepend (completions echo), or NULL */
	size_t *echo_len;
	bool *echo_sent;	/* per choice (streaming) */
	struct reasoning_split *rs; /* per choice: chat under a reasoning parser (streaming); else NULL */
	struct tool_split *ts;	/* per choice: chat whose tool calls are parsed (streaming); else NULL */
	struct resp_state *resp; /* /v1/responses: its answer's shapes; else NULL */
	bool resp_ended;	/* streaming: its closing events went out */
	bool streaming, started, failed;
	char error[256];	/* the engine's message when it failed a choice */
	struct gen *prev, *next; /* s->gens registry */
};

void gen_free(struct gen *g);
/* the tokenizer that names tokens in logprobs; NULL ("token_id:N") under
 * return_tokens_as_token_ids */
const struct tok *gen_lp_tok(const struct gen *g);
int gen_tool_parser(const struct gen *g); /* the server's tool-call parser (tool_calls.h) */
void gen_note_first_token(struct gen *g, const struct engine_event *ev);
json_t *gen_event_logprobs(struct gen *g, struct oj_choice *c, const struct engine_event *ev);
struct oj_usage gen_usage(const struct gen *g);
/* The prompt's logprobs of handle k in front of *logprobs (completions echo with logprobs);
 * 0 when there are none (the request ended before its prompt ran). */
int gen_lead_with_prompt_logprobs(struct gen *g, int k, json_t **logprobs);
/* A finished Responses answer into the server's store (unless "store": false or failed) */
void gen_store_response(struct gen *g);

/* generate_stream.c: the SSE answer (http_reply_stream's ops; stream_close frees g) */
extern const struct http_stream_ops gen_stream_ops;

#endif
