/* JSON Schema → guide nodes (guide/grammar.h). */
#include "guide/grammar.h"

#include "base/grow.h"
#include "guide/cfg.h"
#include "guide/dfa_ops.h"
#include "guide/formats.h"
#include "guide/lark.h"
#include "guide/number_dfa.h"
#include "guide/regex_dfa.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ref_memo {
	const json_t *target;
	int node;
};

struct compile {
	struct guide_grammar *g;
	const json_t *root;
	const char *what;
	struct ref_memo *memo;
	int n_memo, cap_memo;
	int depth;
};

static int node_new(struct guide_grammar *g, enum guide_kind k, struct err *e)
{
	if (g->n_nodes >= GUIDE_MAX_NODES)
		return err_set(e, "the schema needs more than %d nodes", GUIDE_MAX_NODES);
	struct guide_node *grown = grow_array(g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *grown);
	if (!grown)
		return err_set(e, "out of memory");
	g->nodes = grown;
	struct guide_node *n = &g->nodes[g->n_nodes];
	memset(n, 0, sizeof *n);
	n->kind = k;
	n->additional = -1;
	n->items = GUIDE_NODE_ANY;
	n->max_items = -1;
	n->max_len = -1;
	return g->n_nodes++;
}

static int literal_new(struct guide_grammar *g, const char *text, size_t len, struct err *e)
{
	int i = node_new(g, GUIDE_LITERAL, e);
	if (i < 0)
		return -1;
	char *t = malloc(len + 1);
	if (!t)
		return err_set(e, "out of memory");
	memcpy(t, text, len);
	t[len] = 0;
	g->nodes[i].text = t;
	g->nodes[i].len = len;
	return i;
}

static int anyof_new(struct guide_grammar *g, int n_alts, struct err *e)
{
	int i = node_new(g, GUIDE_ANYOF, e);
	if (i < 0)
		return -1;
	g->nodes[i].alts = calloc((size_t)(n_alts ? n_alts : 1), sizeof(int));
	if (!g->nodes[i].alts)
		return err_set(e, "out of memory");
	return i;
}

static struct guide_grammar *grammar_new(const char *what, struct err *e)
{
	struct guide_grammar *g = calloc(1, sizeof *g);
	if (!g || !(g->what = strdup(what))) {
		free(g);
		err_set(e, "out of memory");
		return NULL;
	}
	atomic_init(&g->refs, 1);
	static atomic_uint_fast64_t next_id = 1;
	g->id = (uint64_t)atomic_fetch_add(&next_id, 1);
	int any = anyof_new(g, GUIDE_NODE_FIXED - 1, e);
	if (any != GUIDE_NODE_ANY || literal_new(g, "true", 4, e) < 0 || literal_new(g, "false", 5, e) < 0 ||
	    literal_new(g, "null", 4, e) < 0 || node_new(g, GUIDE_OBJECT, e) < 0 || node_new(g, GUIDE_ARRAY, e) < 0 ||
	    node_new(g, GUIDE_STRING, e) < 0 || node_new(g, GUIDE_NUMBER, e) < 0) {
		guide_unref(g);
		return NULL;
	}
	g->nodes[GUIDE_NODE_ANY_OBJECT].additional = GUIDE_NODE_ANY;
	for (int i = 1; i < GUIDE_NODE_FIXED; i++)
		g->nodes[GUIDE_NODE_ANY].alts[g->nodes[GUIDE_NODE_ANY].n_alts++] = i;
	return g;
}

struct guide_grammar *guide_ref(struct guide_grammar *g)
{
	if (g)
		atomic_fetch_add(&g->refs, 1);
	return g;
}

