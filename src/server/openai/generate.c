/* /v1/chat/completions and /v1/completions (and /v1/responses, as a chat request answered in
 * its own shapes: server/openai/responses.h): parse + validate, render the chat template, tokenize,
 * submit to the engine (one handle per prompt, n choices each), then either collect the whole
 * answer (here) or stream it as SSE (generate_stream.c; docs/reference.md C.3-C.5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mono.h"
#include "server/openai/generate_internal.h"
#include "server/openai/resp_store.h"
#include "server/parsers/jstr.h"
#include "base/utf8.h"
#include "tok/chat_template.h"
#include "tok/tokenizer.h"


/* the tokenizer that names tokens in logprobs; NULL ("token_id:N") under
 * return_tokens_as_token_ids */
const struct tok *gen_lp_tok(const struct gen *g) { return g->req.tokens_as_ids ? NULL : g->s->deps.tok; }

/* the server's tool-call parser (tool_calls.h) */
int gen_tool_parser(const struct gen *g) { return g->s->cfg.tool_parser; }

/* ---- registry (for a graceful stop) ---- */

void gen_cancel_all_locked(struct server *s)
{
	for (struct gen *g = s->gens; g; g = g->next)
		for (int i = 0; i < g->n_handles; i++)
			if (g->p[i].h)
				engine_cancel(g->p[i].h);
}

static void unregister(struct gen *g)
{
	struct server *s = g->s;
	pthread_mutex_lock(&s->mu);
	if (g->prev)
		g->prev->next = g->next;
	else if (s->gens == g)
		s->gens = g->next;
	if (g->next)
		g->next->prev = g->prev;
	g->prev = g->next = NULL;
	if (!s->gens)
		pthread_cond_broadcast(&s->gens_empty);
	pthread_mutex_unlock(&s->mu);
}

void gen_free(struct gen *g)
{
	if (!g)
		return;
	unregister(g);
	for (int i = 0; g->p && i < g->n_handles; i++) {
		if (g->p[i].h)
			engine_release(g->p[i].h); /* cancels a request still running */
		free(g->p[i].echo);
	}
	for (int i = 0; g->ch && i < g->n_choices; i++) {
		oj_choice_fini(&g->ch[i].out);
		tool_split_fini(&g->ch[i].ts);
	}
	free(g->p);
	free(g->ch);
	srv_request_fini(&g->req);
	resp_state_free(g->resp);
	json_decref(g->body);
	if (g->r)
		hreq_unref(g->r);
	free(g);
}

/* ---- prompts ---- */

int gen_chat_prompt(struct server *s, const json_t *messages, bool add_generation_prompt, bool continue_final_message,
		    const json_t *kwargs, bool add_special_tokens, int32_t **ids, size_t *n_ids, struct api_error *ae)
{
	if (!s->deps.tpl)
		return api_error_set(ae, 400, "messages",
				     "As of transformers v4.44, default chat template is no longer "
				     "allowed, so you must provide a chat template if the tokenizer "
				     "does not define one.");
	char *text = NULL;
	struct err e;
	char sentinel[NUL_SENTINEL_MAX];
	bool failed;
	json_t *hidden = nul_hide(messages, sentinel, &failed); /* U+0000 through a C string */
	if (failed)
		return api_error_set(ae, 400, "messages", "cannot render the messages' U+0000 characters");
	int rrc = chat_template_render_vllm(s->deps.tpl, hidden ? hidden : messages, s->deps.content_format,
					    add_generation_prompt, s->deps.bos_token, s->deps.eos_token, kwargs, &text,
					    &e);
	json_decref(hidden);
	if (rrc < 0)
		return api_error_set(ae, 400, "messages", "%s", e.msg);
	size_t len = hidden ? nul_restore(text, sentinel) : strlen(text);
	if (continue_final_message) {
		long cut = srv_continue_final_cut(messages, text, len, ae);
		if (cut < 0) {
			free(text);
			return -1;
		}
		len = (size_t)cut;
	}
	int rc = tok_encode(s->deps.tok, text, len, add_special_tokens, ids, n_ids, &e);
	free(text);
	if (rc == TOK_ENOMEM)
		return api_error_set(ae, 500, NULL, "out of memory");
	if (rc < 0)
		return api_error_set(ae, 400, "messages", "%s", e.msg);
	return 0;
}

