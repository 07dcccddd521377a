/* Token trie and allowed-token masks (guide/vocab.h). */
#include "guide/vocab.h"

#include "base/grow.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"

#define MAX_TOKEN_BYTES 1024 /* longer tokens are never allowed */

enum { STR_NEVER, STR_CONTENT, STR_QUOTE };

/* The masks of recent states. A walk where most of the vocabulary fits (a grammar's or a
 * regex's free-text class) visits the whole trie, tens of ms for 100K tokens, and such outputs
 * come back to the same state token after token (the class repeated: the same frames). The
 * key is the grammar's id, the state's live frames and the EOS ids, compared whole. */
#define MASK_CACHE 8

struct mask_entry {
	uint64_t gid, hash, used; /* used 0: empty */
	size_t len;
	uint8_t *key;   /* [KEY_MAX], the first len bytes used */
	uint8_t *allow; /* [vocab] */
	int count;
};

struct trie_node {
	int32_t child, sibling, first_tok; /* -1: none */
	uint8_t byte;
};

struct guide_vocab {
	const struct tok *t;
	int vocab;
	/* trie: node 0 is the root */
	int n_nodes, cap_nodes;
	struct trie_node *nodes;
	int32_t *tok_next; /* [vocab] the next token ending at the same node */
	int max_len;
	/* Inside a JSON string (the top frame plain) most tokens are allowed and the walk would
	 * visit the whole trie (milliseconds per token): instead each token is classified once
	 * from the state right after an opening quote: string content only (allowed while the
	 * string's maxLength leaves room for its characters), refused there, or holding a
	 * closing quote (run through the matcher). */
	uint8_t *str_class;  /* [vocab] STR_* */
	uint16_t *str_chars; /* [vocab] characters of a STR_CONTENT token */
	int32_t *quoted;     /* ids of the STR_QUOTE tokens */
	int n_quoted;
	struct jm_state *st; /* [max_len + 1] walk scratch */
	uint8_t *allow;      /* the caller's, during a walk */
	int count;
	struct mask_entry cache[MASK_CACHE];
	uint64_t clock;
	uint8_t *keybuf; /* a state's key being built (KEY_MAX bytes) */
};

#define KEY_MAX (sizeof(int) * (2 + JM_MAX_ALTS + 8) + sizeof(struct jm_frame) * JM_MAX_ALTS * JM_MAX_DEPTH)

static int node_add(struct guide_vocab *v, uint8_t b, struct err *e)
{
	struct trie_node *n = grow_array(v->nodes, &v->cap_nodes, v->n_nodes + 1, sizeof *n);
	if (!n)
		return err_set(e, "guided decoding: out of memory for the token trie");
	v->nodes = n;
	n[v->n_nodes] = (struct trie_node){.child = -1, .sibling = -1, .first_tok = -1, .byte = b};
	return v->n_nodes++;
}

/* str_class / str_chars / quoted (see struct guide_vocab), by running each token through the
 * matcher of a lone string from its opening quote */
static int classify_string_tokens(struct guide_vocab *v, int n, struct err *e)
{
	v->str_class = calloc((size_t)v->vocab, 1);
	v->str_chars = calloc((size_t)v->vocab, sizeof *v->str_chars);
	v->quoted = malloc(sizeof *v->quoted * (size_t)(v->vocab > 0 ? v->vocab : 1));
	json_t *schema = json_pack("{s:s}", "type", "string");
	struct guide_grammar *g = NULL;
	int rc = v->str_class && v->str_chars && v->quoted && schema ? guide_from_schema(schema, "string", &g, e) : -1;
	json_decref(schema);
	if (rc < 0)
		return -1;
	struct jm_state open, s;
	jm_init(&open, g);
	jm_feed(&open, g, '"');
	for (int32_t id = 0; id < n; id++) {
		size_t len;
		const char *p = tok_id_bytes(v->t, id, &len);
		if (!p || !len || len > MAX_TOKEN_BYTES || tok_is_special(v->t, id))
			continue;
		jm_copy(&s, &open);
		uint8_t c = STR_CONTENT;
		for (size_t i = 0; i < len && c == STR_CONTENT; i++) {
			const struct jm_frame *f = &s.s[0].f[s.s[0].depth - 1];
			if (p[i] == '"' && f->st == 0 && !f->need)
				c = STR_QUOTE;
			else if (!jm_feed(&s, g, (uint8_t)p[i]))
				c = STR_NEVER;
		}
		v->str_class[id] = c;
		if (c == STR_CONTENT) {
			uint32_t chars = s.s[0].f[s.s[0].depth - 1].n;
			v->str_chars[id] = chars > 65535 ? 65535 : (uint16_t)chars;
		} else if (c == STR_QUOTE) {
			v->quoted[v->n_quoted++] = id;
		}
	}
	guide_unref(g);
	return 0;
}

