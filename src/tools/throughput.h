/* `mlaserve bench throughput`: offline throughput through the engine (like `vllm bench
 * throughput`). N requests of random token ids (optionally sharing a common prefix) are
 * submitted at once with ignore_eos, so every prompt and output has its exact length; it
 * reports requests/s, input / output / total tokens/s, TTFT and TPOT percentiles, prefix
 * cache hits, and writes them as JSON with --output-json. `--help` lists the options. */
#ifndef MLA_TOOLS_THROUGHPUT_H
#define MLA_TOOLS_THROUGHPUT_H

/* argv[0] is the sub-command name ("throughput"). Returns the process exit status: 0 ok,
 * 1 error (one line on stderr), 2 usage. */
int bench_throughput_main(int argc, char **argv);

#endif
