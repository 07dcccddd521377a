/* The engine's metrics (stats.h). */
#include "engine/stats.h"

#include <string.h>

static void hist_init(struct engine_hist *h, const double *b, int n)
{
	memset(h, 0, sizeof *h);
	h->n_bounds = n;
	memcpy(h->bounds, b, sizeof *b * (size_t)n);
}

void stats_observe(struct engine_hist *h, double v)
{
	int i = 0;
	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void stats_init(struct engine_stats *s)
{
	static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
				      1,     2.5,   5,    7.5,  10,   20,   40,   80,  160,  640, 2560};
	static const double itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
				     0.75, 1,     2.5,  5,     7.5, 10,   20,  40,  80};
	static const double lat[] = {0.3, 0.5, 0.8, 1,  1.5, 2,   2.5, 5,   10,   15,  20,
				     30,  40,  50,  60, 120, 240, 480, 960, 1920, 7680};
	memset(s, 0, sizeof *s);
	hist_init(&s->ttft, ttft, (int)(sizeof ttft / sizeof *ttft));
	hist_init(&s->itl, itl, (int)(sizeof itl / sizeof *itl));
	hist_init(&s->e2e, lat, (int)(sizeof lat / sizeof *lat));
	hist_init(&s->queue, lat, (int)(sizeof lat / sizeof *lat));
}