/* Token ids of completion prompt i (encoded or copied), and its echo text if wanted. */
static int completion_prompt(struct gen *g, int i, int32_t **ids, size_t *n, struct api_error *ae)
{
	struct server *s = g->s;
	const struct srv_prompt *p = &g->req.prompts[i];
	struct err e;
	if (p->text) {
		int rc = tok_encode(s->deps.tok, p->text, p->text_len, g->req.add_special_tokens, ids, n, &e);
		if (rc == TOK_ENOMEM)
			return api_error_set(ae, 500, NULL, "out of memory");
		if (rc < 0)
			return api_error_set(ae, 400, "prompt", "%s", e.msg);
		if (g->req.echo) {
			g->p[i].echo = malloc(p->text_len + 1);
			if (!g->p[i].echo)
				return api_error_set(ae, 500, NULL, "out of memory");
			memcpy(g->p[i].echo, p->text, p->text_len);
			g->p[i].echo[p->text_len] = 0;
			g->p[i].echo_len = p->text_len;
		}
		return 0;
	}
	*ids = malloc((size_t)p->n_ids * sizeof **ids);
	if (!*ids)
		return api_error_set(ae, 500, NULL, "out of memory");
	memcpy(*ids, p->ids, (size_t)p->n_ids * sizeof **ids);
	*n = (size_t)p->n_ids;
	int rc = g->req.echo ? tok_decode(s->deps.tok, p->ids, (size_t)p->n_ids, false, &g->p[i].echo,
					  &g->p[i].echo_len, &e)
			     : 0;
	if (rc == TOK_ENOMEM)
		return api_error_set(ae, 500, NULL, "out of memory");
	if (rc < 0)
		return api_error_set(ae, 400, "prompt", "%s", e.msg);
	return 0;
}

/* Chat echo: the content of a final assistant message (vLLM prepends it). */
static int chat_echo(struct gen *g, struct api_error *ae)
{
	const json_t *m = g->req.messages;
	const json_t *last = json_array_get(m, json_array_size(m) - 1);
	const json_t *role = json_object_get(last, "role");
	const json_t *c = json_object_get(last, "content");
	if (!json_is_string(role) || strcmp(json_string_value(role), "assistant"))
		return 0;
	if (json_is_array(c))
		c = json_object_get(json_array_get(c, json_array_size(c) - 1), "text");
	if (!json_is_string(c))
		return 0;
	g->p[0].echo = strdup(json_string_value(c));
	if (!g->p[0].echo)
		return api_error_set(ae, 500, NULL, "out of memory");
	g->p[0].echo_len = json_string_length(c);
	return 0;
}

static int submit_error(int rc, const struct err *e, struct api_error *ae)
{
	if (rc == ENGINE_EQUEUE_FULL)
		return api_error_set(ae, 503, NULL,
				     "the server is overloaded: the waiting queue is full, retry "
				     "later");
	if (rc == ENGINE_EDEAD)
		return api_error_set(ae, 503, NULL, "the engine is not running");
	return api_error_set(ae, 400, NULL, "%s", e->msg);
}

