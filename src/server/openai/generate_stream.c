/* The streamed answer of generate.c (SSE, docs/reference.md C.4): a chunk per engine event, in the shapes of
 * the request's API (chat, completions, or the Responses API's typed events). */
#include <stdlib.h>
#include <string.h>

#include "base/mono.h"
#include "server/openai/generate_internal.h"

/* ---- streaming ---- */

static int emit(struct strbuf *out, json_t *obj)
{
	int rc = obj ? sse_event(out, obj) : -1;
	json_decref(obj);
	return rc;
}

static int stream_event(struct gen *g, int k, const struct engine_event *ev, struct strbuf *out)
{
	if (ev->index < 0 || ev->index >= g->n)
		return 0;
	int ci = k * g->n + ev->index;
	struct oj_choice *c = &g->ch[ci].out;
	gen_note_first_token(g, ev);
	bool drop = g->req.echo_only; /* the token that ran the prompt is not the answer */
	c->n_tokens = drop ? 0 : ev->n_output_tokens;
	if (ev->n_prompt_tokens > 0)
		g->p[k].n_tokens = ev->n_prompt_tokens;
	if (ev->index == 0)
		g->p[k].cached = ev->n_cached_tokens;
	if (ev->finish != ENGINE_FINISH_NONE)
		c->finish = ev->finish;
	if (ev->error && g->resp) {
		struct oj_usage u = gen_usage(g);
		g->resp_ended = true;
		return resp_stream_end(g->resp, out, ev->finish, &u, ev->error); /* failed: not stored */
	}
	if (ev->error) {
		struct api_error ae;
		api_error_set(&ae, 500, NULL, "the engine failed: %s", ev->error);
		size_t len;
		char *body = api_error_body(&ae, &len);
		int rc = body ? strbuf_printf(out, "data: %s\n\n", body) : -1;
		free(body);
		return rc;
	}
	/* completions echo: the prompt text (and with logprobs its logprobs, complete by any
	 * token event) leads the first chunk of each choice */
	struct strbuf text = {0};
	json_t *echo_lp = NULL;
	if (g->api == SRV_API_COMPLETION && g->p[k].echo && !g->ch[ci].echo_sent) {
		g->ch[ci].echo_sent = true;
		if (strbuf_put(&text, g->p[k].echo, g->p[k].echo_len) < 0 ||
		    (g->req.echo_logprobs && gen_lead_with_prompt_logprobs(g, k, &echo_lp) < 0)) {
			strbuf_fini(&text);
			return -1;
		}
	}
	struct strbuf reasoning = {0};
	if (g->reasoning ? reasoning_feed(&g->ch[ci].rs, ev->text, ev->text_len, ev->finish != ENGINE_FINISH_NONE,
					  &reasoning, &text) < 0
			 : !drop && ev->text_len && strbuf_put(&text, ev->text, ev->text_len) < 0) {
		strbuf_fini(&text);
		strbuf_fini(&reasoning);
		json_decref(echo_lp);
		return -1;
	}
	json_t *calls = NULL;
	if (g->tools) { /* the content so far goes through the tool-call split */
		struct strbuf content = {0};
		bool last = ev->finish != ENGINE_FINISH_NONE;
		const struct srv_structured *st = &g->req.structured;
		if (st->forced ? tool_forced_feed(&g->ch[ci].ts, st->forced == SRV_TOOLS_REQUIRED, st->forced_name,
						  text.p, text.n, last, &content, &calls) < 0
			       : tool_split_feed(&g->ch[ci].ts, gen_tool_parser(g), text.p, text.n, last, &content,
						 &calls) < 0) {
			strbuf_fini(&text);
			strbuf_fini(&reasoning);
			strbuf_fini(&content);
			return -1;
		}
		strbuf_fini(&text);
		text = content;
	}
	json_t *lp = drop ? NULL : gen_event_logprobs(g, c, ev);
	if (echo_lp) {
		if (lp && oj_logprobs_merge(&echo_lp, lp) < 0) {
			json_decref(echo_lp);
			json_decref(lp);
			strbuf_fini(&text);
			strbuf_fini(&reasoning);
			json_decref(calls);
			return -1;
		}
		json_decref(lp);
		lp = echo_lp;
	}
	if (!text.n && !reasoning.n && !calls && !lp && ev->finish == ENGINE_FINISH_NONE) {
		strbuf_fini(&text);
		strbuf_fini(&reasoning);
		return 0; /* vLLM suppresses empty deltas */
	}
	if (g->resp) {
		int rc = g->resp_ended ? 0
				       : resp_stream_delta(g->resp, out, reasoning.p, reasoning.n, text.p, text.n,
							   calls, lp);
		strbuf_fini(&text);
		strbuf_fini(&reasoning);
		json_decref(lp);
		json_decref(calls);
		return rc;
	}
	json_t *usage = NULL;
	if (g->req.include_usage && g->req.continuous_usage) {
		struct oj_usage u = gen_usage(g);
		usage = oj_usage_json(&u, false);
	}
	struct oj_delta d = {text.p, text.n, reasoning.p, reasoning.n, calls};
	json_t *chunk = oj_chunk(g->api, g->id, g->created, g->model, ci, NULL, &d, lp, ev->finish, ev->stop_token,
				 ev->stop_str, usage);
	int n_plp;
	const struct engine_logprob *plp = g->req.prompt_logprobs && !c->prompt_lp_sent
						   ? engine_prompt_logprobs(g->p[k].h, &n_plp)
						   : NULL;
	if (chunk && plp) { /* vLLM's prompt_logprobs ride on a choice's first chunk */
		c->prompt_lp_sent = true;
		json_t *v = oj_prompt_logprobs_vllm(gen_lp_tok(g), plp, n_plp);
		json_t *at = g->api == SRV_API_CHAT ? chunk : json_array_get(json_object_get(chunk, "choices"), 0);
		if (!at)
			json_decref(v);
		if (!v || !at || json_object_set_new(at, "prompt_logprobs", v) < 0) {
			json_decref(chunk);
			chunk = NULL;
		}
	}
	if (chunk && g->req.return_token_ids) { /* the delta's ids; the prompt's on the first */
		json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
		json_t *d = json_array();
		for (int t = 0; d && !drop && t < ev->n_tokens; t++)
			json_array_append_new(d, json_integer(ev->token_ids[t]));
		if (!choice || !d || json_object_set_new(choice, "token_ids", d) < 0 ||
		    (!c->prompt_ids_sent && c->prompt_token_ids &&
		     json_object_set(g->api == SRV_API_CHAT ? chunk : choice, "prompt_token_ids",
				     c->prompt_token_ids) < 0)) {
			if (!choice)
				json_decref(d);
			json_decref(chunk);
			chunk = NULL;
		}
		c->prompt_ids_sent = true;
	}
	int rc = emit(out, chunk);
	strbuf_fini(&text);
	strbuf_fini(&reasoning);
	json_decref(calls);
	return rc;
}

