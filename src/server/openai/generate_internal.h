/* Private to generate.c and generate_stream.c: one request's generation (struct gen) and the
 * helpers both halves use. */
#ifndef MLA_SERVER_OPENAI_GENERATE_INTERNAL_H
#define MLA_SERVER_OPENAI_GENERATE_INTERNAL_H

#include "server/openai/openai_json.h"
#include "server/parsers/reasoning.h"
#include "server/openai/responses.h"
#include "server/openai/generate.h"
#include "server/openai/routes.h"
#include "server/openai/state.h"
#include "server/parsers/tool_calls.h"

/* One prompt of a request: one engine request (its n choices). */
struct gen_prompt {
	struct engine_req *h; /* owned (engine_release); NULL before submission */
	bool ended;           /* streaming: its last event was read */
	int n_tokens;         /* its tokens (the engine's count once it ran) */
	int32_t first;        /* its first token (echoed logprobs name it) */
	int cached;           /* its tokens read from the prefix cache (choice 0's) */
	char *echo;           /* text to prepend (completions echo, chat's final assistant
				 * message), malloc'd, or NULL */
	size_t echo_len;
};

/* One choice on the server side: the answer record the JSON builders read, and the
 * streaming state of the parsers that split its text. */
struct gen_choice {
	struct oj_choice out;      /* text, reasoning, tool calls, logprobs, finish, token count */
	bool echo_sent;            /* streaming: the prompt's echo went out */
	struct reasoning_split rs; /* streaming, under gen.reasoning */
	struct tool_split ts;      /* streaming, under gen.tools */
};

/* One generation request, from its parsed body to its last answer byte. Owns the body, the
 * parsed request (req, which points into the body), its prompts (each holding its engine
 * request) and its choices; holds a reference on its HTTP request. Choice i belongs to
 * prompt i / n. */
struct gen {
	struct server *s;
	struct hreq *r; /* one reference held */
	enum srv_api api;
	json_t *body; /* req points into it */
	struct srv_request req;
	char id[64];
	long long created;
	const char *model;       /* name used in responses: the first served name */
	int n_handles;           /* prompts: 1 for chat */
	struct gen_prompt *p;    /* [n_handles] */
	int n;                   /* choices per prompt */
	int n_choices;           /* n_handles * n */
	struct gen_choice *ch;   /* [n_choices] */
	bool reasoning;          /* chat under a reasoning parser: choices' text is split */
	bool tools;              /* chat whose tool calls are parsed (or forced) */
	struct resp_state *resp; /* /v1/responses: its answer's shapes; else NULL */
	bool resp_ended;         /* streaming: its closing events went out */
	bool streaming, started, failed;
	char error[256];         /* the engine's message when it failed a choice */
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
