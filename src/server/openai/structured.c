/* Structured-output request fields → a guide grammar (server/openai/structured.h). */
#include "server/openai/structured.h"

#include <string.h>

/* a schema given as an object, or as JSON text (guided_json, structured_outputs.json) */
static int from_schema_value(const json_t *v, const char *field, struct guide_grammar **g, struct api_error *ae)
{
	struct err e;
	json_t *parsed = NULL;
	if (json_is_string(v)) {
		json_error_t je;
		parsed = json_loadb(json_string_value(v), json_string_length(v), JSON_DECODE_ANY, &je);
		if (!parsed)
			return api_error_set(ae, 400, field, "%s is not valid JSON: %s", field, je.text);
		v = parsed;
	}
	if (!json_is_object(v) && !json_is_boolean(v)) {
		json_decref(parsed);
		return api_error_set(ae, 400, field, "%s must be a JSON Schema object", field);
	}
	int rc = guide_from_schema(v, field, g, &e);
	json_decref(parsed);
	return rc < 0 ? api_error_set(ae, 400, field, "%s", e.msg) : 0;
}

static int from_choices(const json_t *v, const char *field, struct guide_grammar **g, struct api_error *ae)
{
	size_t n = json_is_array(v) ? json_array_size(v) : 0;
	if (!n || n > 1024)
		return api_error_set(ae, 400, field, "%s must be a list of 1 to 1024 strings", field);
	const char *s[1024];
	size_t len[1024];
	for (size_t i = 0; i < n; i++) {
		const json_t *c = json_array_get(v, i);
		if (!json_is_string(c))
			return api_error_set(ae, 400, field, "%s[%zu] must be a string", field, i);
		s[i] = json_string_value(c);
		len[i] = json_string_length(c);
	}
	struct err e;
	return guide_from_choices(s, len, (int)n, g, &e) < 0 ? api_error_set(ae, 400, field, "%s", e.msg) : 0;
}

/* guided_regex / guided_grammar and their structured_outputs forms: a string compiled by
 * `compile` (guide_from_regex or guide_from_ebnf) */
static int from_text(const json_t *v, const char *field,
		     int (*compile)(const char *, size_t, struct guide_grammar **, struct err *),
		     struct guide_grammar **g, struct api_error *ae)
{
	struct err e;
	if (!json_is_string(v))
		return api_error_set(ae, 400, field, "%s must be a string", field);
	return compile(json_string_value(v), json_string_length(v), g, &e) < 0
		       ? api_error_set(ae, 400, field, "%s: %s", field, e.msg)
		       : 0;
}

static int from_response_format(const json_t *v, struct guide_grammar **g, struct api_error *ae)
{
	const json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
	const char *type = json_is_string(t) ? json_string_value(t) : NULL;
	struct err e;
	if (!type)
		return api_error_set(ae, 400, "response_format", "response_format must be an object with a \"type\"");
	if (!strcmp(type, "text"))
		return 0;
	if (!strcmp(type, "json_object"))
		return guide_from_json_object(g, &e) < 0 ? api_error_set(ae, 500, NULL, "%s", e.msg) : 0;
	if (!strcmp(type, "json_schema")) {
		const json_t *js = json_object_get(v, "json_schema");
		if (!json_is_object(js))
			return api_error_set(ae, 400, "response_format",
					     "response_format.json_schema must be an object with a \"schema\"");
		const json_t *schema = json_object_get(js, "schema");
		if (!schema || json_is_null(schema)) /* OpenAI allows it absent: any JSON value */
			schema = json_true();
		return from_schema_value(schema, "response_format.json_schema.schema", g, ae);
	}
	return api_error_set(ae, 400, "response_format",
			     "response_format type \"%s\" is not supported (text, json_object, json_schema)", type);
}

static int from_structured_outputs(const json_t *v, struct guide_grammar **g, struct api_error *ae)
{
	if (!json_is_object(v))
		return api_error_set(ae, 400, "structured_outputs", "structured_outputs must be an object");
	const json_t *st = json_object_get(v, "structural_tag");
	if (st && !json_is_null(st))
		return api_error_set(ae, 400, "structured_outputs",
				     "structured_outputs.structural_tag is not supported");
	const json_t *json = json_object_get(v, "json"), *choice = json_object_get(v, "choice");
	const json_t *obj = json_object_get(v, "json_object"), *regex = json_object_get(v, "regex");
	const json_t *grammar = json_object_get(v, "grammar");
	int kinds = (json && !json_is_null(json)) + (choice && !json_is_null(choice)) + json_is_true(obj) +
		    (regex && !json_is_null(regex)) + (grammar && !json_is_null(grammar));
	if (kinds > 1)
		return api_error_set(
			ae, 400, "structured_outputs",
			"structured_outputs: give only one of json, choice, regex, grammar and json_object");
	if (regex && !json_is_null(regex))
		return from_text(regex, "structured_outputs.regex", guide_from_regex, g, ae);
	if (grammar && !json_is_null(grammar))
		return from_text(grammar, "structured_outputs.grammar", guide_from_ebnf, g, ae);
	struct err e;
	if (json && !json_is_null(json))
		return from_schema_value(json, "structured_outputs.json", g, ae);
	if (choice && !json_is_null(choice))
		return from_choices(choice, "structured_outputs.choice", g, ae);
	if (json_is_true(obj))
		return guide_from_json_object(g, &e) < 0 ? api_error_set(ae, 500, NULL, "%s", e.msg) : 0;
	return 0;
}

