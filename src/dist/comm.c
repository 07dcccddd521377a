/* The communicator over Open MPI (or a world of one). See comm.h. */
#include "dist/comm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#if defined(__has_include)
#if __has_include(<mpi.h>)
#define DIST_HAVE_MPI 1
#include <mpi.h>
#endif
#endif

/* The plan header travels in one fixed-size broadcast together with the start of the plan,
 * so a typical step costs one collective; longer plans send the rest in a second one. */
#define PLAN_SLOT 4096
#define PLAN_MAGIC 0x4e4c504du /* "MPLN" */
enum { PLAN_KIND_STEP = 1, PLAN_KIND_STOP = 2 };

struct plan_hdr {
	uint32_t magic, kind;
	uint64_t seq, len;
};
#define PLAN_INLINE (PLAN_SLOT - sizeof(struct plan_hdr))

/* Idle wait for the next plan: poll for PLAN_SPIN_NS, then short naps until PLAN_SHORT_NS
 * (steps a few ms apart wake within ~0.1 ms), then naps doubling up to PLAN_SLEEP_MAX_NS
 * (an idle server's ranks wake about once a millisecond: a small share of a core). */
#define PLAN_SPIN_NS 100000L
#define PLAN_SHORT_NS 5000000L
#define PLAN_SLEEP_MIN_NS 50000L
#define PLAN_SLEEP_MAX_NS 1000000L

int comm_layout_compute(int world_size, int world_rank, int tp, int dcp, struct comm_layout *out, struct err *e)
{
	if (tp < 1)
		return err_set(e, "tensor-parallel-size %d: must be >= 1", tp);
	if (dcp < 1)
		return err_set(e, "decode-context-parallel-size %d: must be >= 1", dcp);
	if (tp % dcp)
		return err_set(e, "decode-context-parallel-size %d must divide tensor-parallel-size %d", dcp, tp);
	if (world_size < 1 || world_rank < 0 || world_rank >= world_size)
		return err_set(e, "world rank %d of %d: out of range", world_rank, world_size);
	if (world_size % tp)
		return err_set(e, "world size %d: not a multiple of tensor-parallel-size %d", world_size, tp);
	out->world_rank = world_rank;
	out->world_size = world_size;
	out->tp_size = tp;
	out->tp_rank = world_rank % tp;
	out->tp_group = world_rank / tp;
	out->dcp_size = dcp;
	out->dcp_rank = world_rank % dcp;
	out->dcp_group = world_rank / dcp;
	return 0;
}

int comm_config_check(int tp, int dcp, int n_heads, int interleave, int block_size, struct err *e)
{
	struct comm_layout l;
	if (comm_layout_compute(tp, 0, tp, dcp, &l, e))
		return -1;
	if (n_heads > 0 && n_heads % tp)
		return err_set(e, "tensor-parallel-size %d must divide num_attention_heads %d", tp, n_heads);
	if (interleave < 1)
		return err_set(e, "dcp-kv-cache-interleave-size %d: must be >= 1", interleave);
	if (block_size > 0 && block_size % interleave)
		return err_set(e, "dcp-kv-cache-interleave-size %d must divide block-size %d", interleave, block_size);
	return 0;
}

bool comm_under_launcher(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK"); }

static int scratch_get(struct comm *c, size_t bytes, void **p, struct err *e)
{
	if (comm_reserve(c, bytes, e))
		return -1;
	*p = c->scratch;
	return 0;
}

int comm_reserve(struct comm *c, size_t bytes, struct err *e)
{
	if (bytes <= c->scratch_bytes)
		return 0;
	void *p = realloc(c->scratch, bytes);
	if (!p)
		return err_set(e, "comm scratch: out of memory for %zu bytes", bytes);
	c->scratch = p;
	c->scratch_bytes = bytes;
	return 0;
}

/* ---- comm_msg ---- */

void comm_msg_reset(struct comm_msg *m) { m->len = m->pos = 0; }

void comm_msg_free(struct comm_msg *m)
{
	free(m->data);
	memset(m, 0, sizeof *m);
}

int comm_msg_reserve(struct comm_msg *m, size_t cap, struct err *e)
{
	if (cap <= m->cap)
		return 0;
	size_t n = m->cap ? m->cap : 256;
	while (n < cap)
		n = n > SIZE_MAX / 2 ? cap : n * 2;
	uint8_t *p = realloc(m->data, n);
	if (!p)
		return err_set(e, "step plan buffer: out of memory for %zu bytes", cap);
	m->data = p;
	m->cap = n;
	return 0;
}

int comm_msg_put(struct comm_msg *m, const void *p, size_t n, struct err *e)
{
	if (n > SIZE_MAX - m->len)
		return err_set(e, "step plan buffer: size overflow");
	if (comm_msg_reserve(m, m->len + n, e))
		return -1;
	if (n)
		memcpy(m->data + m->len, p, n);
	m->len += n;
	return 0;
}

int comm_msg_get(struct comm_msg *m, void *p, size_t n, struct err *e)
{
	if (m->pos > m->len || n > m->len - m->pos)
		return err_set(e, "step plan truncated: %zu bytes wanted at offset %zu of %zu", n, m->pos, m->len);
	if (n)
		memcpy(p, m->data + m->pos, n);
	m->pos += n;
	return 0;
}

#ifdef DIST_HAVE_MPI

struct comm_mpi {
	MPI_Comm world, tp, dcp, plan, local;
	unsigned char slot[PLAN_SLOT]; /* the plan header + inline part */
};

static int mpi_fail(struct err *e, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof s, "mpi error %d", rc);
	return err_set(e, "%s: %s", what, s);
}