void guide_unref(struct guide_grammar *g)
{
	if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	for (int i = 0; i < g->n_nodes; i++) {
		struct guide_node *n = &g->nodes[i];
		for (int k = 0; k < n->n_props; k++)
			free(n->keys[k]);
		free(n->keys);
		free(n->key_len);
		free(n->prop);
		free(n->text);
		free(n->alts);
		free(n->prefix);
		guide_dfa_free(n->dfa);
		free(n->lit);
		free(n->reach);
		cfg_free(n->cfg);
	}
	free(g->nodes);
	free(g->what);
	free(g);
}

/* ---- the schema subset ---- */

static const char *const annotations[] = {"title",           "description", "default",     "examples",
					  "$schema",         "$id",         "$comment",    "deprecated",
					  "readOnly",        "writeOnly",   "format",      "contentMediaType",
					  "contentEncoding", "$defs",       "definitions", NULL};
static const char *const constraints[] = {"type",
					  "properties",
					  "required",
					  "additionalProperties",
					  "items",
					  "minItems",
					  "maxItems",
					  "minLength",
					  "maxLength",
					  "pattern",
					  "enum",
					  "const",
					  "minimum",
					  "maximum",
					  "exclusiveMinimum",
					  "exclusiveMaximum",
					  "anyOf",
					  "oneOf",
					  "allOf",
					  "$ref",
					  "prefixItems",
					  "multipleOf",
					  "uniqueItems",
					  NULL};

static bool in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

static int compile(struct compile *c, const json_t *s, const char *path, struct err *e);

static int get_count(const json_t *s, const char *key, const char *path, int *out, struct err *e)
{
	const json_t *v = json_object_get(s, key);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
		return err_set(e, "%s.%s must be an integer in [0, 1000000]", path, key);
	*out = (int)json_integer_value(v);
	return 0;
}

/* "#", "#/$defs/NAME", any "#/a/b" JSON pointer into the root schema */
static const json_t *resolve_ref(const json_t *root, const char *ref)
{
	if (ref[0] != '#')
		return NULL;
	const json_t *cur = root;
	const char *p = ref + 1;
	while (*p == '/') {
		p++;
		char name[256];
		size_t n = 0;
		for (; *p && *p != '/'; p++) {
			char ch = *p;
			if (ch == '~' && (p[1] == '0' || p[1] == '1'))
				ch = *++p == '0' ? '~' : '/';
			if (n + 1 >= sizeof name)
				return NULL;
			name[n++] = ch;
		}
		name[n] = 0;
		cur = json_is_object(cur) ? json_object_get(cur, name) : NULL;
		if (!cur)
			return NULL;
	}
	return *p ? NULL : cur;
}

static int compile_ref(struct compile *c, const char *ref, const char *path, struct err *e)
{
	const json_t *t = resolve_ref(c->root, ref);
	if (!t)
		return err_set(e, "%s.$ref: cannot resolve '%s' (only local references like '#/$defs/Name')", path,
			       ref);
	for (int i = 0; i < c->n_memo; i++)
		if (c->memo[i].target == t)
			return c->memo[i].node;
	/* placed before compiling the target so that a recursive reference finds it: a one-way
	 * anyOf that forwards to the compiled node */
	int fwd = anyof_new(c->g, 1, e);
	if (fwd < 0)
		return -1;
	struct ref_memo *m = grow_array(c->memo, &c->cap_memo, c->n_memo + 1, sizeof *m);
	if (!m)
		return err_set(e, "out of memory");
	c->memo = m;
	c->memo[c->n_memo++] = (struct ref_memo){t, fwd};
	int n = compile(c, t, ref, e);
	if (n < 0)
		return -1;
	c->g->nodes[fwd].alts[0] = n;
	c->g->nodes[fwd].n_alts = 1;
	return fwd;
}

/* a GUIDE_REGEX node that owns dfa (freed on failure) */
static int dfa_node(struct guide_grammar *g, struct guide_dfa *dfa, struct err *e)
{
	int i = node_new(g, GUIDE_REGEX, e);
	if (i < 0)
		guide_dfa_free(dfa);
	else
		g->nodes[i].dfa = dfa;
	return i;
}

