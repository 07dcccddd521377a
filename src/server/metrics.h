/* GET /metrics: Prometheus text exposition (format 0.0.4) of the engine's statistics under
 * vLLM's metric names with the `mlaserve:` prefix (spec C.8). Every family has HELP and TYPE
 * lines; counter families end in _total; histograms have cumulative _bucket{le=...} lines
 * ending with le="+Inf", then _sum and _count. Labels: model_name, engine="0". */
#ifndef MLA_SERVER_METRICS_H
#define MLA_SERVER_METRICS_H

#include "engine/engine.h"
#include "server/sse.h"

int metrics_render(const struct engine_stats *s, const char *model_name, struct sbuf *out);

#endif
