/* `mlaserve bench serve`: the serving benchmark client (like `vllm bench serve`) for any
 * OpenAI-compatible endpoint. Streams every request, measures TTFT / TPOT / ITL / E2EL and
 * throughput, prints vLLM's result table, and optionally writes the JSON result
 * (--result-file) and a throughput-latency chart over a concurrency sweep (--plot).
 * `mlaserve bench serve --help` lists the options. */
#ifndef MLA_TOOLS_LOAD_BENCH_SERVE_H
#define MLA_TOOLS_LOAD_BENCH_SERVE_H

/* argv[0] is the sub-command name ("serve"). Returns the process exit status: 0 when every
 * request succeeded, 1 when some failed (they are reported) or the benchmark could not run,
 * 2 on a usage error. */
int bench_serve_main(int argc, char **argv);

#endif