/* enum: the values' compact JSON texts as one trie-shaped DFA (not an anyOf of literals, whose
 * alternatives sharing a first byte the matcher could only follow GUIDE_MAX_ALTS of) */
static int enum_node(struct guide_grammar *g, const json_t *en, const char *path, struct err *e)
{
	int n = (int)json_array_size(en), rc = -1;
	char **t = calloc((size_t)n, sizeof *t);
	size_t *len = calloc((size_t)n, sizeof *len);
	struct guide_dfa *dfa;
	bool oom = !t || !len;
	for (int i = 0; !oom && i < n; i++) {
		oom = !(t[i] = json_dumps(json_array_get(en, (size_t)i), JSON_COMPACT | JSON_ENCODE_ANY));
		len[i] = oom ? 0 : strlen(t[i]);
	}
	if (oom)
		err_set(e, "out of memory");
	else if (guide_dfa_literals((const char *const *)t, len, n, &dfa, e) < 0)
		err_prefix(e, "%s.enum", path);
	else if ((rc = dfa_node(g, dfa, e)) >= 0)
		g->nodes[rc].enum_values = n;
	for (int i = 0; t && i < n; i++)
		free(t[i]);
	free(t);
	free(len);
	return rc;
}

/* For uniqueItems: the number of distinct values of the enum that node k is (through $ref
 * forwards), with its lit and reach tables built; -1 when k is not an enum of at most 64 */
static int unique_values(struct guide_grammar *g, int k)
{
	while (k >= 0 && g->nodes[k].kind == GUIDE_ANYOF && g->nodes[k].n_alts == 1)
		k = g->nodes[k].alts[0];
	struct guide_node *n = k >= 0 ? &g->nodes[k] : NULL;
	if (!n || n->kind != GUIDE_REGEX || !n->enum_values)
		return -1;
	const struct guide_dfa *d = n->dfa;
	int values = 0;
	for (int s = 0; s < d->n_states; s++)
		values += d->accept[s];
	if (values > 64)
		return -1;
	if (n->reach)
		return values;
	n->lit = malloc((size_t)d->n_states);
	n->reach = calloc((size_t)d->n_states, sizeof *n->reach);
	if (!n->lit || !n->reach)
		return -1;
	for (int s = 0, v = 0; s < d->n_states; s++)
		n->lit[s] = (int8_t)(d->accept[s] ? v++ : -1);
	for (int s = d->n_states - 1; s >= 0; s--) { /* a trie: every child after its parent */
		n->reach[s] = n->lit[s] >= 0 ? (uint64_t)1 << n->lit[s] : 0;
		for (int c = 0; c < 256; c++) {
			int32_t t = d->next[(size_t)s * 256 + (size_t)c];
			if (t > s)
				n->reach[s] |= n->reach[t];
		}
	}
	return values;
}

static int compile_literal_json(struct compile *c, const json_t *v, struct err *e)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!t)
		return err_set(e, "out of memory");
	int i = literal_new(c->g, t, strlen(t), e);
	free(t);
	return i;
}

