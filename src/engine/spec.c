/* Speculative decoding's n-gram proposer and its configuration (spec.h). */
#include "engine/spec.h"

#include <jansson.h>
#include <stdbool.h>
#include <string.h>

int spec_ngram_propose(const int32_t *tokens, int n, int lookup_min, int lookup_max, int k, int32_t *out)
{
	if (n < lookup_min || k <= 0)
		return 0;
	/* An occurrence ending at i < n - 1 matches the suffix over m tokens: tokens[i - j] ==
	 * tokens[n - 1 - j] for j < m. The longest m (capped at lookup_max) wins, the earliest
	 * i among equals, as vLLM's proposer. Most i fail on the first comparison. */
	int best_m = 0, best_i = -1;
	const int32_t last = tokens[n - 1];
	for (int i = 0; i < n - 1; i++) {
		if (tokens[i] != last)
			continue;
		int m = 1;
		while (m < lookup_max && m <= i && tokens[i - m] == tokens[n - 1 - m])
			m++;
		if (m > best_m) {
			best_m = m;
			best_i = i;
			if (m == lookup_max)
				break;
		}
	}
	if (best_m < lookup_min)
		return 0;
	int start = best_i + 1, avail = n - start;
	int c = k < avail ? k : avail;
	memcpy(out, tokens + start, sizeof *out * (size_t)c);
	return c;
}

static int get_int(json_t *o, const char *key, int lo, int hi, int *out, struct err *e)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(e, "--speculative-config: \"%s\" must be an integer in [%d, %d]", key, lo, hi);
	*out = (int)json_integer_value(v);
	return 1;
}

int spec_config_parse(const char *text, struct spec_config *c, struct err *e)
{
	memset(c, 0, sizeof *c);
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return err_set(e, "--speculative-config: not a JSON object (%s)", o ? "" : je.text);
	}
	int rc = 0;
	const char *method = json_string_value(json_object_get(o, "method"));
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		static const char *const known[] = {"method", "num_speculative_tokens", "prompt_lookup_max",
						    "prompt_lookup_min", "disable_by_batch_size"};
		bool ok = false;
		for (size_t i = 0; i < sizeof known / sizeof *known; i++)
			ok |= !strcmp(key, known[i]);
		if (!ok) {
			rc = err_set(e,
				     "--speculative-config: \"%s\" is not supported (method, num_speculative_tokens, "
				     "prompt_lookup_min, prompt_lookup_max, disable_by_batch_size)",
				     key);
			goto out;
		}
	}
	if (!method) {
		rc = err_set(e,
			     "--speculative-config: \"method\" (a string) is required: \"ngram\" or \"deepseek_mtp\"");
		goto out;
	}
	bool mtp = !strcmp(method, "deepseek_mtp") || !strcmp(method, "mtp");
	if (strcmp(method, "ngram") && !mtp) {
		rc = err_set(e,
			     "--speculative-config: method \"%s\" is not supported here (\"ngram\" or "
			     "\"deepseek_mtp\": separate draft models and EAGLE heads are not loaded)",
			     method);
		goto out;
	}
	c->method = mtp ? SPEC_MTP : SPEC_NGRAM;
	int got = get_int(o, "num_speculative_tokens", 1, SPEC_MAX_TOKENS, &c->k, e);
	if (got < 0) {
		rc = -1;
		goto out;
	}
	if (mtp) {
		if (json_object_get(o, "prompt_lookup_min") || json_object_get(o, "prompt_lookup_max")) {
			rc = err_set(e, "--speculative-config: prompt_lookup_min/max apply to method ngram only");
			goto out;
		}
		if (!got)
			c->k = 1; /* vLLM's default for DeepSeek's one MTP layer */
		if (get_int(o, "disable_by_batch_size", 1, 1 << 20, &c->disable_by_batch_size, e) < 0)
			rc = -1;
		goto out;
	}
	if (got == 0) {
		rc = err_set(e, "--speculative-config: \"num_speculative_tokens\" is required");
		goto out;
	}
	int has_min = get_int(o, "prompt_lookup_min", 1, 1 << 20, &c->lookup_min, e);
	int has_max = has_min < 0 ? -1 : get_int(o, "prompt_lookup_max", 1, 1 << 20, &c->lookup_max, e);
	if (has_min < 0 || has_max < 0) {
		rc = -1;
		goto out;
	}
	if (!has_min && !has_max)
		c->lookup_min = c->lookup_max = 5;
	else if (!has_min)
		c->lookup_min = c->lookup_max;
	else if (!has_max)
		c->lookup_max = c->lookup_min;
	if (get_int(o, "disable_by_batch_size", 1, 1 << 20, &c->disable_by_batch_size, e) < 0) {
		rc = -1;
		goto out;
	}
	if (c->lookup_min > c->lookup_max)
		rc = err_set(e, "--speculative-config: prompt_lookup_min %d > prompt_lookup_max %d", c->lookup_min,
			     c->lookup_max);
out:
	json_decref(o);
	if (rc < 0)
		memset(c, 0, sizeof *c);
	return rc;
}
