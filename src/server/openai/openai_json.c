#include "server/openai/openai_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "server/parsers/jstr.h"
#include "tok/tokenizer.h"

/* Text of one token as vLLM shows it in logprobs: decode([id]) (lossy), or "token_id:N". */
static char *token_text(const struct tok *tok, int32_t id, size_t *len)
{
	char *text = NULL;
	if (tok) {
		struct err e;
		if (tok_decode(tok, &id, 1, false, &text, len, &e) == 0 && text)
			return text;
	}
	char buf[32];
	snprintf(buf, sizeof buf, "token_id:%d", id);
	*len = strlen(buf);
	return strdup(buf);
}

static double clamp_lp(float lp) { return isnan(lp) ? -9999.0 : lp < -9999.0f ? -9999.0 : (double)lp; }

static json_t *bytes_array(const char *s, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer((unsigned char)s[i]));
	return a;
}

static json_t *chat_token_entry(const struct tok *tok, int32_t id, float lp)
{
	size_t n;
	char *t = token_text(tok, id, &n);
	if (!t)
		return NULL;
	size_t m;
	char *clean = utf8_sanitize(t, n, &m);
	free(t);
	if (!clean)
		return NULL;
	json_t *o = json_pack("{s:s%, s:f, s:o}", "token", clean, m, "logprob", clamp_lp(lp), "bytes",
			      bytes_array(clean, m));
	free(clean);
	return o;
}

json_t *oj_logprobs(enum srv_api api, const struct tok *tok, const struct engine_logprob *lp, int n,
		    size_t *text_offset)
{
	if (api == SRV_API_CHAT) {
		json_t *content = json_array();
		for (int i = 0; content && i < n; i++) {
			json_t *e = chat_token_entry(tok, lp[i].token, lp[i].logprob);
			json_t *top = json_array();
			for (int k = 0; e && top && k < lp[i].n_top; k++)
				json_array_append_new(top,
						      chat_token_entry(tok, lp[i].top_ids[k], lp[i].top_logprobs[k]));
			if (!e || !top) {
				json_decref(e), json_decref(top), json_decref(content);
				return NULL;
			}
			json_object_set_new(e, "top_logprobs", top);
			json_array_append_new(content, e);
		}
		return content ? json_pack("{s:o}", "content", content) : NULL;
	}
	json_t *offs = json_array(), *lps = json_array(), *toks = json_array(), *tops = json_array();
	json_t *o = json_pack("{s:o, s:o, s:o, s:o}", "text_offset", offs, "token_logprobs", lps, "tokens", toks,
			      "top_logprobs", tops);
	if (!o)
		return NULL;
	for (int i = 0; i < n; i++) {
		size_t len;
		char *t = token_text(tok, lp[i].token, &len);
		size_t m;
		char *clean = t ? utf8_sanitize(t, len, &m) : NULL;
		free(t);
		if (!clean) {
			json_decref(o);
			return NULL;
		}
		json_array_append_new(offs, json_integer((json_int_t)*text_offset));
		*text_offset += utf8_len(clean, m);
		json_array_append_new(lps, json_real(clamp_lp(lp[i].logprob)));
		json_t *top = json_object();
		json_object_set_new(top, clean, json_real(clamp_lp(lp[i].logprob)));
		json_array_append_new(toks, json_stringn(clean, m));
		free(clean);
		for (int k = 0; k < lp[i].n_top; k++) {
			char *tt = token_text(tok, lp[i].top_ids[k], &len);
			char *c2 = tt ? utf8_sanitize(tt, len, &m) : NULL;
			free(tt);
			if (c2 && !json_object_get(top, c2))
				json_object_set_new(top, c2, json_real(clamp_lp(lp[i].top_logprobs[k])));
			free(c2);
		}
		json_array_append_new(tops, top);
	}
	return o;
}

