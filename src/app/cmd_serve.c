/* mlaserve serve [MODEL_DIR] [flags]: the OpenAI-compatible server, with vLLM's flag names.
 * Without MODEL_DIR it serves the bundled tiny model (tests/fixtures/tiny-v3 next to the
 * build directory). SIGTERM / SIGINT stop it gracefully (exit 0). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mono.h"
#include "setup/cli_util.h"
#include "app/commands.h"
#include "dist/launch.h"
#include "engine/dist_exec.h"
#include "setup/ranks.h"
#include "setup/engine_args.h"
#include "model/model.h"
#include "server/http/cors.h"
#include "server/parsers/reasoning.h"
#include "server/parsers/tool_calls.h"
#include "server/server.h"
#include "server/http/tls.h"
#include "tok/chat_template.h"
#include "io/hf_config.h"
#include "tok/tokenizer.h"

#define MOD "serve"

struct serve_opts {
	struct engine_args ea;
	struct server_config sc;
	const char *model_arg;                   /* as given (default served name) */
	const char *chat_template;               /* --chat-template FILE or inline text */
	enum chat_content_format content_format; /* --chat-template-content-format */
	const char *ssl_keyfile, *ssl_certfile;  /* HTTPS (server/http/tls.h) */
	bool log_requests, log_stats;
};

static void serve_usage(FILE *f)
{
	fprintf(f,
		"usage: mlaserve serve [MODEL_DIR] [options]\n"
		"  MODEL_DIR (or --model DIR)      checkpoint directory (config.json, *.safetensors,\n"
		"                                  tokenizer files); default: the bundled tests/fixtures/tiny-v3\n"
		"server options:\n"
		"  --host HOST                     address to listen on (default: all interfaces)\n"
		"  --port PORT                     port (default 8000; 0 = any free port, logged)\n"
		"  --served-model-name NAME [...]  names clients use in \"model\" (default: MODEL_DIR)\n"
		"  --api-key KEY                   require \"Authorization: Bearer KEY\" on /v1/* (also\n"
		"                                  env MLASERVE_API_KEY or VLLM_API_KEY)\n"
		"  --chat-template FILE|TEXT       override the tokenizer's chat template\n"
		"  --chat-template-content-format auto|string|openai   how message content reaches the\n"
		"                                  template: one string (text parts joined by \"\\n\") or a\n"
		"                                  list of text parts; auto (default): openai when the\n"
		"                                  template loops over a message's content, as vLLM detects\n"
		"  --ssl-keyfile FILE --ssl-certfile FILE   serve HTTPS with this PEM key and\n"
		"                                  certificate chain (checked before the model loads)\n"
		"  --max-request-body-bytes N      larger bodies get 413 (default 16MiB)\n"
		"  --http-timeout SECONDS          idle / slow-client connection timeout (default 30)\n"
		"  --max-connections N             concurrent connections (default 1024)\n"
		"  --responses-store-size N        finished /v1/responses kept for retrieval and\n"
		"                                  previous_response_id, oldest dropped (default 1024; 0: none)\n"
		"  --max-logprobs N                most logprobs / top_logprobs a request may ask (0-20, default 20)\n"
		"  --enable-auto-tool-choice       parse the tool calls of requests with tools (tool_choice\n"
		"                                  \"auto\"), with --tool-call-parser NAME\n"
		"  --tool-call-parser NAME         deepseek_v3 (V3, R1-0528), deepseek_v31 (V3.1),\n"
		"                                  deepseek_v32 (V3.2, its DSML markup), deepseek_v4 (V4),\n"
		"                                  kimi_k2 (Kimi K2 / K2.5 / K2.6) or glm47 (GLM-4.7, GLM-5)\n"
		"  --reasoning-parser NAME         split chat output into reasoning_content and content\n"
		"                                  (deepseek_r1: the reasoning ends at </think>;\n"
		"                                  deepseek_v3: the same when chat_template_kwargs\n"
		"                                  has \"thinking\" (or \"enable_thinking\"): true, as\n"
		"                                  V3.1 / V3.2 use it; deepseek_v4: that, unless\n"
		"                                  reasoning_effort is \"none\", and a tool-call block\n"
		"                                  ends the reasoning too; kimi_k2: deepseek_r1's unless\n"
		"                                  \"thinking\" is false, the tool-call section ends it too;\n"
		"                                  glm45 (GLM-4.5 to GLM-5.1): deepseek_v3's, thinking\n"
		"                                  unless \"thinking\" / \"enable_thinking\" say false)\n"
		"  --allowed-origins JSON          CORS: origins allowed, a JSON list (default '[\"*\"]')\n"
		"  --allowed-methods JSON          CORS: methods allowed (default '[\"*\"]')\n"
		"  --allowed-headers JSON          CORS: request headers allowed (default '[\"*\"]')\n"
		"  --allow-credentials             CORS: Access-Control-Allow-Credentials: true\n"
		"  --disable-log-requests          no access-log line per request\n"
		"  --disable-log-stats             no periodic throughput line\n"
		"  --enable-prompt-tokens-details  usage.prompt_tokens_details.cached_tokens: the\n"
		"                                  prompt tokens read from the prefix cache\n");
	engine_args_usage(f);
}