/* the parameters schema of tools[i] (an empty object schema when absent), borrowed */
static const json_t *tool_parameters(const json_t *tool, json_t **own)
{
	const json_t *f = json_object_get(tool, "function");
	const json_t *p = json_is_object(f) ? json_object_get(f, "parameters") : NULL;
	if (json_is_object(p))
		return p;
	*own = json_pack("{s:s, s:{}}", "type", "object", "properties");
	return *own;
}

static const char *tool_name(const json_t *tool)
{
	const json_t *f = json_object_get(tool, "function");
	const json_t *n = json_is_object(f) ? json_object_get(f, "name") : NULL;
	return json_is_string(n) ? json_string_value(n) : NULL;
}

/* tool_choice "required" or named → the grammar vLLM builds for it */
static int from_tool_choice(const json_t *choice, const json_t *tools, struct srv_structured *out,
			    struct api_error *ae)
{
	size_t n = json_is_array(tools) ? json_array_size(tools) : 0;
	if (!n)
		return api_error_set(ae, 400, "tool_choice",
				     "tool_choice \"required\" or a named function needs tools");
	for (size_t i = 0; i < n; i++)
		if (!tool_name(json_array_get(tools, i)))
			return api_error_set(ae, 400, "tools", "tools[%zu].function.name must be a string", i);
	json_t *own = NULL;
	int rc;
	if (json_is_string(choice)) { /* "required" */
		if (n > SRV_MAX_FORCED_TOOLS)
			return api_error_set(ae, 400, "tool_choice",
					     "tool_choice \"required\" supports at most %d tools, got %zu",
					     SRV_MAX_FORCED_TOOLS, n);
		json_t *alts = json_array();
		for (size_t i = 0; alts && i < n; i++) {
			const json_t *t = json_array_get(tools, i);
			json_t *pown = NULL;
			const json_t *params = tool_parameters(t, &pown);
			json_array_append_new(alts, json_pack("{s:s, s:{s:{s:[s]}, s:O}, s:[s,s]}", "type", "object",
							      "properties", "name", "enum", tool_name(t), "parameters",
							      params, "required", "name", "parameters"));
			json_decref(pown);
		}
		own = json_pack("{s:s, s:i, s:{s:o}}", "type", "array", "minItems", 1, "items", "anyOf", alts);
		if (!own)
			return api_error_set(ae, 500, NULL, "out of memory");
		rc = from_schema_value(own, "tool_choice", &out->guide, ae);
		out->forced = SRV_TOOLS_REQUIRED;
	} else {
		const json_t *f = json_object_get(choice, "function");
		const json_t *name = json_is_object(f) ? json_object_get(f, "name") : NULL;
		if (!json_is_string(name))
			return api_error_set(ae, 400, "tool_choice",
					     "tool_choice must be \"none\", \"auto\", \"required\" or "
					     "{\"type\": \"function\", \"function\": {\"name\": ...}}");
		const json_t *tool = NULL;
		for (size_t i = 0; i < n && !tool; i++)
			if (!strcmp(tool_name(json_array_get(tools, i)), json_string_value(name)))
				tool = json_array_get(tools, i);
		if (!tool)
			return api_error_set(ae, 400, "tool_choice",
					     "tool_choice names function '%s', which is not in tools",
					     json_string_value(name));
		rc = from_schema_value(tool_parameters(tool, &own), "tool_choice", &out->guide, ae);
		out->forced = SRV_TOOLS_NAMED;
		out->forced_name = json_string_value(name);
	}
	json_decref(own);
	return rc;
}

int srv_structured_parse(const json_t *body, bool api_chat, struct srv_structured *out, struct api_error *ae)
{
	memset(out, 0, sizeof *out);
	const json_t *gg = json_object_get(body, "guided_grammar");
	const json_t *rf = json_object_get(body, "response_format"), *gj = json_object_get(body, "guided_json");
	const json_t *gc = json_object_get(body, "guided_choice"), *so = json_object_get(body, "structured_outputs");
	const json_t *gr = json_object_get(body, "guided_regex");
	const json_t *tc = api_chat ? json_object_get(body, "tool_choice") : NULL;
	bool forced = tc && (json_is_object(tc) || (json_is_string(tc) && !strcmp(json_string_value(tc), "required")));
	const json_t *rft = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
	bool rf_set = rf && !json_is_null(rf) && !(json_is_string(rft) && !strcmp(json_string_value(rft), "text"));
	int kinds = rf_set + (gj && !json_is_null(gj)) + (gc && !json_is_null(gc)) + (so && !json_is_null(so)) +
		    (gr && !json_is_null(gr)) + (gg && !json_is_null(gg)) + forced;
	if (kinds > 1)
		return api_error_set(ae, 400, NULL,
				     "give only one of response_format, guided_json, guided_choice, guided_regex, "
				     "guided_grammar, structured_outputs and a forced tool_choice");
	int rc = 0;
	if (forced)
		rc = from_tool_choice(tc, json_object_get(body, "tools"), out, ae);
	else if (rf_set)
		rc = from_response_format(rf, &out->guide, ae);
	else if (gj && !json_is_null(gj))
		rc = from_schema_value(gj, "guided_json", &out->guide, ae);
	else if (gc && !json_is_null(gc))
		rc = from_choices(gc, "guided_choice", &out->guide, ae);
	else if (gr && !json_is_null(gr))
		rc = from_text(gr, "guided_regex", guide_from_regex, &out->guide, ae);
	else if (gg && !json_is_null(gg))
		rc = from_text(gg, "guided_grammar", guide_from_ebnf, &out->guide, ae);
	else if (so && !json_is_null(so))
		rc = from_structured_outputs(so, &out->guide, ae);
	if (rc < 0)
		srv_structured_fini(out);
	return rc;
}

void srv_structured_fini(struct srv_structured *s)
{
	guide_unref(s->guide);
	memset(s, 0, sizeof *s);
}
