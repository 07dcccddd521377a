/* mlaserve dist-check: checks the distributed layer on the ranks it runs on (like
 * nccl-tests): group layout, every collective the forward uses, step-plan broadcast, and a
 * DCP decode attention (sharded KV, q all-gather, LSE all-gather + correction,
 * reduce-scatter) against the single-process result. Every rank computes the expected
 * values locally from deterministic inputs, so the check needs no trusted communication.
 * --hold keeps the ranks idle in the plan wait (rank 0 until SIGTERM/SIGINT or the time
 * is up), for measuring idle CPU and rank clean-up. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn/dcp.h"
#include "setup/cli_util.h"
#include "app/commands.h"
#include "dist/comm.h"
#include "dist/launch.h"

static volatile sig_atomic_t stop_signal; /* set by the SIGTERM/SIGINT handler (rank 0) */

static void on_stop_signal(int sig) { stop_signal = sig; }

/* Deterministic value in [-1, 1) from three keys (every rank can compute every rank's). */
static float hval(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^
		     (c + 0x2545f4914f6cdd1dull) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	x *= 0xd6e8feb86659fd6dull;
	x ^= x >> 29;
	return (float)((double)(x >> 11) / (double)(1ull << 52) - 1.0);
}

/* Small half-integers: sums are exact in any order, so results must match bit for bit. */
static float exact_val(int rank, int i, int salt)
{
	return (float)((int)((hval((uint32_t)rank, (uint32_t)i, (uint32_t)salt) + 1.0f) * 16) - 16) * 0.5f;
}

struct check {
	struct comm *c;
	int n_fail, n_pass;
	char first[256];
};

/* Combines one check's per-rank result over the world; rank 0 prints it. */
static void report(struct check *k, const char *name, int bad, const char *detail)
{
	float f = bad ? 1.0f : 0.0f;
	struct err e;
	if (comm_tp_allreduce_sum(k->c, &f, 1, &e)) {
		fprintf(stderr, "dist-check: %s: %s\n", name, e.msg);
		f = 1;
	}
	if (f > 0) {
		k->n_fail++;
		if (k->c->world_rank == 0 || bad)
			printf("dist-check: FAIL %s (%d ranks)%s%s\n", name, (int)f, bad ? ": " : "",
			       bad ? detail : "");
	} else {
		k->n_pass++;
		if (k->c->world_rank == 0)
			printf("dist-check: PASS %s\n", name);
	}
	fflush(stdout);
}

static void check_layout(struct check *k)
{
	struct comm *c = k->c;
	struct err e;
	char why[ERR_MSG_MAX + 96] = "";
	int bad = 0;
	int ones[64];
	for (int j = 0; j < 64; j++)
		ones[j] = 1;
	float me = (float)c->world_rank, *got = calloc((size_t)c->tp_size, sizeof *got);
	if (!got || comm_tp_gather_cols(c, &me, 1, ones, got, true, &e)) {
		snprintf(why, sizeof why, "tp gather: %s", got ? e.msg : "oom");
		bad = 1;
	}
	for (int j = 0; !bad && j < c->tp_size; j++)
		if (got[j] != (float)(c->tp_group * c->tp_size + j)) {
			snprintf(why, sizeof why, "tp member %d is world rank %g", j, got[j]);
			bad = 1;
		}
	float *dg = calloc((size_t)c->dcp_size, sizeof *dg);
	if (!bad && (!dg || comm_dcp_allgather(c, &me, 1, dg, &e))) {
		snprintf(why, sizeof why, "dcp gather: %s", dg ? e.msg : "oom");
		bad = 1;
	}
	for (int j = 0; !bad && j < c->dcp_size; j++)
		if (dg[j] != (float)(c->dcp_group * c->dcp_size + j)) {
			snprintf(why, sizeof why, "dcp member %d is world rank %g", j, dg[j]);
			bad = 1;
		}
	free(got);
	free(dg);
	report(k, "group layout (tp groups and dcp groups of consecutive ranks)", bad, why);
}