static int stream_start(struct gen *g, struct strbuf *out)
{
	g->started = true;
	if (g->resp)
		return resp_stream_start(g->resp, out, g->id, g->created, g->model);
	if (g->api != SRV_API_CHAT)
		return 0;
	/* vLLM: with continuous_usage_stats these carry usage too (completion_tokens 0) */
	bool cu = g->req.include_usage && g->req.continuous_usage;
	struct oj_usage u = gen_usage(g);
	for (int i = 0; i < g->n_choices; i++) {
		if (emit(out, oj_chunk(g->api, g->id, g->created, g->model, i, "assistant", NULL, NULL,
				       ENGINE_FINISH_NONE, -1, NULL, cu ? oj_usage_json(&u, false) : NULL)) < 0)
			return -1;
		if (g->p[0].echo &&
		    emit(out, oj_chunk(g->api, g->id, g->created, g->model, i, NULL,
				       &(struct oj_delta){.text = g->p[0].echo, .len = g->p[0].echo_len}, NULL,
				       ENGINE_FINISH_NONE, -1, NULL, cu ? oj_usage_json(&u, false) : NULL)) < 0)
			return -1;
	}
	return 0;
}

/* After server_fail: the error as the engine's own failures come (OpenAI's error object in
 * a data event), then [DONE]; a Responses stream ends with response.failed. */
