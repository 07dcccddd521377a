/* GET /metrics: Prometheus text exposition (format 0.0.4) of the engine's statistics under
 * vLLM's own metric names, `vllm:` prefix included (docs/reference.md C.8), so that dashboards, autoscalers
 * and vLLM's Grafana board read them unchanged. Every family has HELP and TYPE
 * lines; counter families end in _total; histograms have cumulative _bucket{le=...} lines
 * ending with le="+Inf", then _sum and _count. Labels: model_name, engine="0". */
#ifndef MLA_SERVER_OPENAI_METRICS_H
#define MLA_SERVER_OPENAI_METRICS_H

#include "engine/engine.h"
#include "server/http/sse.h"

int metrics_render(const struct engine_stats *s, const char *model_name, struct strbuf *out);

#endif