static void check_allreduce(struct check *k, size_t n)
{
	struct comm *c = k->c;
	struct err e;
	char why[ERR_MSG_MAX + 96] = "", name[96];
	int bad = 0;
	float *b = malloc(n * sizeof *b);
	if (!b) {
		report(k, "tp all-reduce", 1, "oom");
		return;
	}
	for (size_t i = 0; i < n; i++)
		b[i] = exact_val(c->world_rank, (int)i, 1);
	if (comm_tp_allreduce_sum(c, b, n, &e)) {
		snprintf(why, sizeof why, "%s", e.msg);
		bad = 1;
	}
	for (size_t i = 0; !bad && i < n; i++) {
		float want = 0;
		for (int j = 0; j < c->tp_size; j++)
			want += exact_val(c->tp_group * c->tp_size + j, (int)i, 1);
		if (b[i] != want) {
			snprintf(why, sizeof why, "element %zu: %g, expected %g", i, b[i], want);
			bad = 1;
		}
	}
	free(b);
	snprintf(name, sizeof name, "tp all-reduce sum of %zu floats", n);
	report(k, name, bad, why);
}

static void check_gathers(struct check *k)
{
	struct comm *c = k->c;
	struct err e;
	int W = c->dcp_size, base = c->dcp_group * W, bad = 0;
	char why[ERR_MSG_MAX + 96] = "";
	enum { NO = 5, NI = 13 };
	float send[NO * NI], *recv = malloc((size_t)W * NO * NI * sizeof *recv);
	for (int i = 0; i < NO * NI; i++)
		send[i] = hval((uint32_t)c->world_rank, (uint32_t)i, 2);
	/* leading dimension: [W, n] */
	if (!recv || comm_dcp_allgather(c, send, NO * NI, recv, &e)) {
		snprintf(why, sizeof why, "%s", recv ? e.msg : "oom");
		bad = 1;
	}
	for (int j = 0; !bad && j < W; j++)
		for (int i = 0; i < NO * NI; i++)
			if (recv[j * NO * NI + i] != hval((uint32_t)(base + j), (uint32_t)i, 2)) {
				snprintf(why, sizeof why, "rank %d element %d", j, i);
				bad = 1;
				break;
			}
	report(k, "dcp all-gather along a leading dimension", bad, why);
	/* inner dimension: [NO, NI] -> [NO, W, NI] */
	bad = 0;
	if (!recv || comm_dcp_allgather_inner(c, send, NO, NI, recv, &e)) {
		snprintf(why, sizeof why, "%s", recv ? e.msg : "oom");
		bad = 1;
	}
	for (int o = 0; !bad && o < NO; o++)
		for (int j = 0; j < W && !bad; j++)
			for (int i = 0; i < NI; i++)
				if (recv[(o * W + j) * NI + i] !=
				    hval((uint32_t)(base + j), (uint32_t)(o * NI + i), 2)) {
					snprintf(why, sizeof why, "row %d rank %d col %d", o, j, i);
					bad = 1;
					break;
				}
	report(k, "dcp all-gather along heads ([T, H, d] -> [T, W*H, d])", bad, why);
	/* reduce-scatter: [NO, W, NI] -> [NO, NI] summed over ranks, own slice */
	bad = 0;
	float *rs = malloc((size_t)W * NO * NI * sizeof *rs), out[NO * NI];
	for (int i = 0; rs && i < W * NO * NI; i++)
		rs[i] = exact_val(c->world_rank, i, 3);
	if (!rs || comm_dcp_reduce_scatter_inner(c, rs, NO, NI, out, &e)) {
		snprintf(why, sizeof why, "%s", rs ? e.msg : "oom");
		bad = 1;
	}
	for (int o = 0; !bad && o < NO; o++)
		for (int i = 0; i < NI; i++) {
			float want = 0;
			for (int j = 0; j < W; j++)
				want += exact_val(base + j, (o * W + c->dcp_rank) * NI + i, 3);
			if (out[o * NI + i] != want) {
				snprintf(why, sizeof why, "row %d col %d: %g, expected %g", o, i, out[o * NI + i],
					 want);
				bad = 1;
				break;
			}
		}
	report(k, "dcp reduce-scatter sum over heads ([T, W*H, d] -> [T, H, d])", bad, why);
	free(rs);
	free(recv);
}