/* "--flag VALUE" or "--flag=VALUE"; returns the value or NULL when argv[*i] is not flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, const char *alias, bool *missing)
{
	const char *a = argv[*i];
	for (int k = 0; k < 2; k++) {
		const char *f = k ? alias : flag;
		if (!f)
			continue;
		size_t n = strlen(f);
		if (!strncmp(a, f, n) && a[n] == '=')
			return a + n + 1;
		if (!strcmp(a, f)) {
			if (*i + 1 >= argc) {
				*missing = true;
				return NULL;
			}
			return argv[++*i];
		}
	}
	return NULL;
}

static int parse_args(int argc, char **argv, struct serve_opts *o, struct err *e)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		bool missing = false;
		int rc = engine_args_parse(&o->ea, argc, argv, &i, e);
		if (rc < 0)
			return -1;
		if (rc > 0) {
			i--; /* engine_args_parse moved past the flag; the loop adds one */
			continue;
		}
#define FLAG(name, alias) ((v = flag_value(argc, argv, &i, name, alias, &missing)) || missing)
		if (FLAG("--host", NULL)) {
			o->sc.host = v;
		} else if (FLAG("--port", NULL)) {
			if (cli_int_parse("--port", v, 0, 65535, &o->sc.port, e) < 0)
				return -1;
		} else if (FLAG("--model", NULL)) {
			o->model_arg = v;
		} else if (FLAG("--api-key", NULL)) {
			o->sc.api_key = v;
		} else if (FLAG("--chat-template", NULL)) {
			o->chat_template = v;
		} else if (FLAG("--chat-template-content-format", NULL)) {
			if (chat_content_format_parse(v, &o->content_format, e) < 0)
				return err_prefix(e, "--chat-template-content-format");
		} else if (FLAG("--ssl-keyfile", NULL)) {
			o->ssl_keyfile = v;
		} else if (FLAG("--ssl-certfile", NULL)) {
			o->ssl_certfile = v;
		} else if (FLAG("--ssl-ca-certs", NULL) || FLAG("--ssl-cert-reqs", NULL)) {
			return err_set(e,
				       "%s: client certificates are not supported (--ssl-keyfile and "
				       "--ssl-certfile serve HTTPS)",
				       a);
		} else if (FLAG("--served-model-name", NULL)) {
			if (v) { /* without one, "missing value" below */
				o->sc.n_served_names = 0;
				o->sc.served_names[o->sc.n_served_names++] = v;
				while (i + 1 < argc && argv[i + 1][0] != '-' &&
				       o->sc.n_served_names < SERVER_MAX_NAMES)
					o->sc.served_names[o->sc.n_served_names++] = argv[++i];
			}
		} else if (FLAG("--max-request-body-bytes", NULL)) {
			if (!v || engine_args_parse_bytes(v, &o->sc.max_body_bytes) < 0 || o->sc.max_body_bytes < 1024)
				return err_set(e, "--max-request-body-bytes: invalid value '%s'", v ? v : "");
		} else if (FLAG("--http-timeout", NULL)) {
			if (cli_int_parse("--http-timeout", v, 1, 86400, &o->sc.conn_timeout_s, e) < 0)
				return -1;
		} else if (FLAG("--max-logprobs", NULL)) {
			if (cli_int_parse("--max-logprobs", v, 0, ENGINE_MAX_LOGPROBS, &o->sc.max_logprobs, e) < 0)
				return -1;
		} else if (FLAG("--responses-store-size", NULL)) {
			if (cli_int_parse("--responses-store-size", v, 0, 1 << 20, &o->sc.responses_store_size, e) < 0)
				return -1;
		} else if (FLAG("--max-connections", NULL)) {
			if (cli_int_parse("--max-connections", v, 4, 65536, &o->sc.max_connections, e) < 0)
				return -1;
		} else if (FLAG("--allowed-origins", NULL)) {
			o->sc.allowed_origins = v;
		} else if (FLAG("--allowed-methods", NULL)) {
			o->sc.allowed_methods = v;
		} else if (FLAG("--allowed-headers", NULL)) {
			o->sc.allowed_headers = v;
		} else if (!strcmp(a, "--allow-credentials")) {
			o->sc.allow_credentials = true;
		} else if (!strcmp(a, "--enable-auto-tool-choice")) {
			o->sc.auto_tool_choice = true;
		} else if (FLAG("--tool-call-parser", NULL)) {
			if (v && (o->sc.tool_parser = tool_parser_from_name(v)) < 0)
				return err_set(e, "--tool-call-parser: unknown parser '%s' (supported: %s)", v,
					       TOOL_PARSER_NAMES);
		} else if (FLAG("--reasoning-parser", NULL)) {
			if (v && (o->sc.reasoning_parser = reasoning_parser_from_name(v)) < 0)
				return err_set(e, "--reasoning-parser: unknown parser '%s' (supported: %s)", v,
					       REASONING_PARSER_NAMES);
		} else if (!strcmp(a, "--disable-log-requests")) {
			o->log_requests = false;
		} else if (!strcmp(a, "--enable-log-requests")) {
			o->log_requests = true;
		} else if (!strcmp(a, "--disable-log-stats")) {
			o->log_stats = false;
		} else if (!strcmp(a, "--enable-prompt-tokens-details")) {
			o->sc.prompt_tokens_details = true;
		} else if (a[0] != '-' && !o->model_arg) {
			o->model_arg = a;
		} else {
			return err_set(e, "unknown option '%s' (see mlaserve serve --help)", a);
		}
		if (missing)
			return err_set(e, "%s: missing value", a);