/* Everything up to the engine submissions. On failure *ae is set. */
static int gen_prepare(struct gen *g, struct api_error *ae)
{
	struct server *s = g->s;
	char unknown[256];
	if (srv_request_parse(g->body, g->api, &s->deps.defaults, &s->lim, &g->req, ae, unknown, sizeof unknown) < 0)
		return -1;
	if (unknown[0])
		LOG_W("server", "%s: ignoring unknown fields: %s", g->r->path, unknown);
	if (routes_check_model(s, g->req.model, ae) < 0)
		return -1;
	g->model = routes_model_name(s); /* vLLM answers with the first served name */
	if (g->req.bad_words) {
		if (srv_bad_words_tokenize(s->deps.tok, g->req.bad_words, &g->req.bad_tok, &g->req.bad_lens,
					   &g->req.sp.n_bad, ae) < 0)
			return -1;
		g->req.sp.bad_words = g->req.bad_tok;
		g->req.sp.bad_lens = g->req.bad_lens;
	}
	struct err e;
	g->n = g->req.sp.n;
	g->n_handles = g->api == SRV_API_CHAT ? 1 : g->req.n_prompts;
	g->n_choices = g->n_handles * g->n;
	g->p = calloc((size_t)g->n_handles, sizeof *g->p);
	g->ch = calloc((size_t)g->n_choices, sizeof *g->ch);
	if (!g->p || !g->ch)
		return api_error_set(ae, 500, NULL, "out of memory");
	g->reasoning = g->api == SRV_API_CHAT &&
		       reasoning_applies(s->cfg.reasoning_parser, g->req.chat_template_kwargs);
	/* structured output constrains the answer, not the thinking (vLLM): from the token
	 * after "</think>" when the tokenizer has it as one token */
	if (g->reasoning && g->req.sp.guide)
		g->req.sp.guide_after = tok_token_to_id(s->deps.tok, REASONING_END);
	g->tools = g->api == SRV_API_CHAT && (g->req.parse_tools || g->req.structured.forced);
	/* Kimi's tool-call tags are special tokens: kept in the text the parser reads (vLLM's
	 * kimi_k2 and glm47 parsers turn skip_special_tokens off for requests with tools) */
	if (g->req.parse_tools &&
	    (s->cfg.tool_parser == TOOL_PARSER_KIMI_K2 || s->cfg.tool_parser == TOOL_PARSER_GLM47))
		g->req.sp.skip_special_tokens = false;
	for (int i = 0; i < g->n_choices; i++) {
		g->ch[i].out.index = i;
		g->ch[i].out.stop_token = -1;
		g->ch[i].rs.dsml = s->cfg.reasoning_parser == REASONING_DEEPSEEK_V4;
		g->ch[i].rs.kimi = s->cfg.reasoning_parser == REASONING_KIMI_K2;
		g->ch[i].ts.tools = g->req.tools;
	}
	if (g->api == SRV_API_CHAT && g->req.echo && chat_echo(g, ae) < 0)
		return -1;

	/* tokenize every prompt first, so a bad prompt submits nothing */
	int32_t **ids = calloc((size_t)g->n_handles, sizeof *ids);
	size_t *n_ids = calloc((size_t)g->n_handles, sizeof *n_ids);
	int rc = -1;
	if (!ids || !n_ids) {
		api_error_set(ae, 500, NULL, "out of memory");
		goto out;
	}
	for (int i = 0; i < g->n_handles; i++) {
		if (g->api == SRV_API_CHAT) {
			if (gen_chat_prompt(s, g->req.messages, g->req.add_generation_prompt,
					    g->req.continue_final_message, g->req.chat_template_kwargs,
					    g->req.add_special_tokens, &ids[i], &n_ids[i], ae) < 0)
				goto out;
		} else if (completion_prompt(g, i, &ids[i], &n_ids[i], ae) < 0) {
			goto out;
		}
		if (n_ids[i] == 0) {
			api_error_set(ae, 400, g->api == SRV_API_CHAT ? "messages" : "prompt",
				      "the prompt is empty after tokenization");
			goto out;
		}
		if (g->req.truncate_prompt_tokens) { /* vLLM: keep the last N tokens */
			int keep = g->req.truncate_prompt_tokens < 0 ? s->max_model_len
								     : g->req.truncate_prompt_tokens;
			if (keep > s->max_model_len) {
				api_error_set(ae, 400, "truncate_prompt_tokens",
					      "truncate_prompt_tokens value (%d) is greater than max_model_len (%d). "
					      "Please, select a smaller truncation size.",
					      keep, s->max_model_len);
				goto out;
			}
			if (n_ids[i] > (size_t)keep) {
				memmove(ids[i], ids[i] + (n_ids[i] - (size_t)keep), sizeof *ids[i] * (size_t)keep);
				n_ids[i] = (size_t)keep;
				if (g->p[i].echo && g->api == SRV_API_COMPLETION) { /* echo what was run */
					free(g->p[i].echo);
					g->p[i].echo = NULL;
					int drc = tok_decode(s->deps.tok, ids[i], n_ids[i], false, &g->p[i].echo,
							     &g->p[i].echo_len, &e);
					if (drc < 0) {
						if (drc == TOK_ENOMEM)
							api_error_set(ae, 500, NULL, "out of memory");
						else
							api_error_set(ae, 400, "prompt", "%s", e.msg);
						goto out;
					}
				}
			}
		}
		if (srv_request_check_length(&g->req, (int)n_ids[i], s->max_model_len, ae) < 0)
			goto out;
		g->p[i].n_tokens = (int)n_ids[i];
		g->p[i].first = ids[i][0];
		if (g->req.return_token_ids) { /* vLLM's return_token_ids: the prompt's ids */
			json_t *a = json_array();
			for (size_t t = 0; a && t < n_ids[i]; t++)
				json_array_append_new(a, json_integer(ids[i][t]));
			for (int c = 0; a && c < g->n; c++) {
				g->ch[i * g->n + c].out.prompt_token_ids = json_incref(a);
				g->ch[i * g->n + c].out.token_ids = json_array();
			}
			json_decref(a);
			if (!a) {
				api_error_set(ae, 500, NULL, "out of memory");
				goto out;
			}
		}
		if (g->p[i].echo && g->api == SRV_API_COMPLETION)
			for (int c = 0; c < g->n; c++) /* logprob offsets start after the echo */
				g->ch[i * g->n + c].out.text_offset = utf8_len(g->p[i].echo, g->p[i].echo_len);
	}

	/* the server's default max_tokens (generation_config) when the request gave none: the
	 * engine caps it to the context where an explicit one was refused above */
	if (g->req.sp.max_tokens < 0)
		g->req.sp.max_tokens = s->deps.defaults.max_tokens;

	/* submit under the lock, so a concurrent stop sees (and cancels) every handle; the
	 * engine checks the parameters (sampling_params_validate) as it takes them */
	pthread_mutex_lock(&s->mu);
	if (s->stopping) {
		pthread_mutex_unlock(&s->mu);
		api_error_set(ae, 503, NULL, "the server is shutting down");
		goto out;
	}
	for (int i = 0; i < g->n_handles; i++) {
		int src = engine_submit(s->deps.eng, ids[i], (int)n_ids[i], &g->req.sp, &g->p[i].h, &e);
		if (src < 0) {
			g->p[i].h = NULL;
			pthread_mutex_unlock(&s->mu);
			submit_error(src, &e, ae);
			goto out; /* gen_free releases (and so cancels) the earlier handles */
		}
	}
	g->next = s->gens;
	if (s->gens)
		s->gens->prev = g;
	s->gens = g;
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < g->n_handles; i++)
		g->r->prompt_tokens += (long)n_ids[i];
	rc = 0;
