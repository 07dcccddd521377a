#include "tools/load/plot.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A gnuplot single-quoted string literal: quotes doubled, control characters dropped. */
static void put_quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("''", f);
		else if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('\'', f);
}

static void write_panel(FILE *f, const char *title, const char *xlabel, const char *metric, int col_med, int col_p99)
{
	fprintf(f, "set title '%s'\nset xlabel '%s'\n", title, xlabel);
	fprintf(f,
		"plot $d using %d:2 with linespoints lw 2 pt 7 ps 1.3 lc rgb '#1f77b4' "
		"title 'median %s', \\\n"
		"     $d using %d:2:(stringcolumn(1)) with labels offset char 0.8,0.8 left "
		"tc rgb '#1f77b4' notitle, \\\n"
		"     $d using %d:2 with linespoints lw 2 dt 2 pt 5 ps 1.1 lc rgb '#d62728' "
		"title 'P99 %s', \\\n"
		"     $d using %d:2:(stringcolumn(1)) with labels offset char 0.8,-0.8 left "
		"tc rgb '#d62728' notitle\n",
		col_med, metric, col_med, col_p99, metric, col_p99);
}

static int write_script(FILE *f, const char *png_path, const char *title, const struct bench_plot_point *pts, size_t n)
{
	fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		   "  set terminal pngcairo noenhanced size 1400,600 font 'sans,11'\n"
		   "} else {\n"
		   "  set terminal png noenhanced size 1400,600\n"
		   "}\n");
	fputs("set output ", f);
	put_quoted(f, png_path);
	fputs("\n$d << EOD\n", f);
	/* label, throughput, median/p99 TPOT, median/p99 E2EL */
	for (size_t i = 0; i < n; i++) {
		fputc('"', f);
		for (const char *c = pts[i].label; *c; c++)
			if (*c != '"' && (unsigned char)*c >= 0x20)
				fputc(*c, f);
		fprintf(f, "\" %.6g %.6g %.6g %.6g %.6g\n", pts[i].output_throughput, pts[i].median_tpot_ms,
			pts[i].p99_tpot_ms, pts[i].median_e2el_ms, pts[i].p99_e2el_ms);
	}
	fputs("EOD\nset multiplot layout 1,2 title ", f);
	put_quoted(f, title);
	fputs(" font ',13'\n"
	      "set grid\nset key top left box opaque\nset xrange [0:*]\nset yrange [0:*]\n"
	      "set offsets graph 0, graph 0.12, graph 0.12, 0\n"
	      "set ylabel 'output throughput (tok/s)'\n",
	      f);
	write_panel(f, "throughput vs time per output token", "TPOT (ms)", "TPOT", 3, 4);
	write_panel(f, "throughput vs end-to-end latency", "end-to-end latency (ms)", "E2EL", 5, 6);
	fputs("unset multiplot\nset output\n", f);
	return ferror(f) ? -1 : 0;
}

int bench_plot_png(const char *png_path, const char *title, const struct bench_plot_point *pts, size_t n,
		   struct err *e)
{
	if (n == 0)
		return err_set(e, "%s: no results to plot", png_path);
	const char *tmpdir = getenv("TMPDIR");
	char script[4096];
	snprintf(script, sizeof script, "%s/mlaserve-plot-XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
	int fd = mkstemp(script);
	if (fd < 0)
		return err_set(e, "%s: cannot create a temporary gnuplot script: %s", script, strerror(errno));
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(script);
		return err_set(e, "%s: %s", script, strerror(errno));
	}
	int bad = write_script(f, png_path, title, pts, n);
	if (fclose(f) != 0 || bad) {
		unlink(script);
		return err_set(e, "%s: cannot write the gnuplot script", script);
	}
	char *argv[] = {"gnuplot", script, NULL};
	pid_t pid;
	int rc = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
	if (rc != 0) {
		unlink(script);
		return err_set(e, "%s: cannot run gnuplot: %s (install gnuplot-nox)", png_path, strerror(rc));
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	unlink(script);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_set(e, "%s: gnuplot failed (exit status %d)", png_path,
			       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	if (access(png_path, R_OK) != 0)
		return err_set(e, "%s: gnuplot wrote no file", png_path);
	return 0;
}