static int compile_object(struct compile *c, const json_t *s, const char *path, struct err *e)
{
	const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	const json_t *add = json_object_get(s, "additionalProperties");
	if (props && !json_is_object(props))
		return err_set(e, "%s.properties must be an object", path);
	if (req && !json_is_array(req))
		return err_set(e, "%s.required must be an array of names", path);
	if (add && !json_is_boolean(add) && !json_is_object(add))
		return err_set(e, "%s.additionalProperties must be a boolean or a schema", path);
	int np = props ? (int)json_object_size(props) : 0;
	if (np > GUIDE_MAX_PROPS)
		return err_set(e, "%s.properties: at most %d properties are supported, got %d", path, GUIDE_MAX_PROPS,
			       np);
	int i = node_new(c->g, GUIDE_OBJECT, e);
	if (i < 0)
		return -1;
	if (np == 0) {
		int a = GUIDE_NODE_ANY;
		if (json_is_false(add))
			a = -1;
		else if (json_is_object(add) && (a = compile(c, add, "additionalProperties", e)) < 0)
			return -1;
		c->g->nodes[i].additional = a;
		if (req && json_array_size(req) > 0)
			return err_set(e, "%s.required names keys that %s.properties does not define", path, path);
		return i;
	}
	char **keys = calloc((size_t)np, sizeof *keys);
	size_t *kl = calloc((size_t)np, sizeof *kl);
	int *pn = calloc((size_t)np, sizeof *pn);
	struct guide_node *n = &c->g->nodes[i];
	n->keys = keys;
	n->key_len = kl;
	n->prop = pn;
	if (!keys || !kl || !pn)
		return err_set(e, "out of memory");
	n->n_props = np;
	const char *key;
	const json_t *v;
	int k = 0;
	json_object_foreach((json_t *)props, key, v)
	{
		json_t *ks = json_string(key);
		keys[k] = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
		json_decref(ks);
		if (!keys[k])
			return err_set(e, "%s.properties: key is not valid UTF-8", path);
		kl[k] = strlen(keys[k]);
		char sub[160];
		snprintf(sub, sizeof sub, "%.80s.properties.%.60s", path, key);
		int p = compile(c, v, sub, e); /* may move c->g->nodes */
		if (p < 0)
			return -1;
		pn[k++] = p;
	}
	uint64_t required = 0;
	for (size_t r = 0; req && r < json_array_size(req); r++) {
		const json_t *name = json_array_get(req, r);
		int found = -1;
		k = 0;
		json_object_foreach((json_t *)props, key, v)
		{
			if (json_is_string(name) && !strcmp(key, json_string_value(name)))
				found = k;
			k++;
		}
		if (found < 0)
			return err_set(e, "%s.required[%zu] is not a key of %s.properties", path, r, path);
		required |= (uint64_t)1 << found;
	}
	c->g->nodes[i].required = required;
	return i;
}