out:
	for (int i = 0; ids && i < g->n_handles; i++)
		free(ids[i]);
	free(ids);
	free(n_ids);
	return rc;
}

void gen_note_first_token(struct gen *g, const struct engine_event *ev)
{
	if (g->r->ttft < 0 && ev->n_tokens > 0)
		g->r->ttft = mono_now_s() - g->r->t_start;
}

json_t *gen_event_logprobs(struct gen *g, struct oj_choice *c, const struct engine_event *ev)
{
	if (!g->req.want_logprobs || !ev->logprobs || ev->n_tokens == 0)
		return NULL;
	return oj_logprobs(g->api, gen_lp_tok(g), ev->logprobs, ev->n_tokens, &c->text_offset);
}

struct oj_usage gen_usage(const struct gen *g)
{
	struct oj_usage u = {0, 0, 0, g->s->cfg.prompt_tokens_details};
	for (int i = 0; i < g->n_handles; i++) {
		u.prompt_tokens += g->p[i].n_tokens;
		u.cached_tokens += g->p[i].cached;
	}
	for (int i = 0; i < g->n_choices; i++)
		u.completion_tokens += g->ch[i].out.n_tokens;
	return u;
}

/* Applies one event of handle k to the accumulated (non-streaming) answer. */
static int collect_event(struct gen *g, int k, const struct engine_event *ev)
{
	if (ev->index < 0 || ev->index >= g->n)
		return 0;
	struct oj_choice *c = &g->ch[k * g->n + ev->index].out;
	gen_note_first_token(g, ev);
	bool drop = g->req.echo_only; /* the token that ran the prompt is not the answer */
	if (!drop && ev->text_len && strbuf_put(&c->text, ev->text, ev->text_len) < 0)
		return -1;
	json_t *lp = drop ? NULL : gen_event_logprobs(g, c, ev);
	if (lp) {
		int rc = oj_logprobs_merge(&c->logprobs, lp);
		json_decref(lp);
		if (rc < 0)
			return -1;
	} else if (g->req.want_logprobs && !c->logprobs) {
		c->logprobs = oj_logprobs(g->api, gen_lp_tok(g), NULL, 0, &c->text_offset);
	}
	c->n_tokens = drop ? 0 : ev->n_output_tokens;
	if (ev->n_prompt_tokens > 0)
		g->p[k].n_tokens = ev->n_prompt_tokens;
	if (ev->index == 0)
		g->p[k].cached = ev->n_cached_tokens;
	for (int t = 0; c->token_ids && !drop && t < ev->n_tokens; t++)
		if (json_array_append_new(c->token_ids, json_integer(ev->token_ids[t])) < 0)
			return -1;
	if (ev->finish != ENGINE_FINISH_NONE)
		oj_choice_finish(c, ev);
	if (ev->error && !g->failed) {
		g->failed = true;
		snprintf(g->error, sizeof g->error, "%s", ev->error);
	}
	return 0;
}