static int int_count(size_t n, const char *what, struct err *e)
{
	if (n > INT_MAX)
		return err_set(e, "%s: %zu elements exceed the MPI count limit", what, n);
	return 0;
}

static void comm_free_handles(struct comm_mpi *m)
{
	MPI_Comm *hs[] = {&m->tp, &m->dcp, &m->plan, &m->local};
	for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
		if (*hs[i] != MPI_COMM_NULL)
			MPI_Comm_free(hs[i]);
}

/* Open MPI's shared-memory transport copies large messages with process_vm_readv (CMA).
 * Containers often forbid that syscall (docker's default seccomp profile without
 * SYS_PTRACE), and every large message then fails with "Read -1, expected N, errno = 1"
 * (open-mpi/ompi#4948). Probe it on ourselves and fall back to copy-in/copy-out. */
static bool cma_works(void)
{
	char src[8] = "mlaserv", dst[8] = "";
	struct iovec l = {dst, sizeof dst}, r = {src, sizeof src};
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof src && !memcmp(src, dst, sizeof src);
}

static int comm_init_mpi(struct comm *c, int tp, int dcp, struct err *e)
{
	/* Blocked ranks yield instead of spinning at full speed (read by MPI_Init). */
	setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
	if (!getenv("OMPI_MCA_btl_vader_single_copy_mechanism") && !cma_works())
		setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
	int inited = 0, provided = 0, rc;
	MPI_Initialized(&inited);
	if (!inited) {
		rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, rc, "mpi init");
		c->mpi = true;
	} else {
		MPI_Query_thread(&provided);
	}
	if (provided < MPI_THREAD_SERIALIZED)
		LOG_W("dist", "mpi thread level %d < MPI_THREAD_SERIALIZED; keep comm calls on the main thread",
		      provided);
	struct comm_mpi *m = calloc(1, sizeof *m);
	if (!m) {
		err_set(e, "comm: out of memory");
		goto fail_init;
	}
	m->world = MPI_COMM_WORLD;
	m->tp = m->dcp = m->plan = m->local = MPI_COMM_NULL;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int size = 0, rank = 0;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	struct comm_layout l;
	if (size != tp) {
		err_set(e, "mpi world has %d ranks but tensor-parallel-size is %d; start %d ranks (mpirun -np %d)",
			size, tp, tp, tp);
		goto fail_alloc;
	}
	if (comm_layout_compute(size, rank, tp, dcp, &l, e))
		goto fail_alloc;
	/* key = world rank keeps the group ranks in world order (rank-major gathers). */
	if ((rc = MPI_Comm_split(MPI_COMM_WORLD, l.tp_group, rank, &m->tp)) != MPI_SUCCESS ||
	    (rc = MPI_Comm_split(MPI_COMM_WORLD, l.dcp_group, rank, &m->dcp)) != MPI_SUCCESS ||
	    (rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->plan)) != MPI_SUCCESS ||
	    (rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &m->local)) !=
		    MPI_SUCCESS) {
		mpi_fail(e, rc, "mpi groups");
		goto fail_groups;
	}
	int r = 0;
	MPI_Comm_rank(m->tp, &r);
	CHECK(r == l.tp_rank);
	MPI_Comm_rank(m->dcp, &r);
	CHECK(r == l.dcp_rank);
	MPI_Comm_rank(m->local, &c->local_rank);
	MPI_Comm_size(m->local, &c->local_size);
	c->world_rank = l.world_rank;
	c->world_size = l.world_size;
	c->tp_rank = l.tp_rank;
	c->tp_size = l.tp_size;
	c->tp_group = l.tp_group;
	c->dcp_rank = l.dcp_rank;
	c->dcp_size = l.dcp_size;
	c->dcp_group = l.dcp_group;
	c->impl = m;
	return 0;