int guide_vocab_new(const struct tok *t, int vocab, struct guide_vocab **out, struct err *e)
{
	*out = NULL;
	if (!tok_decode_concatenates(t))
		return err_set(e, "guided decoding needs a byte-level tokenizer (this decoder treats the first token "
				  "apart or joins tokens with spaces)");
	struct guide_vocab *v = calloc(1, sizeof *v);
	if (!v)
		return err_set(e, "guided decoding: out of memory");
	v->t = t;
	v->vocab = vocab;
	v->tok_next = malloc(sizeof *v->tok_next * (size_t)(vocab > 0 ? vocab : 1));
	if (!v->tok_next || node_add(v, 0, e) < 0)
		goto fail;
	int n = tok_vocab_size(t) < vocab ? tok_vocab_size(t) : vocab;
	for (int32_t id = 0; id < n; id++) {
		size_t len;
		const char *p = tok_id_bytes(t, id, &len);
		if (!p || !len || len > MAX_TOKEN_BYTES || tok_is_special(t, id))
			continue;
		int cur = 0;
		for (size_t i = 0; i < len; i++) {
			uint8_t b = (uint8_t)p[i];
			int c = v->nodes[cur].child;
			while (c >= 0 && v->nodes[c].byte != b)
				c = v->nodes[c].sibling;
			if (c < 0) {
				if ((c = node_add(v, b, e)) < 0)
					goto fail;
				v->nodes[c].sibling = v->nodes[cur].child;
				v->nodes[cur].child = c;
			}
			cur = c;
		}
		v->tok_next[id] = v->nodes[cur].first_tok;
		v->nodes[cur].first_tok = id;
		if ((int)len > v->max_len)
			v->max_len = (int)len;
	}
	v->st = malloc(sizeof *v->st * (size_t)(v->max_len + 1));
	v->keybuf = malloc(KEY_MAX);
	bool cache_ok = true; /* allocated here: a step's mask allocates nothing */
	for (int i = 0; i < MASK_CACHE; i++) {
		v->cache[i].key = malloc(KEY_MAX);
		v->cache[i].allow = malloc((size_t)v->vocab + 1);
		cache_ok &= v->cache[i].key && v->cache[i].allow;
	}
	if (!v->st || !v->keybuf || !cache_ok || classify_string_tokens(v, n, e) < 0) {
		err_set(e, "guided decoding: out of memory");
		goto fail;
	}
	*out = v;
	return 0;
fail:
	guide_vocab_free(v);
	return -1;
}

void guide_vocab_free(struct guide_vocab *v)
{
	if (!v)
		return;
	free(v->nodes);
	free(v->tok_next);
	free(v->str_class);
	free(v->str_chars);
	free(v->quoted);
	free(v->st);
	for (int i = 0; i < MASK_CACHE; i++) {
		free(v->cache[i].key);
		free(v->cache[i].allow);
	}
	free(v->keybuf);
	free(v);
}

/* the children of node at depth d, from state st[d] */
static void walk(struct guide_vocab *v, const struct guide_grammar *g, int node, int d)
{
	for (int c = v->nodes[node].child; c >= 0; c = v->nodes[c].sibling) {
		jm_copy(&v->st[d + 1], &v->st[d]);
		if (!jm_feed(&v->st[d + 1], g, v->nodes[c].byte))
			continue;
		for (int32_t id = v->nodes[c].first_tok; id >= 0; id = v->tok_next[id]) {
			v->allow[id] = 1;
			v->count++;
		}
		if (v->nodes[c].child >= 0)
			walk(v, g, c, d + 1);
	}
}

/* every alternative inside a string without a pattern, between characters (a string frame is
 * never the root frame f[0], whose node may be a string not begun yet) */
static bool in_plain_string(const struct guide_grammar *g, const struct jm_state *s)
{
	for (int i = 0; i < s->n; i++) {
		const struct jm_frame *f = &s->s[i].f[s->s[i].depth - 1];
		if (s->s[i].depth < 2 || g->nodes[f->node].kind != GUIDE_STRING || g->nodes[f->node].dfa ||
		    f->st != 0 || f->need)
			return false;
	}
	return s->n > 0;
}

