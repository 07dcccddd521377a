#include "tools/load/client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono.h"
#include "tools/load/stream.h"

double bench_now(void) { return mono_now_s(); }

/* One request in flight. */
struct xfer {
	CURL *h;
	struct curl_slist *hdrs;
	struct bench_stream st;
	size_t idx;
	bool oom;
	char errbuf[CURL_ERROR_SIZE];
};

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	if (bench_stream_feed(&x->st, p, n, bench_now()) < 0) {
		x->oom = true;
		return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
	}
	return n;
}

static struct curl_slist *make_headers(const char *api_key, bool json_body)
{
	struct curl_slist *h = NULL, *t;
	if (json_body) {
		if (!(t = curl_slist_append(h, "Content-Type: application/json")))
			goto fail;
		h = t;
		/* no "Expect: 100-continue" round trip before large bodies */
		if (!(t = curl_slist_append(h, "Expect:")))
			goto fail;
		h = t;
	}
	if (api_key && api_key[0]) {
		size_t n = strlen(api_key) + 32;
		char *line = malloc(n);
		if (!line)
			goto fail;
		snprintf(line, n, "Authorization: Bearer %s", api_key);
		t = curl_slist_append(h, line);
		free(line);
		if (!t)
			goto fail;
		h = t;
	}
	return h ? h : curl_slist_append(NULL, "Accept: */*");
fail:
	curl_slist_free_all(h);
	return NULL;
}

static int xfer_start(const struct bench_client_opts *o, CURLM *m, const char *body, size_t idx, double t_send,
		      struct xfer **out)
{
	struct xfer *x = calloc(1, sizeof *x);
	if (!x)
		return -1;
	x->idx = idx;
	bench_stream_init(&x->st, o->chat, t_send);
	x->h = curl_easy_init();
	x->hdrs = make_headers(o->api_key, true);
	if (!x->h || !x->hdrs)
		goto fail;
	CURL *h = x->h;
	if (curl_easy_setopt(h, CURLOPT_URL, o->url) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) != CURLE_OK)
		goto fail;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
	if (o->timeout_s > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(o->timeout_s * 1000));
	if (curl_multi_add_handle(m, h) != CURLM_OK)
		goto fail;
	*out = x;
	return 0;
fail:
	if (x->h)
		curl_easy_cleanup(x->h);
	curl_slist_free_all(x->hdrs);
	bench_stream_fini(&x->st);
	free(x);
	return -1;
}

/* libcurl's messages carry timings ("... port 1 after 3 ms: ..."); without them equal
 * failures read the same and are grouped in the report. */
static void drop_timing(char *m)
{
	char *p = m;
	while ((p = strstr(p, " after "))) {
		char *q = p + 7;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q > p + 7 && !strncmp(q, " ms", 3)) {
			memmove(p, q + 3, strlen(q + 3) + 1);
		} else {
			p += 7;
		}
	}
}