fail_groups:
	comm_free_handles(m);
fail_alloc:
	free(m);
fail_init:
	if (c->mpi)
		MPI_Finalize();
	c->mpi = false;
	return -1;
}

#endif /* DIST_HAVE_MPI */

int comm_init(struct comm *c, int tp, int dcp, struct err *e)
{
	memset(c, 0, sizeof *c);
	struct comm_layout l;
	if (comm_layout_compute(tp, 0, tp, dcp, &l, e))
		return -1;
	if (comm_under_launcher()) {
#ifdef DIST_HAVE_MPI
		if (comm_init_mpi(c, tp, dcp, e))
			return -1;
		log_set_rank(c->world_rank);
		return 0;
#else
		return err_set(e, "started by an mpi launcher but mlaserve was built without mpi (install "
				  "libopenmpi-dev and rebuild)");
#endif
	}
	if (tp != 1)
		return err_set(e,
			       "tensor-parallel-size %d needs %d ranks: start under mpirun -np %d or let the command "
			       "relaunch itself",
			       tp, tp, tp);
	c->world_size = c->tp_size = c->dcp_size = c->local_size = 1;
	return 0;
}

void comm_fini(struct comm *c)
{
#ifdef DIST_HAVE_MPI
	if (c->impl) {
		comm_free_handles(c->impl);
		free(c->impl);
	}
	if (c->mpi)
		MPI_Finalize();
#endif
	free(c->scratch);
	memset(c, 0, sizeof *c);
}

void comm_abort(struct comm *c, int code)
{
#ifdef DIST_HAVE_MPI
	if (c->impl)
		MPI_Abort(MPI_COMM_WORLD, code);
#endif
}

int comm_barrier(struct comm *c, struct err *e)
{
#ifdef DIST_HAVE_MPI
	if (c->impl) {
		int rc = MPI_Barrier(c->impl->world);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, rc, "barrier");
	}
#endif
	return 0;
}

/* ---- collectives ---- */

int comm_tp_allreduce_sum(struct comm *c, float *buf, size_t n, struct err *e)
{
	if (c->tp_size == 1)
		return 0;
#ifdef DIST_HAVE_MPI
	/* Chunks keep each call under the int count limit. */
	for (size_t off = 0; off < n;) {
		size_t k = n - off < (size_t)1 << 30 ? n - off : (size_t)1 << 30;
		int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, c->impl->tp);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, rc, "tp all-reduce");
		off += k;
	}
	return 0;
#else
	return err_set(e, "tp all-reduce: built without mpi");
#endif
}

int comm_dcp_allgather_bytes(struct comm *c, const void *send, size_t nbytes, void *recv, struct err *e)
{
	if (c->dcp_size == 1) {
		if (recv != send && nbytes)
			memmove(recv, send, nbytes);
		return 0;
	}
#ifdef DIST_HAVE_MPI
	if (int_count(nbytes, "dcp all-gather", e))
		return -1;
	int rc = MPI_Allgather(send, (int)nbytes, MPI_BYTE, recv, (int)nbytes, MPI_BYTE, c->impl->dcp);
	if (rc != MPI_SUCCESS)
		return mpi_fail(e, rc, "dcp all-gather");
	return 0;
#else
	return err_set(e, "dcp all-gather: built without mpi");
#endif
}

int comm_dcp_allgather(struct comm *c, const float *send, size_t n, float *recv, struct err *e)
{
	if (n > SIZE_MAX / sizeof(float))
		return err_set(e, "dcp all-gather: %zu elements overflow", n);
	return comm_dcp_allgather_bytes(c, send, n * sizeof(float), recv, e);
}

int comm_dcp_allgather_inner(struct comm *c, const float *send, size_t n_outer, size_t n_inner, float *recv,
			     struct err *e)
{
	size_t W = (size_t)c->dcp_size, n = n_outer * n_inner;
	if (n_inner && n / n_inner != n_outer)
		return err_set(e, "dcp all-gather: %zu x %zu overflows", n_outer, n_inner);
	if (W == 1)
		return comm_dcp_allgather(c, send, n, recv, e);
	float *tmp; /* [W, n_outer, n_inner] */
	if (scratch_get(c, W * n * sizeof(float), (void **)&tmp, e))
		return -1;
	if (comm_dcp_allgather(c, send, n, tmp, e))
		return -1;
	for (size_t o = 0; o < n_outer; o++)
		for (size_t k = 0; k < W; k++)
			memcpy(recv + (o * W + k) * n_inner, tmp + (k * n_outer + o) * n_inner,
			       n_inner * sizeof(float));
	return 0;
}