/* the walk's result for in_plain_string states, from the classes */
static void string_mask(struct guide_vocab *v, const struct guide_grammar *g, const struct jm_state *s)
{
	long room = -1; /* characters any alternative still takes; -1: unbounded */
	for (int i = 0; i < s->n && room != LONG_MAX; i++) {
		const struct jm_frame *f = &s->s[i].f[s->s[i].depth - 1];
		int mx = g->nodes[f->node].max_len;
		long r = mx < 0 ? LONG_MAX : (long)mx - (long)f->n;
		if (r > room)
			room = r;
	}
	for (int32_t id = 0; id < v->vocab; id++)
		if (v->str_class[id] == STR_CONTENT && v->str_chars[id] <= room) {
			v->allow[id] = 1;
			v->count++;
		}
	for (int i = 0; i < v->n_quoted; i++) {
		int32_t id = v->quoted[i];
		size_t len;
		const char *p = tok_id_bytes(v->t, id, &len);
		jm_copy(&v->st[0], s);
		if (jm_feed_bytes(&v->st[0], g, (const uint8_t *)p, len)) {
			v->allow[id] = 1;
			v->count++;
		}
	}
}

/* the key of (s, eos) in v->keybuf; its length */
static size_t state_key(struct guide_vocab *v, const struct jm_state *s, const int32_t *eos, int n_eos)
{
	uint8_t *k = v->keybuf;
	size_t n = 0;
	int ne = n_eos < 8 ? n_eos : 8;
	memcpy(k + n, &ne, sizeof ne), n += sizeof ne;
	memcpy(k + n, eos, sizeof *eos * (size_t)ne), n += sizeof *eos * (size_t)ne;
	memcpy(k + n, &s->n, sizeof s->n), n += sizeof s->n;
	for (int i = 0; i < s->n; i++) {
		memcpy(k + n, &s->s[i].depth, sizeof(int)), n += sizeof(int);
		memcpy(k + n, s->s[i].f, sizeof *s->s[i].f * (size_t)s->s[i].depth);
		n += sizeof *s->s[i].f * (size_t)s->s[i].depth;
	}
	return n;
}

static uint64_t key_hash(const uint8_t *k, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ k[i]) * 1099511628211ull;
	return h;
}

static void cache_put(struct guide_vocab *v, uint64_t gid, uint64_t h, size_t len, const uint8_t *allow, int count)
{
	struct mask_entry *c = &v->cache[0];
	for (int i = 1; i < MASK_CACHE; i++) /* the least recently used (an empty one first) */
		if (v->cache[i].used < c->used)
			c = &v->cache[i];
	memcpy(c->key, v->keybuf, len);
	memcpy(c->allow, allow, (size_t)v->vocab);
	c->gid = gid;
	c->hash = h;
	c->len = len;
	c->count = count;
	c->used = ++v->clock;
}

void guide_vocab_cache_clear(struct guide_vocab *v)
{
	for (int i = 0; i < MASK_CACHE; i++)
		v->cache[i].used = 0;
}

int guide_vocab_mask(struct guide_vocab *v, const struct guide_grammar *g, const struct jm_state *s,
		     const int32_t *eos, int n_eos, uint8_t *allow)
{
	size_t klen = state_key(v, s, eos, n_eos);
	uint64_t h = key_hash(v->keybuf, klen);
	for (int i = 0; i < MASK_CACHE; i++) {
		struct mask_entry *c = &v->cache[i];
		if (c->used && c->gid == g->id && c->hash == h && c->len == klen && !memcmp(c->key, v->keybuf, klen)) {
			memcpy(allow, c->allow, (size_t)v->vocab);
			c->used = ++v->clock;
			return c->count;
		}
	}
	memset(allow, 0, (size_t)v->vocab);
	v->allow = allow;
	v->count = 0;
	jm_copy(&v->st[0], s);
	if (in_plain_string(g, s))
		string_mask(v, g, s);
	else if (!jm_finished(s, g))
		walk(v, g, 0, 0);
	if (jm_complete(s, g))
		for (int i = 0; i < n_eos; i++)
			if (eos[i] >= 0 && eos[i] < v->vocab && !allow[eos[i]]) {
				allow[eos[i]] = 1;
				v->count++;
			}
	v->allow = NULL;
	cache_put(v, g->id, h, klen, allow, v->count);
	return v->count;
}

bool guide_vocab_advance(const struct guide_vocab *v, const struct guide_grammar *g, struct jm_state *s, int32_t id)
{
	size_t len = 0;
	const char *p = id >= 0 && id < v->vocab ? tok_id_bytes(v->t, id, &len) : NULL;
	if (!p || tok_is_special(v->t, id))
		return true; /* EOS / special: no bytes (the request ends on it) */
	return jm_feed_bytes(s, g, (const uint8_t *)p, len);
}