static void xfer_finish(CURLM *m, struct xfer *x, CURLcode rc, double t0, struct bench_req_result *r)
{
	long status = 0;
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	const char *terr = NULL;
	char buf[CURL_ERROR_SIZE + 64];
	if (x->oom) {
		terr = "out of memory reading the response";
	} else if (rc != CURLE_OK) {
		snprintf(buf, sizeof buf, "%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
		drop_timing(buf);
		terr = buf;
	}
	r->start = x->st.t_send - t0;
	bench_stream_finish(&x->st, bench_now(), status, terr, r);
	curl_multi_remove_handle(m, x->h);
	curl_easy_cleanup(x->h);
	curl_slist_free_all(x->hdrs);
	bench_stream_fini(&x->st);
	free(x);
}

int bench_client_run(const struct bench_client_opts *o, const char *const *bodies, const double *arrivals, size_t n,
		     int max_concurrency, struct bench_req_result *res, double *duration, struct err *e)
{
	*duration = 0;
	CURLM *m = curl_multi_init();
	if (!m)
		return err_set(e, "bench client: curl_multi_init failed");
	struct xfer **live = calloc(n + 1, sizeof *live); /* by request index, while in flight */
	if (!live) {
		curl_multi_cleanup(m);
		return err_set(e, "bench client: out of memory for %zu requests", n);
	}
	int rc = 0;
	size_t next = 0, done = 0, failed = 0, in_flight = 0;
	double t0 = bench_now(), t_end = t0, last_progress = 0;
	while (done < n) {
		double now = bench_now();
		while (next < n && arrivals[next] <= now - t0 &&
		       (max_concurrency <= 0 || in_flight < (size_t)max_concurrency)) {
			if (xfer_start(o, m, bodies[next], next, bench_now(), &live[next]) < 0) {
				rc = err_set(e,
					     "bench client: cannot start request %zu (libcurl "
					     "or memory)",
					     next);
				goto out;
			}
			next++;
			in_flight++;
		}
		int running = 0;
		CURLMcode mc = curl_multi_perform(m, &running);
		if (mc != CURLM_OK) {
			rc = err_set(e, "bench client: curl_multi_perform: %s", curl_multi_strerror(mc));
			goto out;
		}
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct xfer *x = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			size_t idx = x->idx;
			xfer_finish(m, x, msg->data.result, t0, &res[idx]);
			live[idx] = NULL;
			in_flight--;
			done++;
			failed += !res[idx].success;
			t_end = bench_now();
		}
		now = bench_now();
		if (o->progress && (now - last_progress >= 0.1 || done == n)) {
			o->progress(o->progress_ctx, done, failed, n);
			last_progress = now;
		}
		if (done == n)
			break;
		/* Sleep in curl until there is socket activity, the next arrival is due (when a
		 * slot is free), or 100 ms pass (progress). */
		long wait_ms = 100;
		if (next < n && (max_concurrency <= 0 || in_flight < (size_t)max_concurrency)) {
			double dt = arrivals[next] - (now - t0);
			wait_ms = dt <= 0 ? 0 : dt < 0.1 ? (long)(dt * 1000) : 100;
		}
		if (wait_ms > 0 && (mc = curl_multi_poll(m, NULL, 0, (int)wait_ms, NULL)) != CURLM_OK) {
			rc = err_set(e, "bench client: curl_multi_poll: %s", curl_multi_strerror(mc));
			goto out;
		}
	}
	*duration = t_end - t0;
out:
	for (size_t i = 0; i < n; i++) { /* after an error: abandon what is in flight */
		struct xfer *x = live[i];
		if (!x)
			continue;
		curl_multi_remove_handle(m, x->h);
		curl_easy_cleanup(x->h);
		curl_slist_free_all(x->hdrs);
		bench_stream_fini(&x->st);
		free(x);
	}
	free(live);
	curl_multi_cleanup(m);
	return rc;
}

struct membuf {
	char *p;
	size_t n;
	bool too_big;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct membuf *b = ud;
	size_t n = size * nmemb;
	if (b->n + n > (16u << 20)) {
		b->too_big = true;
		return 0;
	}
	char *q = realloc(b->p, b->n + n + 1);
	if (!q)
		return 0;
	memcpy(q + b->n, p, n);
	b->p = q;
	b->n += n;
	q[b->n] = 0;
	return n;
}

int bench_client_first_model(const char *base_url, const char *api_key, double timeout_s, char **id, struct err *e)
{
	*id = NULL;
	size_t ulen = strlen(base_url) + 16;
	char *url = malloc(ulen);
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = make_headers(api_key, false);
	struct membuf b = {0};
	json_t *o = NULL;
	int rc = -1;
	char errbuf[CURL_ERROR_SIZE] = "";
	if (!url || !h || !hdrs) {
		err_set(e, "bench: out of memory");
		goto out;
	}
	snprintf(url, ulen, "%s/v1/models", base_url);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)((timeout_s > 0 ? timeout_s : 60) * 1000));
	CURLcode cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		err_set(e, "GET %s: %s", url,
			b.too_big   ? "response larger than 16 MiB"
			: errbuf[0] ? errbuf
				    : curl_easy_strerror(cc));
		goto out;
	}
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	char *shown = bench_clean_msg(b.p ? b.p : "", b.n, 200);
	if (status != 200) {
		err_set(e, "GET %s: http %ld: %s", url, status, shown ? shown : "");
		free(shown);
		goto out;
	}
	o = b.p ? json_loadb(b.p, b.n, 0, NULL) : NULL;
	const json_t *first = json_array_get(json_object_get(o, "data"), 0);
	const json_t *mid = json_object_get(first, "id");
	if (!json_is_string(mid)) {
		err_set(e, "GET %s: no data[0].id in the response: %s", url, shown ? shown : "");
		free(shown);
		goto out;
	}
	free(shown);
	if (!(*id = strdup(json_string_value(mid)))) {
		err_set(e, "bench: out of memory");
		goto out;
	}
	rc = 0;
out:
	json_decref(o);
	free(b.p);
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	free(url);
	return rc;
}