#undef FLAG
	}
	if (!o->ssl_keyfile != !o->ssl_certfile)
		return err_set(e, "%s needs %s too", o->ssl_keyfile ? "--ssl-keyfile" : "--ssl-certfile",
			       o->ssl_keyfile ? "--ssl-certfile" : "--ssl-keyfile");
	struct cors cors; /* the lists are read again at the server's start; checked here before the model loads */
	if (cors_init(&cors, o->sc.allowed_origins, o->sc.allowed_methods, o->sc.allowed_headers, false, e) < 0)
		return -1;
	cors_fini(&cors);
	if (o->sc.auto_tool_choice && !o->sc.tool_parser)
		return err_set(e, "--enable-auto-tool-choice needs --tool-call-parser (supported: %s)",
			       TOOL_PARSER_NAMES);
	if (o->ea.tp_size % o->ea.dcp_size)
		return err_set(e,
			       "--tensor-parallel-size %d must be divisible by "
			       "--decode-context-parallel-size %d",
			       o->ea.tp_size, o->ea.dcp_size);
	return 0;
}

/* The bundled default model: <dir of the binary>/../tests/fixtures/tiny-v3, else ./tests/... */
static int default_model_dir(char *buf, size_t n, struct err *e)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len > 0) {
		exe[len] = 0;
		snprintf(buf, n, "%s/../tests/fixtures/tiny-v3", dirname(exe));
		if (access(buf, R_OK) == 0) {
			char real[PATH_MAX];
			if (realpath(buf, real))
				snprintf(buf, n, "%s", real);
			return 0;
		}
	}
	snprintf(buf, n, "tests/fixtures/tiny-v3");
	if (access(buf, R_OK) == 0)
		return 0;
	return err_set(e, "no MODEL_DIR given and the bundled model tests/fixtures/tiny-v3 was "
			  "not found next to the binary");
}

