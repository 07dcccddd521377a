/* The weight format table (ops/wformat.h) and what every format shares: the row-major view,
 * bytes and element of a wmat, and --quantization's values. */
#include "ops/wformat.h"

#include <stdio.h>
#include <string.h>

#include "ops/prepack.h"

/* The table: one row per format, keyed by wmat.dtype (each row's file defines it). */
extern const struct wformat wformat_f32, wformat_f16, wformat_bf16; /* wf_float.c */
extern const struct wformat wformat_fp8;                            /* wf_fp8.c */
extern const struct wformat wformat_int8;                           /* wf_int8.c */
extern const struct wformat wformat_fp4;                            /* wf_fp4.c */
extern const struct wformat wformat_int4;                           /* wf_int4.c */
static const struct wformat *const formats[DT_COUNT] = {
	[DT_F32] = &wformat_f32,     [DT_F16] = &wformat_f16, [DT_BF16] = &wformat_bf16,
	[DT_F8_E4M3] = &wformat_fp8, [DT_I8] = &wformat_int8, [DT_F4_E2M1] = &wformat_fp4,
	[DT_I4] = &wformat_int4,
};

const struct wformat *wformat_of(enum dtype dt) { return (unsigned)dt < DT_COUNT ? formats[dt] : NULL; }

const struct wformat *wformat_by_name(const char *name)
{
	for (int i = 0; i < DT_COUNT; i++)
		if (formats[i] && !strcmp(formats[i]->name, name))
			return formats[i];
	return NULL;
}

int wformat_parse_quantization(const char *v, const struct wformat **out, struct err *e)
{
	const struct wformat *f = wformat_by_name(v);
	if (f && f->quantize) {
		*out = f;
		return 0;
	}
	char names[512] = ""; /* "fp8: what it does; int8: ..." */
	for (int i = 0; i < DT_COUNT; i++)
		if (formats[i] && formats[i]->quantize) {
			size_t at = strlen(names);
			snprintf(names + at, sizeof names - at, "%s%s: %s", at ? "; " : "", formats[i]->name,
				 formats[i]->quant_help);
		}
	return err_set(e, "--quantization: unsupported method '%s' (%s)", v, names);
}

void wformat_quant_names(char *buf, size_t n, const char *sep)
{
	size_t at = 0;
	buf[0] = 0;
	for (int i = 0; i < DT_COUNT && at < n; i++)
		if (formats[i] && formats[i]->quantize)
			at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? sep : "", formats[i]->name);
}

static const struct wformat *format_of(const struct wmat *w)
{
	const struct wformat *f = wformat_of(w->dtype);
	CHECK(f && "unsupported weight dtype");
	return f;
}

struct wmat wmat_view(const struct wmat *w, int r0, int nr, int c0, int nc)
{
	CHECK(r0 >= 0 && nr >= 0 && r0 + nr <= w->rows && c0 >= 0 && nc >= 0 && c0 + nc <= w->cols);
	const struct wformat *f = format_of(w);
	if (f->view)
		return f->view(w, r0, nr, c0, nc);
	struct wmat v = *w;
	v.data = (const char *)w->data + ((size_t)r0 * (size_t)w->ld + (size_t)c0) * (size_t)f->bits / 8;
	v.rows = nr;
	v.cols = nc;
	v.row0 = w->row0 + r0;
	v.col0 = w->col0 + c0;
	v.packed = NULL;
	v.packed_scale = NULL;
	if (w->packed && r0 % PREPACK_ROWS == 0 && c0 == 0) { /* fewer columns: a prefix of each block */
		size_t rb = (size_t)(r0 / PREPACK_ROWS);
		v.packed = w->packed + rb * (size_t)w->packed_pairs * prepack_words_per_pair(f->bits);
		if (w->packed_scale)
			v.packed_scale = w->packed_scale + rb * (size_t)prepack_segments(w) * PREPACK_ROWS;
	}
	return v;
}

size_t wmat_bytes(const struct wmat *w)
{
	const struct wformat *f = format_of(w);
	if (f->bytes)
		return f->bytes(w);
	size_t b = (size_t)w->rows * (size_t)w->cols * (size_t)f->bits / 8;
	if (f->scale != WSCALE_NONE)
		b += (size_t)((w->rows + w->blk_r - 1) / w->blk_r) * (size_t)((w->cols + w->blk_c - 1) / w->blk_c) * 4;
	return b;
}

float wmat_get(const struct wmat *w, int r, int c) { return format_of(w)->get(w, r, c); }
