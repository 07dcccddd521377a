/* safetensors reader. File layout: u64 little-endian header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data
 * section that the offsets index. Every shard is mmapped read-only for the set's lifetime. */
#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "io/json_util.h"

#define ST_HEADER_MAX (100u << 20) /* real headers are a few MB at most */

struct shard {
	char *path;
	const uint8_t *map; /* whole file */
	size_t size;
	const uint8_t *data; /* data section, data_len bytes */
	size_t data_len;
	json_t *header; /* kept during st_open only (index check) */
};

struct st_set {
	char *dir;
	const char *prefix; /* st_open_under's: names kept without it ("" for all) */
	struct shard *shards;
	int n_shards;
	struct st_tensor *t; /* sorted by name */
	int n, cap;
};

struct range {
	uint64_t begin, end;
	const char *name;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return strcmp(x->name, y->name); /* deterministic messages */
}

static int cmp_tensor(const void *a, const void *b)
{
	return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

/* MTP layers (index >= keep) and rotary caches are not part of the main model. */
static bool dropped(const char *name, int keep)
{
	if (strstr(name, "rotary_emb.inv_freq"))
		return true;
	const char *p = "model.layers.";
	if (keep < 0 || strncmp(name, p, strlen(p)))
		return false;
	char *end;
	long i = strtol(name + strlen(p), &end, 10);
	return end != name + strlen(p) && *end == '.' && i >= keep;
}

/* A non-negative integer that fits the data section arithmetic. */
static bool get_u64(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

/* Validates one header entry into t (data/file not yet set) and r. */
static int parse_entry(const struct shard *sh, const char *name, const json_t *v, struct st_tensor *t, struct range *r,
		       struct err *e)
{
	char buf[128];
	if (!json_is_object(v))
		return err_set(e, "%s: tensor %s: entry is not an object: %s", sh->path, name,
			       json_util_show(v, buf, sizeof buf));
	const char *dt = json_string_value(json_object_get(v, "dtype"));
	if (!dt || dtype_from_name(dt, &t->dtype))
		return err_set(e, "%s: tensor %s: unknown dtype %s", sh->path, name,
			       json_util_show(json_object_get(v, "dtype"), buf, sizeof buf));
	const json_t *shape = json_object_get(v, "shape");
	if (!json_is_array(shape))
		return err_set(e, "%s: tensor %s: shape %s is not a list", sh->path, name,
			       json_util_show(shape, buf, sizeof buf));
	if (json_array_size(shape) > ST_MAX_DIMS)
		return err_set(e, "%s: tensor %s: shape %s has more than %d dimensions", sh->path, name,
			       json_util_show(shape, buf, sizeof buf), ST_MAX_DIMS);
	t->ndim = (int)json_array_size(shape);
	uint64_t count = 1, d;
	for (int i = 0; i < t->ndim; i++) {
		if (!get_u64(json_array_get(shape, (size_t)i), &d))
			return err_set(e,
				       "%s: tensor %s: shape %s is not a list of non-negative "
				       "integers",
				       sh->path, name, json_util_show(shape, buf, sizeof buf));
		if (__builtin_mul_overflow(count, d, &count))
			return err_set(e, "%s: tensor %s: shape %s overflows", sh->path, name,
				       json_util_show(shape, buf, sizeof buf));
		t->shape[i] = (int64_t)d;
	}
	const json_t *off = json_object_get(v, "data_offsets");
	if (!json_is_array(off) || json_array_size(off) != 2 || !get_u64(json_array_get(off, 0), &r->begin) ||
	    !get_u64(json_array_get(off, 1), &r->end))
		return err_set(e, "%s: tensor %s: data_offsets %s is not [begin, end]", sh->path, name,
			       json_util_show(off, buf, sizeof buf));
	unsigned long long b = r->begin, en = r->end;
	if (b > en)
		return err_set(e, "%s: tensor %s: data_offsets [%llu, %llu]: begin > end", sh->path, name, b, en);
	if (en > sh->data_len)
		return err_set(e,
			       "%s: tensor %s: data_offsets [%llu, %llu] run past the data "
			       "section (%zu bytes)",
			       sh->path, name, b, en, sh->data_len);
	uint64_t nbytes;
	if (__builtin_mul_overflow(count, (uint64_t)dtype_size(t->dtype), &nbytes) || nbytes != en - b) {
		fmt_shape(buf, sizeof buf, t->ndim, t->shape);
		return err_set(e,
			       "%s: tensor %s: data_offsets [%llu, %llu] span %llu bytes, but "
			       "shape %s of %s needs %llu",
			       sh->path, name, b, en, en - b, buf, dt, (unsigned long long)nbytes);
	}
	t->nbytes = (size_t)nbytes;
	r->name = name;
	return 0;
}

static int push(struct st_set *s, const struct st_tensor *t, struct err *e)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 256;
		struct st_tensor *p = realloc(s->t, (size_t)cap * sizeof *p);
		if (!p)
			return err_set(e, "%s: out of memory", s->dir);
		s->t = p;
		s->cap = cap;
	}
	s->t[s->n] = *t;
	if (!(s->t[s->n].name = strdup(t->name)))
		return err_set(e, "%s: out of memory", s->dir);
	s->n++;
	return 0;
}