/* vLLM's periodic line: throughput since the last one, queue sizes, KV usage. */
static void log_throughput(struct engine *eng, struct engine_stats *prev, double *t_prev)
{
	struct engine_stats st;
	engine_stats_get(eng, &st);
	double t = mono_now_s(), dt = t - *t_prev;
	uint64_t dp = st.prompt_tokens - prev->prompt_tokens;
	uint64_t dg = st.generation_tokens - prev->generation_tokens;
	uint64_t dq = st.prefix_queries - prev->prefix_queries;
	uint64_t dh = st.prefix_hits - prev->prefix_hits;
	if (dt > 0 && (dp || dg || st.n_running || st.n_waiting))
		LOG_I(MOD,
		      "avg prompt throughput: %.1f tokens/s, avg generation throughput: %.1f "
		      "tokens/s, running: %d reqs, waiting: %d reqs, KV cache usage: %.1f%%, prefix "
		      "cache hit rate: %.1f%%",
		      (double)dp / dt, (double)dg / dt, st.n_running, st.n_waiting, st.kv_usage * 100.0,
		      dq ? 100.0 * (double)dh / (double)dq : 0.0);
	*prev = st;
	*t_prev = t;
}

/* The model dir (given, else the bundled one; o keeps pointers into model_dir), the served
 * names, and the API key (flag, else MLASERVE_API_KEY, else VLLM_API_KEY; empty = none). */
static int resolve_opts(struct serve_opts *o, char *model_dir, size_t n, struct err *e)
{
	if (o->model_arg)
		snprintf(model_dir, n, "%s", o->model_arg);
	else if (default_model_dir(model_dir, n, e) < 0)
		return -1;
	o->ea.model_dir = model_dir;
	if (!o->sc.n_served_names) {
		o->sc.served_names[0] = o->model_arg ? o->model_arg : "tiny-v3";
		o->sc.n_served_names = 1;
	}
	o->sc.model_root = model_dir;
	if (!o->sc.api_key)
		o->sc.api_key = env_get(ENV_API_KEY);
	if (!o->sc.api_key)
		o->sc.api_key = getenv("VLLM_API_KEY");
	if (o->sc.api_key && !o->sc.api_key[0])
		o->sc.api_key = NULL;
	o->sc.log_requests = o->log_requests;
	return 0;
}

/* --chat-template (a file, else the template text itself), else the model's own, else for a
 * DeepSeek-V3.2 or V4 checkpoint its native encoder (tok/chat_dsv32.h, tok/chat_dsv4.h); *tpl
 * stays NULL when there is none. *tpl_text (free()) holds the file's text. */
static int open_chat_template(const struct serve_opts *o, const struct engine_runtime *rt, const char *model_dir,
			      struct chat_template **tpl, char **tpl_text, struct err *e)
{
	const char *src = rt->hf.chat_template;
	if (o->chat_template) {
		struct err fe;
		if (file_read_all(o->chat_template, tpl_text, NULL, &fe) < 0)
			*tpl_text = NULL;
		src = *tpl_text ? *tpl_text : o->chat_template;
	}
	if (chat_template_open(src, model_dir, tpl, e) < 0)
		return err_prefix(e, "%s", o->chat_template ? "--chat-template" : "tokenizer_config.json");
	if (chat_template_native(*tpl))
		LOG_I(MOD, "no chat template: prompts are rendered by the %s encoder", chat_template_native(*tpl));
	if (!*tpl)
		LOG_W(MOD, "the model has no chat template: /v1/chat/completions will answer 400");
	else
		LOG_I(MOD, "chat template content format: %s (%s)",
		      chat_content_format_name(o->content_format == CHAT_CONTENT_AUTO
						       ? chat_template_content_format(*tpl)
						       : o->content_format),
		      o->content_format == CHAT_CONTENT_AUTO ? "detected; --chat-template-content-format overrides"
							     : "--chat-template-content-format");
	return 0;
}

#define DIST_WATCH_MAX 64

/* A rank of the job has died (mpirun then SIGTERMs the others and kills them shortly
 * after): which one and how is logged, each open stream gets an error event, each waiting
 * request a 500 JSON error, and the process exits with status 1 at once (the engine may be
 * stuck in a collective with the dead rank, so there is no orderly stop). Returns when
 * every rank is alive. */