/* The prompt's logprobs of handle k in front of choice c's (completions echo with
 * logprobs); 0 when there are none (the request ended before its prompt ran). */
int gen_lead_with_prompt_logprobs(struct gen *g, int k, json_t **logprobs)
{
	int n;
	const struct engine_logprob *lp = engine_prompt_logprobs(g->p[k].h, &n);
	if (!lp)
		return 0;
	json_t *part = oj_prompt_logprobs_echo(gen_lp_tok(g), g->p[k].first, lp, n);
	if (!part || (*logprobs && oj_logprobs_merge(&part, *logprobs) < 0)) {
		json_decref(part);
		return -1;
	}
	json_decref(*logprobs);
	*logprobs = part;
	return 0;
}

/* Non-streaming: the prompt logprobs each choice reports (echo, vLLM's field). */
static int add_prompt_logprobs(struct gen *g)
{
	for (int i = 0; i < g->n_choices; i++) {
		struct oj_choice *c = &g->ch[i].out;
		int k = i / g->n, n;
		if (g->req.echo_logprobs && gen_lead_with_prompt_logprobs(g, k, &c->logprobs) < 0)
			return -1;
		const struct engine_logprob *lp = engine_prompt_logprobs(g->p[k].h, &n);
		if (g->req.prompt_logprobs && lp &&
		    !(c->prompt_logprobs = oj_prompt_logprobs_vllm(gen_lp_tok(g), lp, n)))
			return -1;
	}
	return 0;
}

static enum MHD_Result reply_collected(struct gen *g)
{
	struct hreq *r = g->r;
	struct oj_usage u = gen_usage(g);
	r->completion_tokens = u.completion_tokens;
	enum MHD_Result res;
	if (g->failed) {
		struct api_error ae;
		api_error_set(&ae, 500, NULL, "the engine failed while generating this request: %s", g->error);
		res = routes_reply_error(r, &ae);
	} else {
		if (add_prompt_logprobs(g) < 0)
			return MHD_NO;
		for (int i = 0; g->reasoning && i < g->n_choices; i++) { /* the reasoning parser: whole text */
			struct reasoning_split rs = {.dsml = g->ch[i].rs.dsml, .kimi = g->ch[i].rs.kimi};
			struct strbuf content = {0};
			if (reasoning_feed(&rs, g->ch[i].out.text.p, g->ch[i].out.text.n, true,
					   &g->ch[i].out.reasoning, &content) < 0) {
				strbuf_fini(&content);
				return MHD_NO;
			}
			strbuf_fini(&g->ch[i].out.text);
			g->ch[i].out.text = content;
			g->ch[i].out.split = true;
		}
		for (int i = 0; g->tools && i < g->n_choices; i++) { /* the tool-call parser: the content */
			struct oj_choice *c = &g->ch[i].out;
			size_t content_len = 0;
			if (g->req.structured.forced) {
				if (tool_calls_forced(g->req.structured.forced == SRV_TOOLS_REQUIRED,
						      g->req.structured.forced_name, c->text.p, c->text.n,
						      &c->tool_calls) < 0)
					return MHD_NO;
			} else if (tool_calls_parse_typed(gen_tool_parser(g), g->req.tools, c->text.p, c->text.n,
							  &c->tool_calls, &content_len) < 0) {
				return MHD_NO;
			}
			if (json_array_size(c->tool_calls)) {
				c->text.n = content_len;
			} else {
				json_decref(c->tool_calls);
				c->tool_calls = NULL;
			}
		}
		for (int i = 0; i < g->n_choices; i++) { /* echo goes in front of the text (content) */
			const char *echo = g->p[i / g->n].echo;
			if (!echo)
				continue;
			struct strbuf t = {0};
			if (strbuf_put(&t, echo, g->p[i / g->n].echo_len) < 0 ||
			    strbuf_put(&t, g->ch[i].out.text.p, g->ch[i].out.text.n) < 0) {
				strbuf_fini(&t);
				return MHD_NO;
			}
			strbuf_fini(&g->ch[i].out.text);
			g->ch[i].out.text = t;
		}
		const struct oj_choice *c = &g->ch[0].out;
		const struct oj_choice **outs = malloc((size_t)g->n_choices * sizeof *outs);
		if (!outs)
			return MHD_NO;
		for (int i = 0; i < g->n_choices; i++)
			outs[i] = &g->ch[i].out;
		json_t *resp = g->resp ? resp_object(g->resp, g->id, g->created, g->model, c->reasoning.p,
						     c->reasoning.n, c->text.p, c->text.n, c->tool_calls, c->logprobs,
						     c->finish, &u)
			       : g->api == SRV_API_CHAT
				       ? oj_chat_response(g->id, g->created, g->model, outs, g->n_choices, &u)
				       : oj_completion_response(g->id, g->created, g->model, outs, g->n_choices, &u);
		free(outs);
		gen_store_response(g);
		res = http_reply_json(r, 200, resp);
	}
	return res;
}

