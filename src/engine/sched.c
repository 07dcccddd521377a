/* vLLM V1 scheduler (docs/reference.md B.2/B.3/B.6). */
#include "engine/sched.h"

#include <stdlib.h>
#include <string.h>

struct sched {
	struct sched_config c;
	struct block_pool *pool;
	struct sched_req **running; /* [max_num_seqs] admission order */
	int n_running;
	struct sched_req *wait_head, *wait_tail;
	int n_waiting;
	struct sched_req **out; /* [max_num_seqs] this step's output */
	int32_t *hit;           /* [max_model_len / block_size + 1] */
	struct sched_counters cnt;
	uint64_t n_arrivals;
};

int sched_req_init(struct sched_req *r, uint64_t id, const int32_t *prompt, int n_prompt, int max_len, int block_size,
		   struct err *e)
{
	memset(r, 0, sizeof *r);
	if (n_prompt < 1 || n_prompt > max_len)
		return err_set(e, "request %llu: prompt of %d tokens does not fit %d", (unsigned long long)id,
			       n_prompt, max_len);
	r->tokens = malloc(sizeof *r->tokens * (size_t)max_len);
	if (!r->tokens)
		return err_set(e, "request %llu: out of memory", (unsigned long long)id);
	if (kv_seq_init(&r->kv, max_len, block_size, e) < 0) {
		free(r->tokens);
		r->tokens = NULL;
		return -1;
	}
	memcpy(r->tokens, prompt, sizeof *prompt * (size_t)n_prompt);
	r->id = id;
	r->n_prompt = r->n_tokens = n_prompt;
	r->max_len = max_len;
	r->n_cached = -1;
	r->max_tokens = max_len - n_prompt;
	r->eos = -1;
	r->stop_token = -1;
	r->status = SREQ_WAITING;
	return 0;
}

void sched_req_fini(struct sched_req *r)
{
	free(r->tokens);
	kv_seq_fini(&r->kv);
	r->tokens = NULL;
}

int sched_new(const struct sched_config *c, struct block_pool *pool, struct sched **out, struct err *e)
{
	if (c->max_num_seqs < 1 || c->max_num_batched_tokens < 1 || c->max_model_len < 2)
		return err_set(e,
			       "scheduler: bad limits (max_num_seqs %d, max_num_batched_tokens %d, max_model_len %d)",
			       c->max_num_seqs, c->max_num_batched_tokens, c->max_model_len);
	struct sched *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(e, "scheduler: out of memory");
	s->c = *c;
	s->pool = pool;
	s->running = calloc((size_t)c->max_num_seqs, sizeof *s->running);
	s->out = calloc((size_t)c->max_num_seqs, sizeof *s->out);
	s->hit = calloc((size_t)(c->max_model_len / blocks_size(pool) + 2), sizeof *s->hit);
	if (!s->running || !s->out || !s->hit) {
		sched_free(s);
		return err_set(e, "scheduler: out of memory");
	}
	*out = s;
	return 0;
}

void sched_free(struct sched *s)
{
	if (!s)
		return;
	free(s->running);
	free(s->out);
	free(s->hit);
	free(s);
}

/* ---- waiting deque ---- */

/* r goes right after p (p NULL: at the head) */
static void wait_insert_after(struct sched *s, struct sched_req *p, struct sched_req *r)
{
	r->prev = p;
	r->next = p ? p->next : s->wait_head;
	if (r->next)
		r->next->prev = r;
	else
		s->wait_tail = r;
	if (p)
		p->next = r;
	else
		s->wait_head = r;
	s->n_waiting++;
}

static bool before(const struct sched_req *a, const struct sched_req *b)
{
	return a->priority != b->priority ? a->priority < b->priority : a->arrival < b->arrival;
}

/* The priority policy's queue: ordered by (priority, arrival), found from the back (new
 * arrivals mostly belong there) */
static void wait_insert_ordered(struct sched *s, struct sched_req *r)
{
	struct sched_req *p = s->wait_tail;
	while (p && before(r, p))
		p = p->prev;
	wait_insert_after(s, p, r);
}

static void wait_remove(struct sched *s, struct sched_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		s->wait_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		s->wait_tail = r->prev;
	r->prev = r->next = NULL;
	s->n_waiting--;
}

static void running_remove_at(struct sched *s, int i)
{
	memmove(&s->running[i], &s->running[i + 1], sizeof *s->running * (size_t)(s->n_running - i - 1));
	s->n_running--;
}

static int running_index(const struct sched *s, const struct sched_req *r)
{
	for (int i = 0; i < s->n_running; i++)
		if (s->running[i] == r)
			return i;
	return -1;
}

void sched_add(struct sched *s, struct sched_req *r)
{
	r->status = SREQ_WAITING;
	r->arrival = s->n_arrivals++;
	if (s->c.priority)
		wait_insert_ordered(s, r);
	else
		wait_insert_after(s, s->wait_tail, r);
}