static void rank_died(struct server *srv, const pid_t *ranks, int n, int sig)
{
	char how[96];
	for (int r = 1; r < n; r++) {
		if (!ranks[r] || !dist_rank_ended(ranks[r], how, sizeof how))
			continue;
		LOG_E(MOD, "rank %d of %d (pid %d) %s%s: failing the open requests and exiting", r, n, (int)ranks[r],
		      how, sig == SIGTERM ? " (then mpirun sent SIGTERM)" : "");
		server_fail(srv, "rank %d of the %d-rank job %s; the server is exiting", r, n, how);
		/* within mpirun's odls_base_sigkill_timeout (3 s, dist/launch.c) after its SIGTERM */
		if (!server_wait_idle(srv, 1.5))
			LOG_W(MOD, "requests still being answered at the exit");
		struct timespec flush = {0, 100000000L}; /* the relays pass the last bytes on */
		nanosleep(&flush, NULL);
		fflush(NULL);
		_exit(1);
	}
}

static int serve(struct serve_opts *o, int argc, char **argv, struct err *e)
{
	char model_dir[PATH_MAX];
	if (resolve_opts(o, model_dir, sizeof model_dir, e) < 0)
		return -1;
	char *key_pem = NULL, *cert_pem = NULL; /* before the model loads: a bad file fails at once */
	if (o->ssl_keyfile && tls_load_pair(o->ssl_keyfile, o->ssl_certfile, &key_pem, &cert_pem, e) < 0)
		return -1;
	o->sc.tls_key_pem = key_pem;
	o->sc.tls_cert_pem = cert_pem;
	/* -tp > 1: self-launch the ranks (before any thread exists); the workers run rank 0's
	 * step plans until it stops them, rank 0 serves HTTP */
	struct comm comm;
	struct dist_exec dx;
	memset(&dx, 0, sizeof dx);
	bool dist = o->ea.tp_size > 1 || o->ea.dcp_size > 1;
	if (dist) {
		int drc = ranks_start(argc, argv, &o->ea, &comm, e);
		if (drc < 0 || comm.world_rank != 0) { /* a worker serves no HTTP */
			free(key_pem);
			free(cert_pem);
		}
		if (drc < 0)
			return -1;
		if (comm.world_rank != 0) {
			int wrc = ranks_worker_run(&o->ea, &comm, e);
			comm_fini(&comm);
			return wrc;
		}
	}
	struct engine_forward_hook hook = {dist_exec_hook, &dx};

	/* Signals go to a sigtimedwait loop in this thread: block them before any thread
	 * exists so every thread inherits the mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct engine_runtime rt;
	memset(&rt, 0, sizeof rt);
	struct chat_template *tpl = NULL;
	char *tpl_text = NULL;
	struct server *srv = NULL;
	int rc = -1;
	if (engine_runtime_open(&o->ea, dist ? &hook : NULL, &rt, e) < 0)
		goto out;
	if (dist) {
		dist_exec_init(&dx, &comm, rt.model, engine_kv_cache(rt.engine), engine_backend(rt.engine),
			       o->ea.dcp_interleave);
		if (dist_exec_send_setup(&dx, engine_kv_cache(rt.engine), engine_backend(rt.engine), e) < 0)
			goto out;
		LOG_I(MOD,
		      "%d ranks: tensor-parallel-size %d, decode-context-parallel-size %d, "
		      "interleave %d",
		      comm.world_size, o->ea.tp_size, o->ea.dcp_size, o->ea.dcp_interleave);
	}
	if (!rt.tok) {
		err_set(e, "%s: no tokenizer.json or tiktoken.model (the server needs a tokenizer)", model_dir);
		goto out;
	}
	if (open_chat_template(o, &rt, model_dir, &tpl, &tpl_text, e) < 0)
		goto out;
	const struct model_config *mc = model_config(rt.model);

	struct server_deps d = {.eng = rt.engine,
				.tok = rt.tok,
				.tpl = tpl,
				.content_format = o->content_format,
				.bos_token = rt.hf.bos_token,
				.eos_token = rt.hf.eos_token,
				.vocab_size = mc->vocab_size};
	sampling_params_init(&d.defaults, &rt.defaults);
	LOG_I(MOD,
	      "model %s (%s): %d layers, hidden %d, %d heads, kv_lora_rank %d, rope dim %d, "
	      "%d routed experts (top %d) + %d shared, vocab %d, checkpoint dtype %s%s, activations %s (--dtype %s)",
	      model_dir, mc->model_type, mc->num_hidden_layers, mc->hidden_size, mc->num_attention_heads,
	      mc->kv_lora_rank, mc->qk_rope_head_dim, mc->n_routed_experts, mc->num_experts_per_tok,
	      mc->n_shared_experts, mc->vocab_size, mc->torch_dtype, mc->fp8 ? " (fp8 block-quantized)" : "",
	      dtype_name(model_act_dtype(rt.model)), o->ea.dtype ? o->ea.dtype : "auto");
	LOG_I(MOD, "default sampling: temperature %g, top_p %g, top_k %d (generation_config.json%s)",
	      (double)d.defaults.temperature, (double)d.defaults.top_p, d.defaults.top_k,
	      rt.hf.has_generation_config ? "" : " absent: OpenAI defaults");
	if (server_start(&o->sc, &d, &srv, e) < 0)
		goto out;
	const char *host = o->sc.host && o->sc.host[0] ? o->sc.host : "0.0.0.0";
	bool v6 = strchr(host, ':') != NULL;
	LOG_I(MOD, "serving \"%s\" (max_model_len %d) on %s://%s%s%s:%d/v1%s", o->sc.served_names[0],
	      engine_max_model_len(rt.engine), key_pem ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "",
	      server_port(srv), o->sc.api_key ? " (API key required)" : "");

	struct engine_stats prev;
	engine_stats_get(rt.engine, &prev);
	double t_prev = mono_now_s();
	/* the ranks on this machine, watched: one that dies fails the requests (rank_died) */
	pid_t ranks[DIST_WATCH_MAX] = {0};
	int n_watch = dist && comm.world_size <= DIST_WATCH_MAX ? comm.world_size : 0;
	if (n_watch) {
		dist_local_ranks(ranks, n_watch);
		dist_rank_watch(ranks + 1, n_watch - 1);
	}
	for (;;) {
		struct timespec wait = {.tv_sec = n_watch ? 0 : 10, .tv_nsec = n_watch ? 200000000L : 0};
		int sig = sigtimedwait(&set, NULL, &wait);
		rank_died(srv, ranks, n_watch, sig); /* does not return when one did */
		if (sig == SIGINT || sig == SIGTERM) {
			LOG_I(MOD, "%s: shutting down (aborting in-flight requests)",
			      sig == SIGINT ? "SIGINT" : "SIGTERM");
			break;
		}
		if (mono_now_s() - t_prev < 10)
			continue;
		if (o->log_stats)
			log_throughput(rt.engine, &prev, &t_prev);
		else
			t_prev = mono_now_s();
		if (!engine_alive(rt.engine))
			LOG_E(MOD, "the engine stopped after an error; /health answers 503");
	}
	server_stop(srv);
	srv = NULL;
	rc = 0;
out:
	server_stop(srv);
	engine_runtime_close(&rt);
	chat_template_free(tpl);
	free(tpl_text);
	free(key_pem);
	free(cert_pem);
	if (dist) { /* the engine is stopped: release the workers, then leave MPI together */
		struct err e2;
		if (comm_plan_send_stop(&comm, &e2) < 0)
			LOG_E(MOD, "%s", e2.msg);
		dist_exec_fini(&dx);
		comm_fini(&comm);
	}
	return rc;
}

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o;
	memset(&o, 0, sizeof o);
	engine_args_init(&o.ea, true);
	server_config_init(&o.sc);
	o.log_requests = o.log_stats = true;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			serve_usage(stdout);
			return 0;
		}
	struct err e;
	if (parse_args(argc, argv, &o, &e) < 0) {
		fprintf(stderr, "mlaserve serve: %s\n", e.msg);
		return 2;
	}
	if (serve(&o, argc, argv, &e) < 0) {
		fprintf(stderr, "mlaserve serve: %s\n", e.msg);
		return 1;
	}
	return 0;
}