/* Vocab-parallel style: a column-parallel projection whose uneven column slices are
 * gathered, and a row-parallel one whose partial sums are all-reduced. */
static void check_parallel_linear(struct check *k, bool to_all)
{
	struct comm *c = k->c;
	struct err e;
	int T = c->tp_size, bad = 0;
	char why[ERR_MSG_MAX + 96] = "";
	enum { R = 3, K = 24, N = 103 };
	int cols[64], col0 = 0;
	for (int j = 0; j < T; j++)
		cols[j] = N / T + (j < N % T);
	for (int j = 0; j < c->tp_rank; j++)
		col0 += cols[j];
	float x[R * K], part[R * N], full[R * N];
	for (int i = 0; i < R * K; i++)
		x[i] = hval(7, (uint32_t)i, 4);
	int me = cols[c->tp_rank];
	for (int r = 0; r < R; r++)
		for (int n = 0; n < me; n++) {
			float s = 0;
			for (int i = 0; i < K; i++)
				s += x[r * K + i] * hval(8, (uint32_t)i, (uint32_t)(col0 + n));
			part[r * me + n] = s;
		}
	bool receives = to_all || c->tp_rank == 0;
	if (comm_tp_gather_cols(c, part, R, cols, receives ? full : NULL, to_all, &e)) {
		snprintf(why, sizeof why, "%s", e.msg);
		bad = 1;
	}
	for (int r = 0; !bad && receives && r < R; r++)
		for (int n = 0; n < N; n++) {
			float s = 0;
			for (int i = 0; i < K; i++)
				s += x[r * K + i] * hval(8, (uint32_t)i, (uint32_t)n);
			if (full[r * N + n] != s) { /* same operation order: bit-exact */
				snprintf(why, sizeof why, "logit [%d, %d]: %g, expected %g", r, n, full[r * N + n], s);
				bad = 1;
				break;
			}
		}
	report(k,
	       to_all ? "tp gather of uneven column slices (to all ranks)"
		      : "tp gather of uneven column slices (to rank 0)",
	       bad, why);
	if (to_all)
		return;
	/* row-parallel: rank j holds rows [j*K/T...) of the weight; all-reduce the partials */
	bad = 0;
	int k0 = c->tp_rank * K / T, k1 = (c->tp_rank + 1) * K / T;
	for (int r = 0; r < R; r++)
		for (int n = 0; n < N; n++) {
			float s = 0;
			for (int i = k0; i < k1; i++)
				s += x[r * K + i] * hval(8, (uint32_t)i, (uint32_t)n);
			part[r * N + n] = s;
		}
	if (comm_tp_allreduce_sum(c, part, R * N, &e)) {
		snprintf(why, sizeof why, "%s", e.msg);
		bad = 1;
	}
	for (int r = 0; !bad && r < R; r++)
		for (int n = 0; n < N; n++) {
			double s = 0;
			for (int i = 0; i < K; i++)
				s += (double)x[r * K + i] * hval(8, (uint32_t)i, (uint32_t)n);
			if (fabs(part[r * N + n] - s) > 1e-5 * (1 + fabs(s))) {
				snprintf(why, sizeof why, "out [%d, %d]: %g, expected %g", r, n, part[r * N + n], s);
				bad = 1;
				break;
			}
		}
	report(k, "row-parallel linear + tp all-reduce vs single process", bad, why);
}