/* Non-streaming: wait for every choice. The client is checked every 50 ms (events may arrive
 * continuously, so not only on timeouts): one that left cancels the request. */
static enum MHD_Result gen_collect(struct gen *g)
{
	double next_check = mono_now_s() + 0.05;
	bool gone = false;
	for (int k = 0; k < g->n_handles; k++) {
		for (;;) {
			struct engine_event ev;
			int rc = engine_next_event(g->p[k].h, &ev, 50);
			if (rc == ENGINE_EV_END)
				break;
			if (atomic_load(&g->s->failed)) { /* server_fail: the engine can go on no more */
				g->failed = true;
				snprintf(g->error, sizeof g->error, "%s", g->s->fatal_msg);
				return reply_collected(g);
			}
			if (rc == ENGINE_EV_OK && collect_event(g, k, &ev) < 0)
				return MHD_NO;
			if (!gone && mono_now_s() >= next_check) {
				next_check = mono_now_s() + 0.05;
				if (!http_client_alive(g->r)) {
					gone = true;
					for (int i = 0; i < g->n_handles; i++)
						engine_cancel(g->p[i].h);
				}
			}
		}
	}
	return reply_collected(g);
}


static enum MHD_Result gen_run(struct server *s, struct hreq *r, enum srv_api api, json_t *body, struct resp_state *rs)
{
	struct gen *g = calloc(1, sizeof *g);
	if (!g) {
		json_decref(body);
		resp_state_free(rs);
		return MHD_NO;
	}
	g->resp = rs;
	const char *prefix = rs ? "resp_" : api == SRV_API_CHAT ? "chatcmpl-" : "cmpl-";
	g->s = s;
	g->r = r;
	atomic_fetch_add(&r->refs, 1);
	g->api = api;
	g->body = body;
	g->created = (long long)time(NULL);
	jstr_random_id(g->id, sizeof g->id, prefix);
	snprintf(r->id, sizeof r->id, "%s", g->id);
	struct api_error ae;
	if (gen_prepare(g, &ae) < 0) {
		enum MHD_Result res = routes_reply_error(r, &ae);
		gen_free(g);
		return res;
	}
	if (g->req.request_id) { /* vLLM: the caller's id after the prefix */
		snprintf(g->id, sizeof g->id, "%s%s", prefix, g->req.request_id);
		snprintf(r->id, sizeof r->id, "%s", g->id);
	}
	if (g->req.stream) {
		g->streaming = true;
		return http_reply_stream(r, &gen_stream_ops, g); /* stream_close frees g */
	}
	enum MHD_Result res = gen_collect(g);
	gen_free(g);
	return res;
}

enum MHD_Result gen_handle(struct server *s, struct hreq *r, enum srv_api api, json_t *body)
{
	return gen_run(s, r, api, body, NULL);
}

enum MHD_Result gen_handle_responses(struct server *s, struct hreq *r, json_t *body)
{
	struct api_error ae;
	json_t *chat, *prev_items = NULL;
	struct resp_state *rs;
	int rc = 0;
	const json_t *prev = json_object_get(body, "previous_response_id");
	bool can_store = resp_store_max(s->store) > 0;
	if (json_is_string(prev) && can_store &&
	    resp_store_get(s->store, json_string_value(prev), NULL, &prev_items) < 0)
		rc = api_error_set(&ae, 404, "previous_response_id", "Previous response with id '%s' not found.",
				   json_string_value(prev));
	if (rc == 0)
		rc = resp_translate(body, prev_items, can_store, &chat, &rs, &ae);
	json_decref(prev_items);
	json_decref(body);
	return rc < 0 ? routes_reply_error(r, &ae) : gen_run(s, r, SRV_API_CHAT, chat, rs);
}

void gen_store_response(struct gen *g)
{
	json_t *resp, *items;
	if (g->resp && resp_stored(g->resp, &resp, &items) == 0)
		resp_store_put(g->s->store, g->id, resp, items);
}
