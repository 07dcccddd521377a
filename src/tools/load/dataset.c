#include "tools/load/dataset.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"

uint64_t bench_rng_u64(struct bench_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double bench_rng_unit(struct bench_rng *r) { return (double)(bench_rng_u64(r) >> 11) * 0x1.0p-53; }

double bench_rng_exp(struct bench_rng *r, double rate)
{
	return -log1p(-bench_rng_unit(r)) / rate; /* 1 - u is in (0, 1]: finite */
}

void bench_prompts_free(struct bench_prompt *p, size_t n)
{
	if (!p)
		return;
	for (size_t i = 0; i < n; i++) {
		free(p[i].text);
		free(p[i].ids);
	}
	free(p);
}

/* Uniform integer in [lo, hi]. */
static int rng_range(struct bench_rng *r, int lo, int hi)
{
	return lo + (int)(bench_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

/* Token pools for random prompts.
 * allowed: ordinary ids (defined, not special — vLLM excludes all_special_ids) that decode on
 *   their own to non-empty valid text (no U+FFFD: a lone byte of a multi-byte character
 *   would become a replacement character and re-tokenize to a different length) and
 *   contain no NUL (many JSON parsers, jansson's default included, reject "\u0000").
 * stable: allowed ids that decode to " " + ASCII letters and re-encode to themselves; the
 *   pre-tokenizer splits before such a word, so appending them changes the length of the
 *   re-encoded text by exactly their number (used to adjust lengths). */
struct pools {
	int32_t *allowed, *stable;
	size_t n_allowed, n_stable;
};

static bool is_word(const char *s, size_t n)
{
	if (n < 2 || s[0] != ' ')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

static void pools_fini(struct pools *p)
{
	free(p->allowed);
	free(p->stable);
}

static int pools_init(const struct tok *t, struct pools *p, struct err *e)
{
	memset(p, 0, sizeof *p);
	int32_t v = tok_vocab_size(t);
	p->allowed = malloc(((size_t)v + 1) * sizeof *p->allowed);
	p->stable = malloc(((size_t)v + 1) * sizeof *p->stable);
	if (!p->allowed || !p->stable) {
		pools_fini(p);
		return err_set(e, "bench: out of memory for a vocab of %d", (int)v);
	}
	for (int32_t id = 0; id < v; id++) {
		if (!tok_id_to_token(t, id) || tok_is_special(t, id))
			continue;
		char *s;
		size_t n;
		if (tok_decode(t, &id, 1, false, &s, &n, e) < 0) {
			pools_fini(p);
			return -1;
		}
		bool ok = n > 0 && !memmem(s, n, "\xef\xbf\xbd", 3) && !memchr(s, 0, n);
		if (ok)
			p->allowed[p->n_allowed++] = id;
		int32_t *re = NULL;
		size_t n_re = 0;
		if (ok && is_word(s, n) && tok_encode(t, s, n, false, &re, &n_re, NULL) == 0 && n_re == 1 &&
		    re[0] == id)
			p->stable[p->n_stable++] = id;
		free(re);
		free(s);
	}
	if (p->n_allowed == 0) {
		pools_fini(p);
		return err_set(e, "bench: the tokenizer has no ordinary (non-special) tokens");
	}
	if (p->n_stable == 0) { /* an unusual vocab: adjust with any ordinary token */
		memcpy(p->stable, p->allowed, p->n_allowed * sizeof *p->stable);
		p->n_stable = p->n_allowed;
	}
	return 0;
}

/* Text whose re-encoding has (ideally) exactly `target` tokens, starting from ids[0..target).
 * Takes ownership of ids. Like vLLM's gen_prompt_decode_to_target_len: decode, re-encode,
 * adjust, repeat (at most 10 adjustments). Too short by d: append d stable words. Too long:
 * cut the re-encoded ids two tokens below the target (the cut may fall inside a character
 * or a merge) and refill with stable words. */
static int fit_text(const struct tok *t, struct bench_rng *rng, const struct pools *pl, int32_t *ids, int target,
		    struct bench_prompt *p, struct err *e)
{
	size_t n = (size_t)target;
	char *text = NULL;
	int32_t *re = NULL;
	size_t n_re = 0, len = 0;
	for (int tries = 0;; tries++) {
		free(text);
		text = NULL;
		if (tok_decode(t, ids, n, false, &text, &len, e) < 0 ||
		    tok_encode(t, text, len, false, &re, &n_re, e) < 0)
			goto fail;
		free(ids);
		ids = re;
		re = NULL;
		if (n_re == (size_t)target || tries == 10)
			break;
		size_t keep = n_re < (size_t)target ? n_re : (size_t)(target > 2 ? target - 2 : 0);
		int32_t *g = realloc(ids, (size_t)target * sizeof *g);
		if (!g) {
			err_set(e, "bench: out of memory");
			goto fail;
		}
		ids = g;
		for (size_t i = keep; i < (size_t)target; i++)
			ids[i] = pl->stable[bench_rng_u64(rng) % pl->n_stable];
		n = (size_t)target;
	}
	free(ids);
	p->text = text;
	p->text_len = len;
	p->input_len = (int)n_re;
	return 0;
fail:
	free(ids);
	free(text);
	return -1;
}

int bench_prompts_random(const struct tok *t, const struct bench_random_opts *o, size_t n, struct bench_prompt **out,
			 size_t *n_mismatch, struct err *e)
{
	*out = NULL;
	*n_mismatch = 0;
	if (o->input_len < 1 || o->output_len < 1)
		return err_set(e, "bench: random input/output lengths must be >= 1, got %d/%d", o->input_len,
			       o->output_len);
	if (!(o->range_ratio >= 0 && o->range_ratio < 1))
		return err_set(e, "bench: --random-range-ratio must be in [0, 1), got %g", o->range_ratio);
	struct pools pl;
	if (pools_init(t, &pl, e) < 0)
		return -1;
	struct bench_prompt *p = calloc(n + 1, sizeof *p);
	if (!p) {
		pools_fini(&pl);
		return err_set(e, "bench: out of memory for %zu prompts", n);
	}
	struct bench_rng rng = {o->seed};
	int in_lo = (int)floor(o->input_len * (1 - o->range_ratio));
	int in_hi = (int)ceil(o->input_len * (1 + o->range_ratio));
	int out_lo = (int)floor(o->output_len * (1 - o->range_ratio));
	int out_hi = (int)ceil(o->output_len * (1 + o->range_ratio));
	in_lo = in_lo < 1 ? 1 : in_lo;
	out_lo = out_lo < 1 ? 1 : out_lo;
	for (size_t i = 0; i < n; i++) {
		int in_len = rng_range(&rng, in_lo, in_hi);
		p[i].output_len = rng_range(&rng, out_lo, out_hi);
		int32_t *ids = malloc((size_t)in_len * sizeof *ids);
		if (!ids) {
			err_set(e, "bench: out of memory for a prompt of %d tokens", in_len);
			goto fail;
		}
		for (int j = 0; j < in_len; j++)
			ids[j] = pl.allowed[bench_rng_u64(&rng) % pl.n_allowed];
		if (o->as_ids) { /* exact: the server takes the ids as they are */
			p[i].ids = ids;
			p[i].n_ids = (size_t)in_len;
			p[i].input_len = in_len;
			continue;
		}
		if (fit_text(t, &rng, &pl, ids, in_len, &p[i], e) < 0) {
			err_prefix(e, "bench: random prompt %zu", i);
			goto fail;
		}
		*n_mismatch += p[i].input_len != in_len;
	}
	pools_fini(&pl);
	*out = p;
	return 0;
fail:
	pools_fini(&pl);
	bench_prompts_free(p, n);
	return -1;
}

static int read_jsonl(const char *path, int default_output_len, const struct tok *t, struct bench_prompt **out,
		      size_t *count, struct err *e)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return err_set(e, "%s: cannot open: %s", path, strerror(errno));
	struct bench_prompt *p = NULL;
	size_t n = 0, cap = 0, lineno = 0, lcap = 0;
	char *line = NULL;
	ssize_t len;
	int rc = -1;
	while ((len = getline(&line, &lcap, f)) >= 0) {
		lineno++;
		size_t l = (size_t)len;
		while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r' || line[l - 1] == ' '))
			l--;
		if (l == 0)
			continue;
		json_error_t je;
		json_t *o = json_loadb(line, l, 0, &je);
		const json_t *pr = json_object_get(o, "prompt");
		const json_t *ol = json_object_get(o, "output_len");
		if (!o) {
			err_set(e, "%s:%zu: %s", path, lineno, je.text);
			goto out;
		}
		if (!json_is_string(pr) || json_string_length(pr) == 0) {
			json_decref(o);
			err_set(e, "%s:%zu: expected an object with a non-empty string \"prompt\"", path, lineno);
			goto out;
		}
		if (ol && (!json_is_integer(ol) || json_integer_value(ol) < 1 || json_integer_value(ol) > 1 << 30)) {
			json_decref(o);
			err_set(e, "%s:%zu: \"output_len\" must be a positive integer", path, lineno);
			goto out;
		}
		if (n == cap) {
			size_t c = cap ? 2 * cap : 64;
			struct bench_prompt *q = realloc(p, c * sizeof *q);
			if (!q) {
				json_decref(o);
				err_set(e, "%s: out of memory", path);
				goto out;
			}
			p = q;
			cap = c;
		}
		struct bench_prompt *b = &p[n];
		memset(b, 0, sizeof *b);
		b->output_len = ol ? (int)json_integer_value(ol) : default_output_len;
		b->input_len = -1;
		b->text = strndup(json_string_value(pr), json_string_length(pr));
		b->text_len = json_string_length(pr);
		n++;
		if (!b->text) {
			json_decref(o);
			err_set(e, "%s: out of memory", path);
			goto out;
		}
		if (t) {
			int32_t *ids = NULL;
			size_t n_ids = 0;
			if (tok_encode(t, b->text, json_string_length(pr), false, &ids, &n_ids, e) < 0) {
				json_decref(o);
				err_prefix(e, "%s:%zu", path, lineno);
				goto out;
			}
			free(ids);
			b->input_len = (int)n_ids;
		}
		json_decref(o);
	}
	if (ferror(f)) {
		err_set(e, "%s: read error: %s", path, strerror(errno));
		goto out;
	}
	if (n == 0) {
		err_set(e, "%s: no prompts in the file", path);
		goto out;
	}
	rc = 0;
out:
	free(line);
	fclose(f);
	if (rc < 0) {
		bench_prompts_free(p, n);
		return rc;
	}
	*out = p;
	*count = n;
	return 0;
}

int bench_prompts_jsonl(const char *path, const struct tok *t, int default_output_len, size_t n,
			struct bench_prompt **out, struct err *e)
{
	*out = NULL;
	struct bench_prompt *file;
	size_t n_file;
	if (read_jsonl(path, default_output_len, t, &file, &n_file, e) < 0)
		return -1;
	struct bench_prompt *p = calloc(n + 1, sizeof *p);
	if (!p) {
		bench_prompts_free(file, n_file);
		return err_set(e, "%s: out of memory for %zu prompts", path, n);
	}
	for (size_t i = 0; i < n; i++) {
		const struct bench_prompt *s = &file[i % n_file];
		p[i] = *s;
		p[i].text = strndup(s->text, s->text_len);
		if (!p[i].text) {
			bench_prompts_free(file, n_file);
			bench_prompts_free(p, n);
			return err_set(e, "%s: out of memory", path);
		}
	}
	bench_prompts_free(file, n_file);
	*out = p;
	return 0;
}

char *bench_request_body(const struct bench_body_opts *o, const struct bench_prompt *p)
{
	json_t *b = json_object();
	if (!b)
		return NULL;
	int bad = json_object_set_new(b, "model", json_string(o->model));
	if (o->chat) {
		json_t *msg = json_pack("{s:s, s:s#}", "role", "user", "content", p->text ? p->text : "",
					p->text ? p->text_len : 0);
		bad |= json_object_set_new(b, "messages", json_pack("[o]", msg));
	} else if (p->text) {
		bad |= json_object_set_new(b, "prompt", json_stringn(p->text, p->text_len));
	} else {
		json_t *ids = json_array();
		for (size_t i = 0; ids && i < p->n_ids; i++)
			bad |= json_array_append_new(ids, json_integer(p->ids[i]));
		bad |= json_object_set_new(b, "prompt", ids);
	}
	bad |= json_object_set_new(b, "max_tokens", json_integer(p->output_len));
	bad |= json_object_set_new(b, "temperature", json_real(o->temperature));
	bad |= json_object_set_new(b, "stream", json_true());
	bad |= json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
	if (o->ignore_eos)
		bad |= json_object_set_new(b, "ignore_eos", json_true());
	char *s = bad ? NULL : json_dumps(b, JSON_COMPACT);
	json_decref(b);
	return s;
}
