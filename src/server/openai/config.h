/* The OpenAI server's configuration (the serve command's flags) and what it serves with
 * (engine, tokenizer, template, defaults); server/server.h starts a server from them. */
#ifndef MLA_SERVER_OPENAI_CONFIG_H
#define MLA_SERVER_OPENAI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"
#include "tok/chat_history.h"

struct tok;
struct chat_template;

#define SERVER_MAX_NAMES 8

struct server_config {
	const char *host;                           /* NULL or "": all interfaces (IPv4 0.0.0.0) */
	int port;                                   /* 0: any free port (see server_port) */
	const char *served_names[SERVER_MAX_NAMES]; /* first one is used in responses */
	int n_served_names;
	const char *model_root;     /* shown as "root" in /v1/models */
	const char *api_key;        /* NULL: no auth on the /v1 paths */
	size_t max_body_bytes;      /* larger request bodies get 413 */
	int conn_timeout_s;         /* idle / slow-client timeout per connection */
	int max_connections;        /* bound on connection threads */
	int max_n;                  /* cap on choices per request */
	bool log_requests;          /* one access-log line per request */
	int reasoning_parser;       /* enum reasoning_parser (server/parsers/reasoning.h); 0: none */
	int tool_parser;            /* enum tool_parser (server/parsers/tool_calls.h); 0: none */
	bool auto_tool_choice;      /* parse tool calls when a request's tool_choice is "auto" */
	int max_logprobs;           /* --max-logprobs: cap on logprobs / top_logprobs (0: ENGINE_MAX_LOGPROBS) */
	bool prompt_tokens_details; /* --enable-prompt-tokens-details: usage reports cached tokens */
	const char *tls_key_pem, *tls_cert_pem; /* HTTPS (server/http/tls.h); NULL: plain HTTP */
	int responses_store_size;               /* stored Responses kept (server/openai/resp_store.h); 0: none */
	/* CORS (server/http/cors.h): JSON lists, NULL = ["*"] */
	const char *allowed_origins, *allowed_methods, *allowed_headers;
	bool allow_credentials;
};

struct server_deps {
	struct engine *eng;                      /* not owned */
	const struct tok *tok;                   /* not owned */
	const struct chat_template *tpl;         /* not owned; NULL: chat requests get 400 */
	enum chat_content_format content_format; /* how messages reach tpl (AUTO: its detected one) */
	const char *bos_token, *eos_token;       /* template variables (may be NULL) */
	struct sampling_params defaults;         /* generation_config over OpenAI defaults */
	int vocab_size;                          /* token ids accepted in requests */
};

#endif