void sched_finish(struct sched *s, struct sched_req *r, enum engine_finish why)
{
	if (r->status == SREQ_FINISHED)
		return;
	if (r->status == SREQ_RUNNING) {
		int i = running_index(s, r);
		CHECK(i >= 0);
		running_remove_at(s, i);
	} else {
		wait_remove(s, r);
	}
	blocks_free_seq(s->pool, &r->kv);
	r->status = SREQ_FINISHED;
	r->finish = why;
}

/* Recompute preemption (B.3): free everything, back to the head of the queue (under the
 * priority policy: back to its place by (priority, arrival)). */
static void preempt(struct sched *s, struct sched_req *r)
{
	blocks_free_seq(s->pool, &r->kv);
	r->status = SREQ_PREEMPTED;
	r->n_computed = 0;
	r->n_spec = 0;
	r->n_preemptions++;
	s->cnt.preemptions++;
	if (s->c.priority)
		wait_insert_ordered(s, r);
	else
		wait_insert_after(s, NULL, r);
}

/* The running request to preempt: the most recently admitted, or under the priority
 * policy the one with the largest (priority, arrival) */
static int victim_index(const struct sched *s)
{
	int v = s->n_running - 1;
	for (int k = 0; s->c.priority && k < s->n_running; k++)
		if (before(s->running[v], s->running[k]))
			v = k;
	return v;
}

/* Slots past `covered` (the positions computed once this step ran) that r's blocks must
 * hold: when r decodes next (the step computes all its known tokens, or all but the last,
 * as deepseek_mtp drafts from then on), never past r->max_len. */
static int lookahead(const struct sched *s, const struct sched_req *r, int covered)
{
	if (s->c.lookahead <= 0 || covered < r->n_tokens - 1)
		return 0;
	int la = r->max_len - covered;
	return la < s->c.lookahead ? (la > 0 ? la : 0) : s->c.lookahead;
}

/* r's tokens whose KV is computed once the step ran `covered` positions */
static int known(const struct sched_req *r, int covered) { return covered < r->n_tokens ? covered : r->n_tokens; }

void sched_step(struct sched *s, struct sched_output *o)
{
	int budget = s->c.max_num_batched_tokens;
	int n_out = 0, n_preempted = 0;
	int chunked = s->c.chunk_budget > 0 ? s->c.chunk_budget : 1 << 30; /* left this step */
	/* 1. running requests, in admission order */
	for (int i = 0; i < s->n_running && budget > 0;) {
		struct sched_req *r = s->running[i];
		int n = r->n_tokens + r->n_spec - r->n_computed;
		if (r->max_chunk > 0 && n > r->max_chunk)
			n = r->max_chunk;
		if (r->max_chunk > 0 && n > chunked)
			n = chunked;
		if (n > budget)
			n = budget;
		if (n > s->c.max_model_len - 1 - r->n_computed)
			n = s->c.max_model_len - 1 - r->n_computed;
		if (n <= 0) {
			i++;
			continue;
		}
		bool ok = false;
		int la = lookahead(s, r, r->n_computed + n);
		for (;;) {
			/* only blocks of positions this step computes are registered, not the lookahead */
			if (blocks_allocate(s->pool, &r->kv, r->tokens, known(r, r->n_computed + n), r->n_computed,
					    n + la, NULL, 0) == 0) {
				ok = true;
				break;
			}
			/* out of blocks: the victim goes, scheduled already this step or not (FCFS
			 * never picks a scheduled one: it is the last admitted) */
			int vi = victim_index(s);
			struct sched_req *v = s->running[vi];
			running_remove_at(s, vi);
			if (vi < i)
				i--; /* r moved down one place */
			for (int k = 0; k < n_out; k++)
				if (s->out[k] == v) {
					budget += v->n_sched;
					if (v->max_chunk > 0)
						chunked += v->n_sched;
					memmove(&s->out[k], &s->out[k + 1], sizeof *s->out * (size_t)(n_out - k - 1));
					n_out--;
					break;
				}
			preempt(s, v);
			n_preempted++;
			if (v == r)
				break;
		}
		if (!ok)
			break;
		r->n_sched = n;
		r->step_start = r->n_computed;
		if (r->max_chunk > 0)
			chunked -= n;
		/* the drafts that fit the budget (the last known token comes first) */
		r->n_spec = r->n_computed + n > r->n_tokens ? r->n_computed + n - r->n_tokens : 0;
		s->out[n_out++] = r;
		budget -= n;
		i++;
	}
	/* 2. waiting requests, FCFS, only if nothing was preempted */
	if (n_preempted == 0) {
		while (s->wait_head && budget > 0 && s->n_running < s->c.max_num_seqs) {
			struct sched_req *r = s->wait_head;
			int n_hit = 0;
			if (r->n_computed == 0 && !r->no_prefix_hit)
				n_hit = blocks_find_cached(s->pool, &r->kv, r->tokens, r->n_tokens, s->hit);
			if (n_hit > 0 && s->c.drop_last_hit)
				n_hit--;
			while (n_hit > 0 && s->c.hit_ends_ok && !s->c.hit_ends_ok(s->c.hit_ctx, s->hit[n_hit - 1]))
				n_hit--;
			int n_cached = n_hit * blocks_size(s->pool);
			int n = r->n_tokens - n_cached;
			if (r->max_chunk > 0 && n > r->max_chunk)
				n = r->max_chunk;
			if (r->max_chunk > 0 && n > chunked)
				n = chunked;
			if (n <= 0)
				break; /* FCFS: the next waits for the next step */
			if (n > budget)
				n = budget;
			if (blocks_allocate(s->pool, &r->kv, r->tokens, known(r, n_cached + n), 0,
					    n + lookahead(s, r, n_cached + n), s->hit, n_hit) < 0)
				break; /* no KV space: stop admitting (no skipping ahead) */
			wait_remove(s, r);
			r->n_spec = 0;
			s->running[s->n_running++] = r;
			r->status = SREQ_RUNNING;
			r->n_computed = n_cached;
			if (r->n_cached < 0)
				r->n_cached = n_cached;
			s->cnt.prefix_queries += (uint64_t)r->n_tokens;
			s->cnt.prefix_hits += (uint64_t)n_cached;
			r->n_sched = n;
			r->step_start = n_cached;
			s->out[n_out++] = r;
			budget -= n;
			if (r->max_chunk > 0)
				chunked -= n;
		}
	}
	/* 3. advance num_computed right away (_update_after_schedule) */
	int total = 0;
	for (int k = 0; k < n_out; k++) {
		s->out[k]->n_computed += s->out[k]->n_sched;
		total += s->out[k]->n_sched;
	}
	o->n = n_out;
	o->reqs = s->out;
	o->total_tokens = total;
	o->n_preempted = n_preempted;
	if (n_out > 0)
		s->cnt.steps++;
}

