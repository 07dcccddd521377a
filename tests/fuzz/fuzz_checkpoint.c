/* Fuzz target "checkpoint": the files of a checkpoint directory, each parsed as the loader
 * does. Byte 0 picks the file; the rest is its content:
 *   0: model.safetensors (headers validated, every tensor inside the file);
 *   1: config.json;  2: tokenizer_config.json (and 3: generation_config.json);
 *   4: tokenizer.json.
 * Properties: a bad file is an error with a message, never a crash, a hang or a leak; a
 * safetensors file that opens has every tensor's bytes inside it and of its shape's size. */
#include <string.h>
#include <unistd.h>

#include "base/dtype.h"
#include "fuzz/fuzz.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/hf_config.h"
#include "tok/tokenizer.h"

const char fuzz_name[] = "checkpoint";

static char dir[64];

static void write_file(const char *name, const uint8_t *p, size_t n)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	FUZZ_SETUP(f, path);
	FUZZ_SETUP(fwrite(p, 1, n, f) == n && fclose(f) == 0, path);
}

static char *cstr(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	FUZZ_SETUP(s, "out of memory");
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

static void safetensors(const uint8_t *p, size_t n)
{
	write_file("model.safetensors", p, n);
	struct st_set *s = NULL;
	struct err e;
	e.msg[0] = 0;
	if (st_open(dir, -1, &s, &e) < 0) {
		FUZZ_CHECK(!s && e.msg[0]);
		return;
	}
	for (int i = 0; i < st_count(s); i++) {
		const struct st_tensor *t = st_at(s, i);
		FUZZ_CHECK(t->name && t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
		size_t elems = 1;
		for (int d = 0; d < t->ndim; d++)
			elems *= (size_t)t->shape[d];
		FUZZ_CHECK(t->nbytes == elems * dtype_size(t->dtype));
		FUZZ_CHECK(t->nbytes <= n);
		/* touch the first and the last byte: inside the mapping */
		if (t->nbytes) {
			volatile uint8_t x = ((const uint8_t *)t->data)[0];
			x = ((const uint8_t *)t->data)[t->nbytes - 1];
			(void)x;
		}
		FUZZ_CHECK(st_find(s, t->name) == t);
		const struct st_tensor *out;
		(void)st_expect(s, t->name, ST_FLOATS, t->ndim > 0 ? t->shape[0] : 1, t->ndim > 1 ? t->shape[1] : 0,
				&out, &e);
	}
	st_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		snprintf(dir, sizeof dir, "/tmp/mlaserve-fuzz-%d", (int)getpid());
		char cmd[128];
		snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
		FUZZ_SETUP(system(cmd) == 0, dir);
	}
	if (size < 1 || size > 65536)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	struct err e;
	e.msg[0] = 0;
	switch (data[0] % 5) {
	case 0: safetensors(p, n); break;
	case 1: {
		char *s = cstr(p, n);
		struct model_config cfg;
		if (config_parse(s, "config.json", &cfg, &e) < 0)
			FUZZ_CHECK(e.msg[0]);
		free(s);
		break;
	}
	case 2:
	case 3: {
		char *s = cstr(p, n);
		struct hf_config cfg;
		if (hf_config_parse(data[0] % 5 == 2 ? s : NULL, data[0] % 5 == 3 ? s : NULL, &cfg, &e) < 0)
			FUZZ_CHECK(e.msg[0]);
		else
			hf_config_free(&cfg);
		free(s);
		break;
	}
	default: {
		write_file("tokenizer.json", p, n);
		char path[128];
		snprintf(path, sizeof path, "%s/tokenizer.json", dir);
		struct tok *t = NULL;
		if (tok_load(path, &t, &e) < 0) {
			FUZZ_CHECK(!t && e.msg[0]);
		} else {
			int32_t *ids = NULL;
			size_t n_ids = 0;
			static const char text[] = "Hello, world! 123 <｜begin▁of▁sentence｜> héllo\n\n  x";
			if (tok_encode(t, text, sizeof text - 1, true, &ids, &n_ids, &e) == 0) {
				char *out = NULL;
				if (tok_decode(t, ids, n_ids, false, &out, NULL, &e) == 0)
					free(out);
				free(ids);
			}
			tok_free(t);
		}
	}
	}
	return 0;
}