static void check_plans(struct check *k)
{
	struct comm *c = k->c;
	struct err e;
	static const size_t sizes[] = {0, 1, 100, 4072, 4073, 4096, 10000, 300001};
	int bad = 0;
	char why[ERR_MSG_MAX + 96] = "";
	struct comm_msg m = {0};
	/* every rank agrees to go on before any broadcast; a failure later is recorded but the
	 * loop goes on: every rank must join every broadcast */
	float oom = c->world_rank == 0 && comm_msg_reserve(&m, 300002, &e) ? 1.0f : 0.0f;
	if (comm_tp_allreduce_sum(c, &oom, 1, &e) || oom > 0) {
		comm_msg_free(&m);
		report(k, "step-plan broadcast", 1, "cannot allocate the plan buffer");
		return;
	}
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		size_t n = sizes[s];
		int fail = 0;
		if (c->world_rank == 0) {
			for (size_t i = 0; i < n; i++)
				m.data[i] = (uint8_t)(i * 31 + n);
			fail = comm_plan_send(c, m.data, n, &e) != 0;
		} else {
			int rc = comm_plan_recv(c, &m, &e);
			if (rc != 1) {
				if (rc == 0)
					snprintf(e.msg, sizeof e.msg, "unexpected stop");
				fail = 1;
			} else if (m.len != n) {
				snprintf(e.msg, sizeof e.msg, "plan %zu has %zu bytes", n, m.len);
				fail = 1;
			}
			for (size_t i = 0; !fail && i < n; i++)
				if (m.data[i] != (uint8_t)(i * 31 + n)) {
					snprintf(e.msg, sizeof e.msg, "plan %zu byte %zu", n, i);
					fail = 1;
				}
		}
		if (fail && !bad)
			snprintf(why, sizeof why, "%s", e.msg);
		bad |= fail;
	}
	comm_msg_free(&m);
	report(k, "step-plan broadcast (0 B .. 300 KB, inline and split)", bad, why);
}

/* Reference attention of one (sequence, head) over the keys listed by pos[n]: the MQA decode
 * path of docs/mla-dcp.md §2.6 (score = q . row, value = the first D of the row). */
static void attend(const float *q, int row, int D, float scale, int n, const int *pos, const float *kv, float *out,
		   float *lse)
{
	double m = -INFINITY, s = 0;
	for (int j = 0; j < n; j++) {
		double d = 0;
		for (int i = 0; i < row; i++)
			d += (double)q[i] * kv[(size_t)pos[j] * row + i];
		d *= scale;
		if (d > m) {
			s = s * exp(m - d) + 1;
			m = d;
		} else {
			s += exp(d - m);
		}
	}
	for (int i = 0; i < D; i++) {
		double acc = 0;
		for (int j = 0; j < n; j++) {
			double d = 0;
			for (int t = 0; t < row; t++)
				d += (double)q[t] * kv[(size_t)pos[j] * row + t];
			acc += exp(d * scale - m) / s * kv[(size_t)pos[j] * row + i];
		}
		out[i] = n ? (float)acc : 0.0f;
	}
	*lse = n ? (float)(log(s) + m) : -INFINITY;
}