/* Validates every entry, rejects overlapping ranges, appends the kept tensors to s. */
static int parse_header(struct st_set *s, struct shard *sh, int keep, struct err *e)
{
	size_t n = json_object_size(sh->header), nr = 0;
	struct range *rs = malloc((n ? n : 1) * sizeof *rs);
	if (!rs)
		return err_set(e, "%s: out of memory", sh->path);
	const char *name;
	json_t *v;
	int rc = 0;
	json_object_foreach(sh->header, name, v)
	{
		if (strcmp(name, "__metadata__") == 0)
			continue;
		struct st_tensor t = {.name = name, .file = sh->path};
		if ((rc = parse_entry(sh, name, v, &t, &rs[nr], e)))
			goto out;
		t.data = sh->data + rs[nr].begin;
		nr++;
		size_t pl = strlen(s->prefix);
		if (strncmp(name, s->prefix, pl)) /* outside the model read (a vision tower) */
			continue;
		t.name = name + pl;
		if (!dropped(t.name, keep) && (rc = push(s, &t, e)))
			goto out;
	}
	qsort(rs, nr, sizeof *rs, cmp_range);
	const struct range *last = NULL; /* non-empty range reaching furthest */
	for (size_t i = 0; i < nr; i++) {
		if (rs[i].begin == rs[i].end)
			continue;
		if (last && rs[i].begin < last->end) {
			rc = err_set(e,
				     "%s: tensor %s: data_offsets [%llu, %llu] overlap tensor %s "
				     "[%llu, %llu]",
				     sh->path, rs[i].name, (unsigned long long)rs[i].begin,
				     (unsigned long long)rs[i].end, last->name, (unsigned long long)last->begin,
				     (unsigned long long)last->end);
			goto out;
		}
		if (!last || rs[i].end > last->end)
			last = &rs[i];
	}
out:
	free(rs);
	return rc;
}

