/* PNG chart of a concurrency sweep through gnuplot (pngcairo when the installed gnuplot has
 * it, else the libgd png terminal): output throughput against median / P99 TPOT (left) and
 * against median / P99 end-to-end latency (right), one point per concurrency level,
 * labelled with it, so the throughput-latency curve can be read off directly. */
#ifndef MLA_TOOLS_LOAD_PLOT_H
#define MLA_TOOLS_LOAD_PLOT_H

#include <stddef.h>

#include "base/err.h"

struct bench_plot_point {
	char label[32];           /* e.g. "c=16" */
	double output_throughput; /* tok/s */
	double median_tpot_ms, p99_tpot_ms;
	double median_e2el_ms, p99_e2el_ms;
};

/* Writes png_path by running `gnuplot` (from PATH) on a temporary script. title is shown
 * above both panels. Errors: gnuplot missing or failing (its stderr passes through). */
int bench_plot_png(const char *png_path, const char *title, const struct bench_plot_point *pts, size_t n,
		   struct err *e);

#endif