static int stream_fail(struct gen *g, struct strbuf *out)
{
	for (int k = 0; k < g->n_handles; k++)
		g->p[k].ended = true;
	struct oj_usage u = gen_usage(g);
	g->r->completion_tokens = u.completion_tokens;
	if (g->resp) {
		if (g->resp_ended)
			return 1;
		g->resp_ended = true;
		return resp_stream_end(g->resp, out, ENGINE_FINISH_ABORT, &u, g->s->fatal_msg) < 0 ? -1 : 1;
	}
	struct api_error ae;
	api_error_set(&ae, 500, NULL, "the engine failed: %s", g->s->fatal_msg);
	size_t len;
	char *body = api_error_body(&ae, &len);
	int rc = body ? strbuf_printf(out, "data: %s\n\n", body) : -1;
	free(body);
	return rc < 0 || sse_done(out) < 0 ? -1 : 1;
}

static int stream_pump(void *ctx, struct strbuf *out, int timeout_ms)
{
	struct gen *g = ctx;
	if (!g->started)
		return stream_start(g, out);
	if (atomic_load(&g->s->failed)) /* server_fail: an error event, then the end */
		return stream_fail(g, out);
	int active = 0, first = -1;
	for (int k = 0; k < g->n_handles; k++)
		if (!g->p[k].ended)
			active++, first = first < 0 ? k : first;
	if (active == 0 && g->resp) { /* no [DONE]: the Responses stream ends with its last event */
		struct oj_usage u = gen_usage(g);
		g->r->completion_tokens = u.completion_tokens;
		if (g->resp_ended)
			return 1;
		g->resp_ended = true;
		if (resp_stream_end(g->resp, out, g->ch[0].out.finish, &u, NULL) < 0)
			return -1;
		gen_store_response(g);
		return 1;
	}
	if (active == 0) {
		if (g->req.include_usage) {
			struct oj_usage u = gen_usage(g);
			g->r->completion_tokens = u.completion_tokens;
			if (emit(out, oj_usage_chunk(g->api, g->id, g->created, g->model, &u)) < 0)
				return -1;
		} else {
			g->r->completion_tokens = gen_usage(g).completion_tokens;
		}
		return sse_done(out) < 0 ? -1 : 1;
	}
	/* one handle: block on it; several: poll each, then wait briefly on the first */
	bool got = false;
	for (int k = first; k < g->n_handles && (active > 1 || !got); k++) {
		if (g->p[k].ended)
			continue;
		struct engine_event ev;
		int rc = engine_next_event(g->p[k].h, &ev, active == 1 ? timeout_ms : 0);
		if (rc == ENGINE_EV_END)
			g->p[k].ended = true;
		else if (rc == ENGINE_EV_OK && stream_event(g, k, &ev, out) < 0)
			return -1;
		got |= rc != ENGINE_EV_TIMEOUT;
	}
	if (!got && active > 1) {
		struct engine_event ev;
		int rc = engine_next_event(g->p[first].h, &ev, 20);
		if (rc == ENGINE_EV_END)
			g->p[first].ended = true;
		else if (rc == ENGINE_EV_OK && stream_event(g, first, &ev, out) < 0)
			return -1;
	}
	return 0;
}

static void stream_close(void *ctx, bool completed)
{
	struct gen *g = ctx;
	if (!completed)
		for (int i = 0; i < g->n_handles; i++)
			if (g->p[i].h)
				engine_cancel(g->p[i].h); /* the client went away */
	g->r->completion_tokens = gen_usage(g).completion_tokens;
	gen_free(g);
}

const struct http_stream_ops gen_stream_ops = {stream_pump, stream_close};