/* mmaps PATH into a new shard of s and parses its header. */
static int open_shard(struct st_set *s, const char *path, int keep, struct err *e)
{
	struct shard *p = realloc(s->shards, (size_t)(s->n_shards + 1) * sizeof *p);
	if (!p)
		return err_set(e, "%s: out of memory", path);
	s->shards = p;
	struct shard *sh = &s->shards[s->n_shards++];
	memset(sh, 0, sizeof *sh);
	if (!(sh->path = strdup(path)))
		return err_set(e, "%s: out of memory", path);
	struct stat st;
	int fd = file_open_regular(path, &st, e);
	if (fd < 0)
		return -1;
	if (st.st_size < 8) {
		close(fd);
		return err_set(e,
			       "%s: header: file is %lld bytes, too short for the 8-byte header "
			       "length",
			       path, (long long)st.st_size);
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return err_set(e, "%s: cannot mmap: %s", path, strerror(errno));
	sh->map = m;
	sh->size = (size_t)st.st_size;
#ifdef MADV_HUGEPAGE
	madvise(m, sh->size, MADV_HUGEPAGE); /* best effort: needs THP for files */
#endif
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | sh->map[i];
	if (hlen > ST_HEADER_MAX)
		return err_set(e, "%s: header: length %llu exceeds the %u MB limit", path, (unsigned long long)hlen,
			       ST_HEADER_MAX >> 20);
	if (hlen > sh->size - 8)
		return err_set(e,
			       "%s: header: length %llu runs past the end of the file (%zu "
			       "bytes)",
			       path, (unsigned long long)hlen, sh->size);
	sh->data = sh->map + 8 + hlen;
	sh->data_len = sh->size - 8 - (size_t)hlen;
	json_error_t je;
	sh->header = json_loadb((const char *)sh->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
	if (!sh->header)
		return err_set(e, "%s: header: invalid JSON: %s (column %d)", path, je.text, je.column);
	if (!json_is_object(sh->header))
		return err_set(e, "%s: header: not a JSON object", path);
	return parse_header(s, sh, keep, e);
}

/* Shards listed by the index: every shard must open, every listed tensor be in its shard. */
static int open_indexed(struct st_set *s, const char *index, int keep, struct err *e)
{
	json_t *root, *files = json_object();
	if (!files)
		return err_set(e, "%s: out of memory", index);
	if (json_util_load(index, &root, e)) {
		json_decref(files);
		return -1;
	}
	char buf[128], path[4096];
	const char *name;
	json_t *v;
	int rc = 0;
	const json_t *wm = json_object_get(root, "weight_map");
	if (!json_is_object(wm) || json_object_size(wm) == 0) {
		rc = err_set(e, "%s: weight_map %s is not a non-empty object", index,
			     json_util_show(wm, buf, sizeof buf));
		goto out;
	}
	json_object_foreach((json_t *)wm, name, v)
	{
		const char *f = json_string_value(v);
		if (!f || !*f || strchr(f, '/') || !strcmp(f, "..") || !strcmp(f, ".")) {
			rc = err_set(e, "%s: tensor %s: shard %s is not a file name", index, name,
				     json_util_show(v, buf, sizeof buf));
			goto out;
		}
		if (json_object_get(files, f))
			continue;
		snprintf(path, sizeof path, "%s/%s", s->dir, f);
		if ((rc = open_shard(s, path, keep, e))) {
			err_prefix(e, "%s: tensor %s", index, name);
			goto out;
		}
		json_object_set_new(files, f, json_integer(s->n_shards - 1));
	}
	json_object_foreach((json_t *)wm, name, v)
	{
		const struct shard *sh = &s->shards[json_integer_value(json_object_get(files, json_string_value(v)))];
		if (!json_object_get(sh->header, name)) {
			rc = err_set(e, "%s: tensor %s: not found in its shard %s", index, name, sh->path);
			goto out;
		}
	}
out:
	json_decref(files);
	json_decref(root);
	return rc;
}

/* The single *.safetensors file of dir, into path. */
static int find_single(const char *dir, char *path, size_t n, struct err *e)
{
	DIR *d = opendir(dir);
	if (!d)
		return err_set(e, "%s: cannot open directory: %s", dir, strerror(errno));
	int found = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l > 12 && strcmp(de->d_name + l - 12, ".safetensors") == 0 && found++ == 0)
			snprintf(path, n, "%s/%s", dir, de->d_name);
	}
	closedir(d);
	if (found == 0)
		return err_set(e,
			       "%s: no model.safetensors, model.safetensors.index.json or "
			       "*.safetensors file",
			       dir);
	if (found > 1)
		return err_set(e, "%s: %d *.safetensors files but no model.safetensors.index.json", dir, found);
	return 0;
}