static void check_dcp_decode(struct check *k, int interleave)
{
	struct comm *c = k->c;
	struct err e;
	int W = c->dcp_size, r = c->dcp_rank, I = interleave, bad = 0;
	char why[ERR_MSG_MAX + 96] = "", name[128];
	enum { B = 7, H = 2, D = 16, RP = 8, ROW = D + RP, LMAX = 130 };
	static const int L[B] = {1, 2, 3, 5, 17, 64, 130};
	int Hg = W * H;
	float scale = 1.0f / sqrtf((float)ROW);
	/* every rank builds the full inputs; rank r owns q heads [r*H, (r+1)*H) of its group */
	float *kv = malloc((size_t)B * LMAX * ROW * sizeof *kv);    /* [B, LMAX, ROW] */
	float *qmine = malloc((size_t)B * H * ROW * sizeof *qmine); /* [B, H, ROW] */
	float *q = malloc((size_t)B * Hg * ROW * sizeof *q);        /* [B, Hg, ROW] */
	float *out = malloc((size_t)B * Hg * D * sizeof *out);      /* [B, Hg, D] */
	float *lse = malloc((size_t)B * Hg * sizeof *lse);          /* [B, Hg] */
	float *lses = malloc((size_t)W * B * Hg * sizeof *lses);    /* [W, B, Hg] */
	float *mine = malloc((size_t)B * H * D * sizeof *mine);     /* [B, H, D] */
	int *pos = malloc(LMAX * sizeof *pos);
	if (!kv || !qmine || !q || !out || !lse || !lses || !mine || !pos) {
		bad = 1;
		snprintf(why, sizeof why, "oom");
		goto done;
	}
	for (size_t i = 0; i < (size_t)B * LMAX * ROW; i++)
		kv[i] = hval(11, (uint32_t)i, 0) * 2;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < ROW; i++)
				qmine[(b * H + h) * ROW + i] = hval(12, (uint32_t)((b * Hg + r * H + h) * ROW + i),
								    0) *
							       2;
	if (comm_dcp_allgather_inner(c, qmine, B, (size_t)H * ROW, q, &e))
		goto mpi_fail;
	for (int b = 0; b < B && !bad; b++)
		for (int i = 0; i < Hg * ROW; i++)
			if (q[b * Hg * ROW + i] != hval(12, (uint32_t)(b * Hg * ROW + i), 0) * 2) {
				snprintf(why, sizeof why, "q all-gather: seq %d element %d", b, i);
				bad = 1;
				break;
			}
	/* local shard attention over all Hg heads */
	for (int b = 0; b < B; b++) {
		int n = dcp_local_seq_len(L[b], W, r, I);
		for (int j = 0; j < n; j++)
			pos[j] = (int)dcp_global_pos(j, W, r, I);
		for (int h = 0; h < Hg; h++)
			attend(q + (b * Hg + h) * ROW, ROW, D, scale, n, pos, kv + (size_t)b * LMAX * ROW,
			       out + (b * Hg + h) * D, lse + b * Hg + h);
	}
	if (comm_dcp_allgather(c, lse, (size_t)B * Hg, lses, &e))
		goto mpi_fail;
	dcp_lse_correct(lses, W, B, Hg, r, out, D, NULL);
	if (comm_dcp_reduce_scatter_inner(c, out, B, (size_t)H * D, mine, &e))
		goto mpi_fail;
	/* single-process reference for this rank's heads over every position */
	for (int b = 0; b < B && !bad; b++) {
		for (int j = 0; j < L[b]; j++)
			pos[j] = j;
		for (int h = 0; h < H && !bad; h++) {
			float ref[D], l;
			attend(q + (b * Hg + r * H + h) * ROW, ROW, D, scale, L[b], pos, kv + (size_t)b * LMAX * ROW,
			       ref, &l);
			for (int i = 0; i < D; i++) {
				float got = mine[(b * H + h) * D + i];
				if (!(fabsf(got - ref[i]) <= 2e-5f * (1 + fabsf(ref[i])))) {
					snprintf(why, sizeof why, "seq %d (len %d) head %d dim %d: %g, expected %g", b,
						 L[b], r * H + h, i, got, ref[i]);
					bad = 1;
					break;
				}
			}
		}
	}
	goto done;
mpi_fail:
	snprintf(why, sizeof why, "%s", e.msg);
	bad = 1;
done:
	snprintf(name, sizeof name,
		 "dcp decode attention, interleave %d (q all-gather, lse correct, reduce-scatter) vs single process",
		 I);
	report(k, name, bad, why);
	free(kv);
	free(qmine);
	free(q);
	free(out);
	free(lse);
	free(lses);
	free(mine);
	free(pos);
}

/* Rank 0 idles (sleeping) until a stop signal or `secs`; the others wait for plans. */
static int hold(struct comm *c, double secs, struct err *e)
{
	if (c->world_rank != 0) {
		struct comm_msg m = {0};
		int rc;
		while ((rc = comm_plan_recv(c, &m, e)) == 1)
			;
		comm_msg_free(&m);
		return rc;
	}
	printf("dist-check: holding %.0f s (pid %d)\n", secs, (int)getpid());
	fflush(stdout);
	struct timespec t0, t, nap = {0, 50000000L};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!stop_signal && (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < secs);
	if (stop_signal)
		printf("dist-check: signal %d, stopping the ranks\n", (int)stop_signal);
	fflush(stdout);
	return comm_plan_send_stop(c, e);
}