static int compile_type(struct compile *c, const json_t *s, const char *type, const char *path, struct err *e)
{
	if (!strcmp(type, "object"))
		return compile_object(c, s, path, e);
	if (!strcmp(type, "array")) {
		const json_t *items = json_object_get(s, "items"), *pre = json_object_get(s, "prefixItems");
		if (pre && (!json_is_array(pre) || json_array_size(pre) > 256))
			return err_set(e, "%s.prefixItems must be a list of at most 256 schemas", path);
		int np = pre ? (int)json_array_size(pre) : 0, it = GUIDE_NODE_ANY;
		int *prefix = np ? calloc((size_t)np, sizeof *prefix) : NULL;
		if (np && !prefix)
			return err_set(e, "out of memory");
		char sub[160];
		for (int k = 0; k < np; k++) {
			snprintf(sub, sizeof sub, "%.130s.prefixItems[%d]", path, k);
			if ((prefix[k] = compile(c, json_array_get(pre, (size_t)k), sub, e)) < 0) {
				free(prefix);
				return -1;
			}
		}
		if (json_is_false(items)) {
			it = -1; /* no items past the prefix */
		} else if (items && !json_is_true(items)) {
			snprintf(sub, sizeof sub, "%.140s.items", path);
			if (!json_is_object(items) || (it = compile(c, items, sub, e)) < 0) {
				free(prefix);
				return json_is_object(items)
					       ? -1
					       : err_set(e, "%s.items must be a schema or a boolean", path);
			}
		}
		int mn = 0, mx = -1;
		if (get_count(s, "minItems", path, &mn, e) < 0 || get_count(s, "maxItems", path, &mx, e) < 0) {
			free(prefix);
			return -1;
		}
		if (mx >= 0 && mx < mn) {
			free(prefix);
			return err_set(e, "%s: maxItems %d is below minItems %d", path, mx, mn);
		}
		if (it < 0 && (mx < 0 || mx > np))
			mx = np;
		if (mx >= 0 && mx < mn) {
			free(prefix);
			return err_set(e, "%s: items false leaves %d items, fewer than minItems %d", path, mx, mn);
		}
		/* uniqueItems: over an enum's values (pydantic's set of an Enum or Literal), the
		 * items then at most that many; trivially with at most one item */
		const json_t *uq = json_object_get(s, "uniqueItems");
		bool unique = json_is_true(uq) && (mx < 0 || mx > 1);
		int values = unique && !np ? unique_values(c->g, it) : -1;
		if ((uq && !json_is_boolean(uq)) || (unique && values < 0) || (unique && mn > values)) {
			free(prefix);
			if (uq && !json_is_boolean(uq))
				return err_set(e, "%s.uniqueItems must be a boolean", path);
			if (values < 0)
				return err_set(e,
					       "%s.uniqueItems: supported when items is an enum of at most 64 values, "
					       "without prefixItems (or when maxItems is 1)",
					       path);
			return err_set(e, "%s: uniqueItems with minItems %d, but items has %d values", path, mn,
				       values);
		}
		if (unique && (mx < 0 || mx > values))
			mx = values;
		int i = node_new(c->g, GUIDE_ARRAY, e);
		if (i < 0) {
			free(prefix);
			return -1;
		}
		c->g->nodes[i].unique = unique;
		c->g->nodes[i].items = it;
		c->g->nodes[i].min_items = mn;
		c->g->nodes[i].max_items = mx;
		c->g->nodes[i].n_prefix = np;
		c->g->nodes[i].prefix = prefix;
		return i;
	}
	if (!strcmp(type, "string")) {
		int mn = 0, mx = -1;
		if (get_count(s, "minLength", path, &mn, e) < 0 || get_count(s, "maxLength", path, &mx, e) < 0)
			return -1;
		if (mx >= 0 && mx < mn)
			return err_set(e, "%s: maxLength %d is below minLength %d", path, mx, mn);
		const json_t *pat = json_object_get(s, "pattern");
		if (pat && !json_is_string(pat))
			return err_set(e, "%s.pattern must be a string", path);
		struct guide_dfa *dfa = NULL;
		if (pat && guide_dfa_compile(json_string_value(pat), json_string_length(pat), &dfa, e) < 0)
			return err_prefix(e, "%s.pattern", path);
		const char *fre = pat ? NULL : guide_format_regex(json_string_value(json_object_get(s, "format")));
		if (fre && guide_dfa_compile(fre, strlen(fre), &dfa, e) < 0)
			return err_prefix(e, "%s.format", path);
		int i = node_new(c->g, GUIDE_STRING, e);
		if (i < 0) {
			guide_dfa_free(dfa);
			return -1;
		}
		c->g->nodes[i].min_len = mn;
		c->g->nodes[i].max_len = mx;
		c->g->nodes[i].dfa = dfa;
		return i;
	}
	if (!strcmp(type, "number") || !strcmp(type, "integer")) {
		bool integer = !strcmp(type, "integer");
		struct guide_dfa *dfa;
		if (guide_number_dfa(s, path, integer, &dfa, e) < 0)
			return -1;
		int i = node_new(c->g, dfa ? GUIDE_REGEX : integer ? GUIDE_INTEGER : GUIDE_NUMBER, e);
		if (i < 0) {
			guide_dfa_free(dfa);
			return -1;
		}
		c->g->nodes[i].dfa = dfa;
		return i;
	}
	if (!strcmp(type, "boolean")) {
		int i = anyof_new(c->g, 2, e);
		if (i < 0)
			return -1;
		c->g->nodes[i].alts[0] = GUIDE_NODE_TRUE;
		c->g->nodes[i].alts[1] = GUIDE_NODE_FALSE;
		c->g->nodes[i].n_alts = 2;
		return i;
	}
	if (!strcmp(type, "null"))
		return GUIDE_NODE_NULL;
	return err_set(e, "%s.type: unknown type '%s'", path, type);
}

