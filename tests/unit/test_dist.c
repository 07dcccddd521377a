/* dist/: group layout and validation, the world-of-one communicator (no MPI), step-plan
 * buffers, and the self-launch argument vector. Multi-rank behaviour is covered by
 * tests/e2e/dist_collectives.sh and dist_cleanup.sh. */
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "dist/launch.h"
#include "harness.h"

static void no_launcher_env(void)
{
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_RANK");
	unsetenv("PMI_RANK");
	unsetenv(DIST_LAUNCH_ENV);
}

static void test_layout_tp8_dcp2(void)
{
	/* docs/mla-dcp.md §4.2: TP=8, DCP=2 gives dcp groups {0,1} {2,3} {4,5} {6,7} */
	for (int r = 0; r < 8; r++) {
		struct comm_layout l;
		EXPECT_EQ_INT(comm_layout_compute(8, r, 8, 2, &l, NULL), 0);
		EXPECT_EQ_INT(l.tp_group, 0);
		EXPECT_EQ_INT(l.tp_rank, r);
		EXPECT_EQ_INT(l.dcp_group, r / 2);
		EXPECT_EQ_INT(l.dcp_rank, r % 2);
	}
}

static void test_layout_dcp_equals_tp(void)
{
	for (int r = 0; r < 8; r++) {
		struct comm_layout l;
		EXPECT_EQ_INT(comm_layout_compute(8, r, 8, 8, &l, NULL), 0);
		EXPECT_EQ_INT(l.dcp_group, 0);
		EXPECT_EQ_INT(l.dcp_rank, r);
	}
}

static void test_layout_two_tp_groups(void)
{
	/* 16 ranks, tp 8, dcp 4: tp groups 0..7 / 8..15; dcp groups of 4 inside them */
	struct comm_layout l;
	EXPECT_EQ_INT(comm_layout_compute(16, 13, 8, 4, &l, NULL), 0);
	EXPECT_EQ_INT(l.tp_group, 1);
	EXPECT_EQ_INT(l.tp_rank, 5);
	EXPECT_EQ_INT(l.dcp_group, 3);
	EXPECT_EQ_INT(l.dcp_rank, 1);
	/* a dcp group never straddles two tp groups */
	for (int r = 0; r < 16; r++) {
		EXPECT_EQ_INT(comm_layout_compute(16, r, 8, 4, &l, NULL), 0);
		EXPECT_EQ_INT((l.dcp_group * 4) / 8, l.tp_group);
	}
}

static void test_layout_errors(void)
{
	struct comm_layout l;
	struct err e;
	EXPECT_EQ_INT(comm_layout_compute(4, 0, 4, 3, &l, &e), -1);
	EXPECT(strstr(e.msg, "decode-context-parallel-size 3 must divide tensor-parallel-size 4"));
	EXPECT_EQ_INT(comm_layout_compute(4, 0, 0, 1, &l, &e), -1);
	EXPECT(strstr(e.msg, "tensor-parallel-size 0"));
	EXPECT_EQ_INT(comm_layout_compute(4, 0, 4, 0, &l, &e), -1);
	EXPECT(strstr(e.msg, "decode-context-parallel-size 0"));
	EXPECT_EQ_INT(comm_layout_compute(6, 0, 4, 1, &l, &e), -1);
	EXPECT(strstr(e.msg, "world size 6"));
	EXPECT_EQ_INT(comm_layout_compute(4, 4, 4, 1, &l, &e), -1);
	EXPECT(strstr(e.msg, "world rank 4 of 4"));
}

static void test_config_check(void)
{
	struct err e;
	EXPECT_EQ_INT(comm_config_check(8, 8, 128, 1, 64, &e), 0);
	EXPECT_EQ_INT(comm_config_check(4, 2, 16, 64, 64, &e), 0);
	EXPECT_EQ_INT(comm_config_check(3, 1, 16, 1, 64, &e), -1);
	EXPECT(strstr(e.msg, "tensor-parallel-size 3 must divide num_attention_heads 16"));
	EXPECT_EQ_INT(comm_config_check(4, 3, 16, 1, 64, &e), -1);
	EXPECT(strstr(e.msg, "must divide tensor-parallel-size 4"));
	EXPECT_EQ_INT(comm_config_check(2, 2, 16, 3, 64, &e), -1);
	EXPECT(strstr(e.msg, "dcp-kv-cache-interleave-size 3 must divide block-size 64"));
	EXPECT_EQ_INT(comm_config_check(2, 2, 16, 0, 64, &e), -1);
	EXPECT(strstr(e.msg, "interleave-size 0"));
	EXPECT_EQ_INT(comm_config_check(2, 2, 0, 1, 0, &e), 0); /* heads / block unknown yet */
}

static void test_world_of_one(void)
{
	no_launcher_env();
	struct comm c;
	struct err e;
	EXPECT(!comm_under_launcher());
	EXPECT_EQ_INT(comm_init(&c, 1, 1, &e), 0);
	EXPECT(!c.mpi && !c.impl);
	EXPECT_EQ_INT(c.world_size, 1);
	EXPECT_EQ_INT(c.tp_size, 1);
	EXPECT_EQ_INT(c.dcp_size, 1);
	EXPECT_EQ_INT(c.local_size, 1);
	float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0};
	EXPECT_EQ_INT(comm_tp_allreduce_sum(&c, a, 6, &e), 0);
	EXPECT(a[5] == 6);
	EXPECT_EQ_INT(comm_dcp_allgather(&c, a, 6, b, &e), 0);
	EXPECT(!memcmp(a, b, sizeof a));
	memset(b, 0, sizeof b);
	EXPECT_EQ_INT(comm_dcp_allgather_inner(&c, a, 2, 3, b, &e), 0);
	EXPECT(!memcmp(a, b, sizeof a));
	memset(b, 0, sizeof b);
	EXPECT_EQ_INT(comm_dcp_reduce_scatter_inner(&c, a, 3, 2, b, &e), 0);
	EXPECT(!memcmp(a, b, sizeof a));
	memset(b, 0, sizeof b);
	int cols[1] = {3};
	EXPECT_EQ_INT(comm_tp_gather_cols(&c, a, 2, cols, b, false, &e), 0);
	EXPECT(!memcmp(a, b, sizeof a));
	EXPECT_EQ_INT(comm_plan_send(&c, a, sizeof a, &e), 0);
	EXPECT_EQ_INT(comm_plan_send_stop(&c, &e), 0);
	struct comm_msg m = {0};
	EXPECT_EQ_INT(comm_plan_recv(&c, &m, &e), -1);
	EXPECT(strstr(e.msg, "no sender"));
	EXPECT_EQ_INT(comm_barrier(&c, &e), 0);
	comm_fini(&c);
}