int comm_dcp_reduce_scatter_inner(struct comm *c, const float *send, size_t n_outer, size_t n_inner, float *recv,
				  struct err *e)
{
	size_t W = (size_t)c->dcp_size, n = n_outer * n_inner;
	if (n_inner && n / n_inner != n_outer)
		return err_set(e, "dcp reduce-scatter: %zu x %zu overflows", n_outer, n_inner);
	if (W == 1) {
		if (recv != send && n)
			memmove(recv, send, n * sizeof(float));
		return 0;
	}
#ifdef DIST_HAVE_MPI
	if (int_count(n, "dcp reduce-scatter", e))
		return -1;
	float *tmp; /* [W, n_outer, n_inner]: rank k's block contiguous */
	if (scratch_get(c, W * n * sizeof(float), (void **)&tmp, e))
		return -1;
	for (size_t k = 0; k < W; k++)
		for (size_t o = 0; o < n_outer; o++)
			memcpy(tmp + (k * n_outer + o) * n_inner, send + (o * W + k) * n_inner,
			       n_inner * sizeof(float));
	int rc = MPI_Reduce_scatter_block(tmp, recv, (int)n, MPI_FLOAT, MPI_SUM, c->impl->dcp);
	if (rc != MPI_SUCCESS)
		return mpi_fail(e, rc, "dcp reduce-scatter");
	return 0;
#else
	return err_set(e, "dcp reduce-scatter: built without mpi");
#endif
}

int comm_tp_gather_cols(struct comm *c, const float *send, size_t n_rows, const int *cols, float *recv, bool to_all,
			struct err *e)
{
	int T = c->tp_size;
	size_t total = 0;
	for (int k = 0; k < T; k++) {
		if (cols[k] < 0)
			return err_set(e, "tp gather: rank %d has %d columns", k, cols[k]);
		total += (size_t)cols[k];
	}
	if (T == 1) {
		if (recv != send && n_rows * total != 0)
			memmove(recv, send, n_rows * total * sizeof(float));
		return 0;
	}
#ifdef DIST_HAVE_MPI
	if (int_count(n_rows * total, "tp gather", e))
		return -1;
	int counts[T], displs[T]; /* T is small: one entry per rank */
	size_t off = 0;
	for (int k = 0; k < T; k++) {
		counts[k] = (int)(n_rows * (size_t)cols[k]);
		displs[k] = (int)off;
		off += (size_t)counts[k];
	}
	bool root = c->tp_rank == 0;
	float *tmp = NULL; /* [sum_k n_rows * cols[k]], rank-major */
	if ((to_all || root) && scratch_get(c, off * sizeof(float), (void **)&tmp, e))
		return -1;
	int me = counts[c->tp_rank], rc;
	if (to_all)
		rc = MPI_Allgatherv(send, me, MPI_FLOAT, tmp, counts, displs, MPI_FLOAT, c->impl->tp);
	else
		rc = MPI_Gatherv(send, me, MPI_FLOAT, tmp, counts, displs, MPI_FLOAT, 0, c->impl->tp);
	if (rc != MPI_SUCCESS)
		return mpi_fail(e, rc, "tp gather");
	if (!to_all && !root)
		return 0;
	size_t col0 = 0;
	for (int k = 0; k < T; k++) {
		for (size_t r = 0; r < n_rows; r++)
			memcpy(recv + r * total + col0, tmp + displs[k] + r * (size_t)cols[k],
			       (size_t)cols[k] * sizeof(float));
		col0 += (size_t)cols[k];
	}
	return 0;
#else
	return err_set(e, "tp gather: built without mpi");
#endif
}

/* ---- step plans ---- */