static int compile(struct compile *c, const json_t *s, const char *path, struct err *e)
{
	if (json_is_true(s))
		return GUIDE_NODE_ANY;
	if (!json_is_object(s))
		return err_set(e, "%s must be a JSON Schema object (or true)", path);
	if (++c->depth > 64) {
		c->depth--;
		return err_set(e, "%s: the schema is nested more than 64 levels deep", path);
	}
	int r = -1;
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)s, key, v)
	{
		if (!in_list(annotations, key) && !in_list(constraints, key)) {
			err_set(e, "%s: keyword '%s' is not supported", path, key);
			goto out;
		}
	}
	const json_t *ref = json_object_get(s, "$ref"), *en = json_object_get(s, "enum");
	const json_t *cn = json_object_get(s, "const"), *type = json_object_get(s, "type");
	const json_t *any = json_object_get(s, "anyOf");
	if (!any)
		any = json_object_get(s, "oneOf");
	const json_t *all = json_object_get(s, "allOf");
	const char *alone = ref   ? "$ref"
			    : any ? (json_object_get(s, "anyOf") ? "anyOf" : "oneOf")
			    : all ? "allOf"
				  : NULL;
	json_object_foreach((json_t *)s, key, v)
	{
		if (alone && strcmp(key, alone) && in_list(constraints, key)) {
			err_set(e, "%s: '%s' together with '%s' is not supported (move it into the alternatives)",
				path, alone, key);
			goto out;
		}
	}
	if (ref) {
		if (!json_is_string(ref))
			err_set(e, "%s.$ref must be a string", path);
		else
			r = compile_ref(c, json_string_value(ref), path, e);
	} else if (all && !any) { /* pydantic's {"allOf": [{"$ref": ...}], "description": ...} */
		if (!json_is_array(all) || json_array_size(all) != 1)
			err_set(e, "%s.allOf: only a list of one schema is supported", path);
		else {
			char sub[160];
			snprintf(sub, sizeof sub, "%.140s.allOf[0]", path);
			r = compile(c, json_array_get(all, 0), sub, e);
		}
	} else if (cn) {
		r = compile_literal_json(c, cn, e);
	} else if (en) {
		size_t n = json_is_array(en) ? json_array_size(en) : 0;
		if (!n) {
			err_set(e, "%s.enum must be a non-empty array", path);
			goto out;
		}
		r = enum_node(c->g, en, path, e);
	} else if (any) {
		size_t n = json_is_array(any) ? json_array_size(any) : 0;
		if (!n || n > GUIDE_MAX_ALTS) {
			err_set(e, "%s.anyOf must be a list of 1 to %d schemas (an enum takes any number of values)",
				path, GUIDE_MAX_ALTS);
			goto out;
		}
		int a = anyof_new(c->g, (int)n, e);
		for (size_t i = 0; a >= 0 && i < n; i++) {
			char sub[160];
			snprintf(sub, sizeof sub, "%.130s.anyOf[%zu]", path, i);
			int l = compile(c, json_array_get(any, i), sub, e);
			if (l < 0)
				goto out;
			c->g->nodes[a].alts[c->g->nodes[a].n_alts++] = l;
		}
		r = a;
	} else if (json_is_string(type)) {
		r = compile_type(c, s, json_string_value(type), path, e);
	} else if (json_is_array(type)) {
		size_t n = json_array_size(type);
		int a = n ? anyof_new(c->g, (int)n, e) : err_set(e, "%s.type must not be empty", path);
		for (size_t i = 0; a >= 0 && i < n; i++) {
			const json_t *t = json_array_get(type, i);
			if (!json_is_string(t)) {
				err_set(e, "%s.type[%zu] must be a type name", path, i);
				goto out;
			}
			int l = compile_type(c, s, json_string_value(t), path, e);
			if (l < 0)
				goto out;
			c->g->nodes[a].alts[c->g->nodes[a].n_alts++] = l;
		}
		r = a;
	} else if (type) {
		err_set(e, "%s.type must be a type name or a list of them", path);
	} else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
		   json_object_get(s, "required")) {
		r = compile_type(c, s, "object", path, e);
	} else if (json_object_get(s, "items")) {
		r = compile_type(c, s, "array", path, e);
	} else {
		r = GUIDE_NODE_ANY;
	}