static void test_tp_without_ranks(void)
{
	no_launcher_env();
	struct comm c;
	struct err e;
	EXPECT_EQ_INT(comm_init(&c, 2, 1, &e), -1);
	EXPECT(strstr(e.msg, "tensor-parallel-size 2 needs 2 ranks"));
	EXPECT_EQ_INT(comm_init(&c, 2, 3, &e), -1);
	EXPECT(strstr(e.msg, "must divide"));
}

static void test_msg_bounds(void)
{
	struct comm_msg m = {0};
	struct err e;
	int32_t x = 42, y = 0;
	uint64_t big = 7;
	EXPECT_EQ_INT(comm_msg_put(&m, &x, sizeof x, &e), 0);
	EXPECT_EQ_INT(comm_msg_put(&m, &big, sizeof big, &e), 0);
	for (int i = 0; i < 1000; i++) /* grows past the first allocation */
		EXPECT_EQ_INT(comm_msg_put(&m, &x, sizeof x, &e), 0);
	EXPECT_EQ_INT(m.len, 12 + 4000);
	EXPECT_EQ_INT(comm_msg_get(&m, &y, sizeof y, &e), 0);
	EXPECT_EQ_INT(y, 42);
	uint64_t got = 0;
	EXPECT_EQ_INT(comm_msg_get(&m, &got, sizeof got, &e), 0);
	EXPECT_EQ_INT(got, 7);
	m.pos = m.len - 2;
	EXPECT_EQ_INT(comm_msg_get(&m, &y, sizeof y, &e), -1);
	EXPECT(strstr(e.msg, "step plan truncated: 4 bytes wanted at offset 4010 of 4012"));
	comm_msg_reset(&m);
	EXPECT_EQ_INT(m.len, 0);
	EXPECT_EQ_INT(comm_msg_get(&m, &y, 1, &e), -1);
	comm_msg_free(&m);
	EXPECT(m.data == NULL);
}

static void test_launch_argv(void)
{
	char *argv[] = {"serve", "--model", "dir", "-tp", "4"};
	char *out[64], np[16];
	int n = dist_launch_argv("mpirun", "/x/mlaserve", 5, argv, 4, np, sizeof np, out, 64);
	EXPECT(n > 0);
	EXPECT(out[n] == NULL);
	EXPECT(!strcmp(out[0], "mpirun"));
	EXPECT(!strcmp(out[1], "-np") && !strcmp(out[2], "4"));
	int exe = -1, yield = 0, root = 0, marker = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(out[i], "/x/mlaserve"))
			exe = i;
		yield |= !strcmp(out[i], "OMPI_MCA_mpi_yield_when_idle=1");
		root |= !strcmp(out[i], "--allow-run-as-root");
		marker |= !strcmp(out[i], DIST_LAUNCH_ENV "=1");
	}
	EXPECT(yield && root && marker);
	EXPECT_EQ_INT(exe, n - 6); /* the program, then the command's own argv unchanged */
	for (int i = 0; i < 5 && exe >= 0; i++)
		EXPECT(!strcmp(out[exe + 1 + i], argv[i]));
	EXPECT_EQ_INT(dist_launch_argv("mpirun", "/x", 5, argv, 4, np, sizeof np, out, 8), -1);
}

static void test_relaunch_guards(void)
{
	no_launcher_env();
	char *argv[] = {"dist-check", "-tp", "2"};
	struct err e;
	EXPECT_EQ_INT(dist_maybe_relaunch(3, argv, 1, &e), 0); /* one rank: stay */
	setenv(DIST_LAUNCH_ENV, "1", 1);
	EXPECT_EQ_INT(dist_maybe_relaunch(3, argv, 2, &e), -1);
	EXPECT(strstr(e.msg, "MLASERVE_DIST_LAUNCHED is set but no mpi launcher"));
	unsetenv(DIST_LAUNCH_ENV);
	setenv(DIST_MPIRUN_ENV, "/nonexistent/mpirun", 1);
	EXPECT_EQ_INT(dist_maybe_relaunch(3, argv, 2, &e), -1); /* execvp fails and returns */
	EXPECT(strstr(e.msg, "cannot run /nonexistent/mpirun"));
	unsetenv(DIST_MPIRUN_ENV);
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* already under mpirun: stay */
	EXPECT_EQ_INT(dist_maybe_relaunch(3, argv, 2, &e), 0);
	unsetenv("OMPI_COMM_WORLD_SIZE");
}

TESTS(T(test_layout_tp8_dcp2), T(test_layout_dcp_equals_tp), T(test_layout_two_tp_groups), T(test_layout_errors),
      T(test_config_check), T(test_world_of_one), T(test_tp_without_ranks), T(test_msg_bounds), T(test_launch_argv),
      T(test_relaunch_guards))