#ifdef DIST_HAVE_MPI
static int plan_bcast_rest(struct comm *c, uint8_t *p, size_t n, struct err *e)
{
	while (n) {
		int k = n > INT_MAX ? INT_MAX : (int)n;
		int rc = MPI_Bcast(p, k, MPI_BYTE, 0, c->impl->plan);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, rc, "step plan broadcast");
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int plan_send(struct comm *c, uint32_t kind, const void *buf, size_t n, struct err *e)
{
	if (c->world_rank != 0)
		return err_set(e, "step plan: only rank 0 sends (this is rank %d)", c->world_rank);
	if (c->plan_stopped)
		return err_set(e, "step plan: the ranks were already stopped");
	struct plan_hdr h = {PLAN_MAGIC, kind, c->plan_seq + 1, n};
	unsigned char *slot = c->impl->slot;
	memcpy(slot, &h, sizeof h);
	size_t inl = n < PLAN_INLINE ? n : PLAN_INLINE;
	if (inl)
		memcpy(slot + sizeof h, buf, inl);
	/* The receivers wait in MPI_Ibcast (a nonblocking collective only matches another). */
	MPI_Request rq;
	int rc = MPI_Ibcast(slot, PLAN_SLOT, MPI_BYTE, 0, c->impl->plan, &rq);
	if (rc == MPI_SUCCESS)
		rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		return mpi_fail(e, rc, "step plan broadcast");
	c->plan_seq++;
	c->plan_stopped = kind == PLAN_KIND_STOP;
	return plan_bcast_rest(c, (uint8_t *)buf + inl, n - inl, e);
}
#endif

int comm_plan_send(struct comm *c, const void *buf, size_t n, struct err *e)
{
	if (c->world_size == 1)
		return 0;
#ifdef DIST_HAVE_MPI
	return plan_send(c, PLAN_KIND_STEP, buf, n, e);
#else
	return err_set(e, "step plan: built without mpi");
#endif
}

int comm_plan_send_stop(struct comm *c, struct err *e)
{
	if (c->world_size == 1)
		return 0;
#ifdef DIST_HAVE_MPI
	return plan_send(c, PLAN_KIND_STOP, NULL, 0, e);
#else
	return err_set(e, "step plan: built without mpi");
#endif
}

static long elapsed_ns(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

int comm_plan_recv(struct comm *c, struct comm_msg *m, struct err *e)
{
	if (c->world_rank == 0 || c->world_size == 1)
		return err_set(e, "step plan: rank %d has no sender to wait for", c->world_rank);
	if (c->plan_stopped)
		return 0;
#ifdef DIST_HAVE_MPI
	unsigned char *slot = c->impl->slot;
	MPI_Request rq;
	int rc = MPI_Ibcast(slot, PLAN_SLOT, MPI_BYTE, 0, c->impl->plan, &rq);
	if (rc != MPI_SUCCESS)
		return mpi_fail(e, rc, "step plan wait");
	/* Poll briefly (back-to-back steps), then sleep with a doubling backoff: MPI's own
	 * blocking wait spins, which would keep an idle server's ranks at 100% CPU. */
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long nap = 0;
	for (;;) {
		int done = 0;
		rc = MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, rc, "step plan wait");
		if (done)
			break;
		long waited = elapsed_ns(&t0);
		if (waited < PLAN_SPIN_NS)
			continue;
		if (waited < PLAN_SHORT_NS || !nap)
			nap = PLAN_SLEEP_MIN_NS;
		else if (nap < PLAN_SLEEP_MAX_NS)
			nap = nap * 2 < PLAN_SLEEP_MAX_NS ? nap * 2 : PLAN_SLEEP_MAX_NS;
		struct timespec ts = {0, nap};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	struct plan_hdr h;
	memcpy(&h, slot, sizeof h);
	if (h.magic != PLAN_MAGIC || (h.kind != PLAN_KIND_STEP && h.kind != PLAN_KIND_STOP))
		return err_set(e, "step plan %llu: bad header (magic %#x kind %u)",
			       (unsigned long long)(c->plan_seq + 1), h.magic, h.kind);
	if (h.seq != c->plan_seq + 1)
		return err_set(e, "step plan: got sequence %llu, expected %llu", (unsigned long long)h.seq,
			       (unsigned long long)(c->plan_seq + 1));
	c->plan_seq++;
	if (h.kind == PLAN_KIND_STOP) {
		c->plan_stopped = true;
		return 0;
	}
	if (h.len > SIZE_MAX)
		return err_set(e, "step plan: length %llu too large", (unsigned long long)h.len);
	size_t n = (size_t)h.len, inl = n < PLAN_INLINE ? n : PLAN_INLINE;
	comm_msg_reset(m);
	if (comm_msg_reserve(m, n ? n : 1, e))
		return -1;
	if (inl)
		memcpy(m->data, slot + sizeof h, inl);
	if (plan_bcast_rest(c, m->data + inl, n - inl, e))
		return -1;
	m->len = n;
	m->pos = 0;
	return 1;
#else
	return err_set(e, "step plan: built without mpi");
#endif
}