out:
	c->depth--;
	return r;
}

int guide_from_schema(const json_t *schema, const char *what, struct guide_grammar **out, struct err *e)
{
	*out = NULL;
	if (json_is_false(schema))
		return err_set(e, "%s is false: no output can match it", what);
	struct guide_grammar *g = grammar_new("json_schema", e);
	if (!g)
		return -1;
	struct compile c = {.g = g, .root = schema, .what = what};
	int r = compile(&c, schema, what, e);
	free(c.memo);
	if (r < 0) {
		guide_unref(g);
		return -1;
	}
	g->root = r;
	*out = g;
	return 0;
}

int guide_from_json_object(struct guide_grammar **out, struct err *e)
{
	*out = NULL;
	struct guide_grammar *g = grammar_new("json_object", e);
	if (!g)
		return -1;
	g->root = GUIDE_NODE_ANY_OBJECT;
	*out = g;
	return 0;
}

int guide_from_choices(const char *const *choices, const size_t *lens, int n, struct guide_grammar **out,
		       struct err *e)
{
	*out = NULL;
	if (n < 1)
		return err_set(e, "the list of choices is empty");
	for (int i = 0; i < n; i++)
		if (!lens[i])
			return err_set(e, "choice %d is empty", i);
	struct guide_dfa *dfa;
	if (guide_dfa_literals(choices, lens, n, &dfa, e) < 0)
		return -1;
	struct guide_grammar *g = grammar_new("choice", e);
	int r = g ? dfa_node(g, dfa, e) : (guide_dfa_free(dfa), -1);
	if (r < 0) {
		guide_unref(g);
		return -1;
	}
	g->root = r;
	*out = g;
	return 0;
}

/* A grammar of one raw-text node at the root, owning dfa or cfg (freed on failure). */
static int single_root(const char *what, enum guide_kind kind, struct guide_dfa *dfa, struct guide_cfg *cfg,
		       struct guide_grammar **out, struct err *e)
{
	struct guide_grammar *g = grammar_new(what, e);
	int r = g ? node_new(g, kind, e) : -1;
	if (r < 0) {
		guide_dfa_free(dfa);
		cfg_free(cfg);
		guide_unref(g);
		return -1;
	}
	g->nodes[r].dfa = dfa;
	g->nodes[r].cfg = cfg;
	g->root = r;
	*out = g;
	return 0;
}

int guide_from_regex(const char *re, size_t len, struct guide_grammar **out, struct err *e)
{
	*out = NULL;
	struct guide_dfa *dfa;
	if (guide_dfa_compile(re, len, &dfa, e) < 0)
		return -1;
	return single_root("regex", GUIDE_REGEX, dfa, NULL, out, e);
}

int guide_from_ebnf(const char *text, size_t len, struct guide_grammar **out, struct err *e)
{
	*out = NULL;
	struct guide_cfg *cfg;
	if (lark_likely(text, len)) {
		char *ebnf;
		size_t n;
		if (lark_translate(text, len, &ebnf, &n, e) < 0)
			return -1;
		int rc = cfg_compile_ex(ebnf, n, CFG_REGEX_TERMS, &cfg, e);
		free(ebnf);
		if (rc < 0)
			return -1;
	} else if (cfg_compile(text, len, &cfg, e) < 0) {
		return -1;
	}
	return single_root("grammar", GUIDE_CFG, NULL, cfg, out, e);
}