int cmd_dist_check(int argc, char **argv)
{
	int tp = 1, dcp = 1, interleave = 0, hold_s = -1;
	struct err e;
	for (int i = 1; i < argc; i += 2) { /* every option takes a value */
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc;
		if (!strcmp(a, "-tp") || !strcmp(a, "--tensor-parallel-size"))
			rc = cli_int_parse(a, v, 1, 64, &tp, &e);
		else if (!strcmp(a, "-dcp") || !strcmp(a, "--decode-context-parallel-size"))
			rc = cli_int_parse(a, v, 1, 64, &dcp, &e);
		else if (!strcmp(a, "--dcp-kv-cache-interleave-size") || !strcmp(a, "--cp-kv-cache-interleave-size"))
			rc = cli_int_parse(a, v, 1, 1024, &interleave, &e);
		else if (!strcmp(a, "--hold"))
			rc = cli_int_parse(a, v, 0, 3600, &hold_s, &e);
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			printf("usage: mlaserve dist-check [-tp T] [-dcp D] [--dcp-kv-cache-interleave-size I] "
			       "[--hold "
			       "SECONDS]\n"
			       "Checks groups, collectives, plan broadcast and DCP decode attention on T ranks\n"
			       "(self-launched with mpirun unless already under it). --hold: then idle until\n"
			       "rank 0 gets SIGTERM/SIGINT or SECONDS pass.\n");
			return 0;
		} else {
			fprintf(stderr, "mlaserve dist-check: unknown option '%s'\n", a);
			return 2;
		}
		if (rc) {
			fprintf(stderr, "mlaserve dist-check: %s\n", e.msg);
			return 2;
		}
	}
	if (comm_config_check(tp, dcp, 0, interleave ? interleave : 1, 0, &e)) {
		fprintf(stderr, "mlaserve dist-check: %s\n", e.msg);
		return 2;
	}
	if (dist_maybe_relaunch(argc, argv, tp, &e)) {
		fprintf(stderr, "mlaserve dist-check: %s\n", e.msg);
		return 1;
	}
	struct comm c;
	if (comm_init(&c, tp, dcp, &e)) {
		fprintf(stderr, "mlaserve dist-check: %s\n", e.msg);
		return 1;
	}
	if (c.world_rank == 0) {
		struct sigaction sa = {.sa_handler = on_stop_signal};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	printf("dist-check: rank %d pid %d: tp %d/%d dcp %d/%d host-local %d/%d mpi %s\n", c.world_rank, (int)getpid(),
	       c.tp_rank, c.tp_size, c.dcp_rank, c.dcp_size, c.local_rank, c.local_size, c.mpi ? "yes" : "no");
	fflush(stdout);
	struct check k = {.c = &c};
	check_layout(&k);
	check_allreduce(&k, 1);
	check_allreduce(&k, 4099);
	check_gathers(&k);
	check_parallel_linear(&k, false);
	check_parallel_linear(&k, true);
	check_plans(&k);
	static const int interleaves[] = {1, 2, 4};
	for (size_t i = 0; i < sizeof interleaves / sizeof interleaves[0]; i++)
		if (!interleave || interleave == interleaves[i])
			check_dcp_decode(&k, interleaves[i]);
	if (interleave && interleave != 1 && interleave != 2 && interleave != 4)
		check_dcp_decode(&k, interleave);
	int rc = k.n_fail ? 1 : 0;
	if (c.world_rank == 0) {
		printf("dist-check: %d passed, %d failed on %d ranks (tp %d, dcp %d)\n", k.n_pass, k.n_fail,
		       c.world_size, c.tp_size, c.dcp_size);
		fflush(stdout);
	}
	if (hold_s >= 0 && hold(&c, hold_s, &e)) {
		fprintf(stderr, "mlaserve dist-check: rank %d: %s\n", c.world_rank, e.msg);
		rc = 1;
	}
	comm_fini(&c);
	return rc;
}