struct finish_in sched_req_finish_in(const struct sched *s, const struct sched_req *r, int n_out)
{
	return (struct finish_in){.tok = r->tokens[r->n_prompt + n_out - 1],
				  .n_out = n_out,
				  .n_tokens = r->n_prompt + n_out,
				  .max_len = r->max_len,
				  .max_model_len = s->c.max_model_len,
				  .max_tokens = r->max_tokens,
				  .min_tokens = r->min_tokens,
				  .ignore_eos = r->ignore_eos,
				  .eos = r->eos,
				  .stop_ids = r->stop_ids,
				  .n_stop_ids = r->n_stop_ids};
}

/* Appends n tokens to r up to the first that stops it; true if r finished. */
static bool append_tokens(struct sched *s, struct sched_req *r, const int32_t *tok, int n)
{
	for (int j = 0; j < n; j++) {
		CHECK(r->n_tokens < r->max_len);
		r->tokens[r->n_tokens++] = tok[j];
		struct finish_in in = sched_req_finish_in(s, r, sched_req_n_output(r));
		struct finish_verdict v = finish_check(&in);
		if (v.why != ENGINE_FINISH_NONE) {
			r->stop_token = v.stop_token;
			sched_finish(s, r, v.why);
			return true;
		}
	}
	/* rejected drafts: their KV rows are stale and get recomputed from here */
	if (r->n_computed > r->n_tokens - 1)
		r->n_computed = r->n_tokens - 1;
	r->n_spec = 0;
	return false;
}

int sched_update(struct sched *s, const struct sched_output *o, const int32_t *sampled)
{
	int n_finished = 0;
	for (int k = 0; k < o->n; k++) {
		struct sched_req *r = o->reqs[k];
		if (r->status != SREQ_RUNNING || sampled[k] < 0)
			continue;
		n_finished += append_tokens(s, r, &sampled[k], 1);
	}
	return n_finished;
}

bool sched_req_append(struct sched *s, struct sched_req *r, const int32_t *tok, int n)
{
	return r->status == SREQ_RUNNING && n > 0 && append_tokens(s, r, tok, n);
}

int sched_update_n(struct sched *s, const struct sched_output *o, const int32_t *sampled, int stride,
		   const int32_t *n_sampled)
{
	int n_finished = 0;
	for (int k = 0; k < o->n; k++)
		n_finished += sched_req_append(s, o->reqs[k], sampled + (size_t)k * (size_t)stride, n_sampled[k]);
	return n_finished;
}

int sched_n_running(const struct sched *s) { return s->n_running; }
int sched_n_waiting(const struct sched *s) { return s->n_waiting; }
struct sched_req *sched_waiting_head(const struct sched *s) { return s->wait_head; }
void sched_counters_get(const struct sched *s, struct sched_counters *c) { *c = s->cnt; }
