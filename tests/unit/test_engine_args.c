/* The engine flags (src/engine/engine_args.c): values, both spellings, errors, and the vLLM
 * flags that are taken without effect so that a vLLM command line starts. */
#include <string.h>

#include "engine/engine_args.h"
#include "harness.h"

/* parses every argument of argv (NULL-terminated) as an engine flag; 0 ok, -1 error (e->msg),
 * 1 an argument was not an engine flag */
static int parse_all(struct engine_args *a, char **argv, struct err *e)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	engine_args_init(a, true);
	for (int i = 0; i < argc;) {
		int rc = engine_args_parse(a, argc, argv, &i, e);
		if (rc <= 0)
			return rc < 0 ? -1 : 1;
	}
	return 0;
}

static void test_values(void)
{
	struct engine_args a;
	struct err e = {0};
	char *argv[] = {"-tp", "2", "--dcp-kv-cache-interleave-size=4", "--max-num-seqs", "8", "--kv-cache-memory=2GiB",
			"--no-enable-prefix-caching", "--dtype", "float32", NULL};
	EXPECT_EQ_INT(parse_all(&a, argv, &e), 0);
	EXPECT_EQ_INT(a.tp_size, 2);
	EXPECT_EQ_INT(a.dcp_interleave, 4);
	EXPECT_EQ_INT(a.max_num_seqs, 8);
	EXPECT(a.kv_cache_memory == 2ull << 30);
	EXPECT(!a.enable_prefix_caching);
	EXPECT(!strcmp(a.dtype, "float32"));
	char *bad[] = {"--max-num-seqs", "0", NULL};
	EXPECT_EQ_INT(parse_all(&a, bad, &e), -1);
	char *other[] = {"--port", "1", NULL};
	EXPECT_EQ_INT(parse_all(&a, other, &e), 1);
}

static void test_vllm_flags_without_effect(void)
{
	struct engine_args a, ref;
	struct err e = {0};
	char *argv[] = {"--trust-remote-code", "--enforce-eager", "--enable-chunked-prefill", "--gpu-memory-utilization",
			"0.9", "--gpu-memory-utilization=1", NULL};
	EXPECT_EQ_INT(parse_all(&a, argv, &e), 0);
	engine_args_init(&ref, true);
	EXPECT(!memcmp(&a, &ref, sizeof a)); /* nothing changed */
	const char *bad[] = {"0", "1.5", "x", "-0.1"};
	for (int k = 0; k < 4; k++) {
		char *b[] = {"--gpu-memory-utilization", (char *)bad[k], NULL};
		EXPECTF(parse_all(&a, b, &e) == -1 && strstr(e.msg, "--gpu-memory-utilization"), "%s", bad[k]);
	}
}

TESTS(T(test_values), T(test_vllm_flags_without_effect))