int st_open(const char *dir, int n_layers_keep, struct st_set **out, struct err *e)
{
	return st_open_under(dir, "", n_layers_keep, out, e);
}

int st_open_under(const char *dir, const char *prefix, int n_layers_keep, struct st_set **out, struct err *e)
{
	struct st_set *s = calloc(1, sizeof *s);
	char path[4096];
	struct stat st;
	int rc;
	*out = NULL;
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		return err_set(e, "%s: out of memory", dir);
	}
	s->prefix = prefix;
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
	if (stat(path, &st) == 0) {
		rc = open_indexed(s, path, n_layers_keep, e);
	} else {
		snprintf(path, sizeof path, "%s/model.safetensors", dir);
		rc = stat(path, &st) == 0 ? 0 : find_single(dir, path, sizeof path, e);
		if (rc == 0)
			rc = open_shard(s, path, n_layers_keep, e);
	}
	for (int i = 0; i < s->n_shards; i++) { /* headers were only needed to validate */
		json_decref(s->shards[i].header);
		s->shards[i].header = NULL;
	}
	if (rc == 0 && s->n > 0) {
		qsort(s->t, (size_t)s->n, sizeof *s->t, cmp_tensor);
		for (int i = 1; i < s->n && rc == 0; i++)
			if (strcmp(s->t[i - 1].name, s->t[i].name) == 0)
				rc = err_set(e, "%s: tensor %s%s: also in %s", s->t[i].file, s->prefix, s->t[i].name,
					     s->t[i - 1].file);
	}
	if (rc) {
		st_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

void st_close(struct st_set *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		free((char *)s->t[i].name);
	for (int i = 0; i < s->n_shards; i++) {
		struct shard *sh = &s->shards[i];
		if (sh->map)
			munmap((void *)sh->map, sh->size);
		json_decref(sh->header);
		free(sh->path);
	}
	free(s->t);
	free(s->shards);
	free(s->dir);
	free(s);
}

int st_count(const struct st_set *s) { return s->n; }

const struct st_tensor *st_at(const struct st_set *s, int i) { return i >= 0 && i < s->n ? &s->t[i] : NULL; }

const struct st_tensor *st_find(const struct st_set *s, const char *name)
{
	struct st_tensor key = {.name = name};
	if (s->n == 0)
		return NULL;
	return bsearch(&key, s->t, (size_t)s->n, sizeof key, cmp_tensor);
}

int st_expect(const struct st_set *s, const char *name, unsigned dtype_mask, int64_t rows, int64_t cols,
	      const struct st_tensor **out, struct err *e)
{
	const struct st_tensor *t = st_find(s, name);
	if (out)
		*out = t;
	if (!t)
		return err_set(e, "%s: missing tensor %s%s", s->dir, s->prefix, name);
	int64_t want[2] = {rows, cols};
	int nd = cols ? 2 : 1;
	if (t->ndim != nd || t->shape[0] != rows || (nd == 2 && t->shape[1] != cols)) {
		char got[96], exp[96];
		fmt_shape(got, sizeof got, t->ndim, t->shape);
		fmt_shape(exp, sizeof exp, nd, want);
		return err_set(e, "%s: tensor %s%s: shape %s, expected %s", t->file, s->prefix, name, got, exp);
	}
	if (!(dtype_mask & ST_DT(t->dtype))) {
		char exp[96] = "";
		int n = 0, total = __builtin_popcount(dtype_mask & ((1u << DT_COUNT) - 1));
		for (int d = 0; d < DT_COUNT; d++)
			if (dtype_mask & ST_DT(d)) {
				n++;
				snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%s",
					 n == 1       ? ""
					 : n == total ? " or "
						      : ", ",
					 dtype_name((enum dtype)d));
			}
		return err_set(e, "%s: tensor %s%s: dtype %s, expected %s", t->file, s->prefix, name,
			       dtype_name(t->dtype), exp);
	}
	return 0;
}