json_t *oj_prompt_logprobs_echo(const struct tok *tok, int32_t first, const struct engine_logprob *lp, int n)
{
	size_t len, m;
	char *t = token_text(tok, first, &len);
	char *clean = t ? utf8_sanitize(t, len, &m) : NULL;
	free(t);
	if (!clean)
		return NULL;
	json_t *o = json_pack("{s:[i], s:[n], s:[s%], s:[n]}", "text_offset", 0, "token_logprobs", "tokens", clean, m,
			      "top_logprobs");
	size_t off = utf8_len(clean, m);
	free(clean);
	if (o && n > 1) {
		json_t *rest = oj_logprobs(SRV_API_COMPLETION, tok, lp + 1, n - 1, &off);
		int rc = oj_logprobs_merge(&o, rest);
		json_decref(rest);
		if (rc < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *oj_logprob_entry_vllm(const struct tok *tok, const struct engine_logprob *x)
{
	json_t *d = json_object();
	/* the token first, then the top-N (a top token that is the token is the same entry) */
	for (int k = -1; d && k < x->n_top; k++) {
		int32_t id = k < 0 ? x->token : x->top_ids[k];
		char key[16];
		snprintf(key, sizeof key, "%d", id);
		if (json_object_get(d, key))
			continue;
		size_t len, m;
		char *t = token_text(tok, id, &len);
		char *clean = t ? utf8_sanitize(t, len, &m) : NULL;
		free(t);
		json_t *e = clean ? json_pack("{s:f, s:i, s:s%}", "logprob",
					      clamp_lp(k < 0 ? x->logprob : x->top_logprobs[k]), "rank",
					      k < 0 ? x->rank : k + 1, "decoded_token", clean, m)
				  : NULL;
		free(clean);
		if (!e || json_object_set_new(d, key, e) < 0) {
			json_decref(d);
			return NULL;
		}
	}
	return d;
}

json_t *oj_prompt_logprobs_vllm(const struct tok *tok, const struct engine_logprob *lp, int n)
{
	json_t *a = json_array();
	if (!a || json_array_append_new(a, json_null()) < 0) {
		json_decref(a);
		return NULL;
	}
	for (int i = 1; i < n; i++) {
		json_t *d = oj_logprob_entry_vllm(tok, &lp[i]);
		if (!d || json_array_append_new(a, d) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int oj_logprobs_merge(json_t **acc, json_t *part)
{
	if (!part)
		return -1;
	if (!*acc) {
		*acc = json_incref(part);
		return 0;
	}
	const char *key;
	json_t *v;
	json_object_foreach(part, key, v)
	{
		json_t *dst = json_object_get(*acc, key);
		if (!dst || json_array_extend(dst, v) < 0)
			return -1;
	}
	return 0;
}

void oj_choice_finish(struct oj_choice *c, const struct engine_event *ev)
{
	c->finish = ev->finish;
	c->stop_token = ev->stop_token;
	free(c->stop_str);
	c->stop_str = ev->stop_str ? strdup(ev->stop_str) : NULL;
}

void oj_choice_fini(struct oj_choice *c)
{
	strbuf_fini(&c->text);
	strbuf_fini(&c->reasoning);
	json_decref(c->tool_calls);
	json_decref(c->logprobs);
	json_decref(c->prompt_logprobs);
	json_decref(c->token_ids);
	json_decref(c->prompt_token_ids);
	free(c->stop_str);
	memset(c, 0, sizeof *c);
}

json_t *oj_finish_reason(enum engine_finish f)
{
	const char *s = engine_finish_name(f);
	return s ? json_string(s) : json_null();
}

json_t *oj_stop_reason(int32_t stop_token, const char *stop_str)
{
	if (stop_str)
		return jstr_new(stop_str, strlen(stop_str));
	if (stop_token >= 0)
		return json_integer(stop_token);
	return json_null();
}

json_t *oj_usage_json(const struct oj_usage *u, bool with_details)
{
	json_t *o = json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)u->prompt_tokens, "total_tokens",
			      (json_int_t)(u->prompt_tokens + u->completion_tokens), "completion_tokens",
			      (json_int_t)u->completion_tokens);
	if (o && (with_details || u->details))
		json_object_set_new(o, "prompt_tokens_details",
				    u->details ? json_pack("{s:I}", "cached_tokens", (json_int_t)u->cached_tokens)
					       : json_null());
	return o;
}

static json_t *choice_logprobs(const struct oj_choice *c)
{
	return c->logprobs ? json_incref(c->logprobs) : json_null();
}

/* the calls as streamed: each with its "index" in front */
static json_t *indexed_calls(const json_t *calls)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < json_array_size(calls); i++) {
		json_t *c = json_pack("{s:I}", "index", (json_int_t)i);
		if (!c || json_object_update(c, json_array_get(calls, i)) < 0 || json_array_append_new(a, c) < 0) {
			json_decref(c);
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* "tool_calls" when a stopped output called tools, else the engine's reason */
static json_t *chat_finish(enum engine_finish f, const json_t *calls)
{
	return f == ENGINE_FINISH_STOP && json_array_size(calls) ? json_string("tool_calls") : oj_finish_reason(f);
}

json_t *oj_chat_response(const char *id, long long created, const char *model, const struct oj_choice *const *choices,
			 int n, const struct oj_usage *u)
{
	json_t *arr = json_array();
	for (int i = 0; arr && i < n; i++) {
		const struct oj_choice *c = choices[i];
		/* after a parser split the text: content null when nothing is left of it */
		bool parsed = c->split || json_array_size(c->tool_calls);
		json_t *content = parsed && !c->text.n ? json_null() : jstr_new(c->text.p ? c->text.p : "", c->text.n);
		json_t *reasoning = c->split ? jstr_new(c->reasoning.p ? c->reasoning.p : "", c->reasoning.n)
					     : json_null();
		json_t *calls = c->tool_calls ? json_incref(c->tool_calls) : json_array();
		json_t *msg = json_pack("{s:s, s:o, s:o, s:o}", "role", "assistant", "content", content,
					"reasoning_content", reasoning, "tool_calls", calls);
		if (msg && c->split) /* vLLM's 2026 name for it, beside DeepSeek's own API's */
			json_object_set(msg, "reasoning", reasoning);
		json_t *ch = json_pack("{s:i, s:o, s:o, s:o, s:o}", "index", c->index, "message", msg, "logprobs",
				       choice_logprobs(c), "finish_reason", chat_finish(c->finish, c->tool_calls),
				       "stop_reason", oj_stop_reason(c->stop_token, c->stop_str));
		if (ch && c->token_ids) /* return_token_ids */
			json_object_set(ch, "token_ids", c->token_ids);
		if (!ch || json_array_append_new(arr, ch) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	if (!arr)
		return NULL;
	/* the request's prompt logprobs (vLLM's top-level field: one prompt per chat) */
	json_t *plp = n > 0 && choices[0]->prompt_logprobs ? json_incref(choices[0]->prompt_logprobs) : json_null();
	json_t *pids = n > 0 && choices[0]->prompt_token_ids ? json_incref(choices[0]->prompt_token_ids) : json_null();
	return json_pack("{s:s, s:s, s:I, s:s, s:o, s:n, s:n, s:o, s:o, s:o, s:n}", "id", id, "object",
			 "chat.completion", "created", (json_int_t)created, "model", model, "choices", arr,
			 "service_tier", "system_fingerprint", "usage", oj_usage_json(u, true), "prompt_logprobs", plp,
			 "prompt_token_ids", pids, "kv_transfer_params");
}

json_t *oj_completion_response(const char *id, long long created, const char *model,
			       const struct oj_choice *const *choices, int n, const struct oj_usage *u)
{
	json_t *arr = json_array();
	for (int i = 0; arr && i < n; i++) {
		const struct oj_choice *c = choices[i];
		json_t *ch = json_pack("{s:i, s:o, s:o, s:o, s:o}", "index", c->index, "text",
				       jstr_new(c->text.p ? c->text.p : "", c->text.n), "logprobs", choice_logprobs(c),
				       "finish_reason", oj_finish_reason(c->finish), "stop_reason",
				       oj_stop_reason(c->stop_token, c->stop_str));
		if (ch)
			json_object_set_new(ch, "prompt_logprobs",
					    c->prompt_logprobs ? json_incref(c->prompt_logprobs) : json_null());
		if (ch && c->token_ids) /* return_token_ids (vLLM: only then) */
			json_object_set(ch, "token_ids", c->token_ids);
		if (ch && c->prompt_token_ids)
			json_object_set(ch, "prompt_token_ids", c->prompt_token_ids);
		if (!ch || json_array_append_new(arr, ch) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	if (!arr)
		return NULL;
	return json_pack("{s:s, s:s, s:I, s:s, s:o, s:n, s:n, s:o, s:n}", "id", id, "object", "text_completion",
			 "created", (json_int_t)created, "model", model, "choices", arr, "service_tier",
			 "system_fingerprint", "usage", oj_usage_json(u, true), "kv_transfer_params");
}

json_t *oj_chunk(enum srv_api api, const char *id, long long created, const char *model, int index, const char *role,
		 const struct oj_delta *d, json_t *logprobs, enum engine_finish finish, int32_t stop_token,
		 const char *stop_str, json_t *usage)
{
	static const struct oj_delta none = {0};
	if (!d)
		d = &none;
	const char *text = d->text ? d->text : "";
	json_t *ch;
	if (api == SRV_API_CHAT) {
		bool calls = json_array_size(d->tool_calls) > 0;
		json_t *delta = role ? json_pack("{s:s, s:s}", "role", role, "content", "") : json_object();
		if (delta && !role && d->rlen) { /* both names, as in the message */
			json_t *r = jstr_new(d->reasoning, d->rlen);
			json_object_set(delta, "reasoning_content", r);
			json_object_set_new(delta, "reasoning", r);
		}
		if (delta && !role && (d->len || (!d->rlen && !calls)))
			json_object_set_new(delta, "content", jstr_new(text, d->len));
		if (delta && !role && calls)
			json_object_set_new(delta, "tool_calls", indexed_calls(d->tool_calls));
		ch = json_pack("{s:i, s:o, s:o, s:o}", "index", index, "delta", delta, "logprobs",
			       logprobs ? logprobs : json_null(), "finish_reason", chat_finish(finish, d->tool_calls));
		if (ch && finish != ENGINE_FINISH_NONE)
			json_object_set_new(ch, "stop_reason", oj_stop_reason(stop_token, stop_str));
	} else {
		ch = json_pack("{s:i, s:o, s:o, s:o, s:o}", "index", index, "text", jstr_new(text, d->len), "logprobs",
			       logprobs ? logprobs : json_null(), "finish_reason", oj_finish_reason(finish),
			       "stop_reason", oj_stop_reason(stop_token, stop_str));
	}
	json_t *o = ch ? json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", id, "object",
				   api == SRV_API_CHAT ? "chat.completion.chunk" : "text_completion", "created",
				   (json_int_t)created, "model", model, "choices", ch)
		       : NULL;
	if (o && usage)
		json_object_set_new(o, "usage", usage);
	else
		json_decref(usage);
	return o;
}

json_t *oj_usage_chunk(enum srv_api api, const char *id, long long created, const char *model,
		       const struct oj_usage *u)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", id, "object",
			 api == SRV_API_CHAT ? "chat.completion.chunk" : "text_completion", "created",
			 (json_int_t)created, "model", model, "choices", "usage", oj_usage_json(u, false));
}

json_t *oj_models(const char *const *names, int n_names, const char *root, long long created, int max_model_len)
{
	json_t *data = json_array();
	for (int i = 0; data && i < n_names; i++) {
		char perm_id[64];
		jstr_random_id(perm_id, sizeof perm_id, "modelperm-");
		json_t *perm = json_pack("{s:s, s:s, s:I, s:b, s:b, s:b, s:b, s:b, s:b, s:s, s:n, s:b}", "id", perm_id,
					 "object", "model_permission", "created", (json_int_t)created,
					 "allow_create_engine", 0, "allow_sampling", 1, "allow_logprobs", 1,
					 "allow_search_indices", 0, "allow_view", 1, "allow_fine_tuning", 0,
					 "organization", "*", "group", "is_blocking", 0);
		json_t *m = json_pack("{s:s, s:s, s:I, s:s, s:s, s:n, s:i, s:[o]}", "id", names[i], "object", "model",
				      "created", (json_int_t)created, "owned_by", "mlaserve", "root", root, "parent",
				      "max_model_len", max_model_len, "permission", perm);
		if (!m || json_array_append_new(data, m) < 0) {
			json_decref(data);
			return NULL;
		}
	}
	return data ? json_pack("{s:s, s:o}", "object", "list", "data", data) : NULL;
}
