#include "io/json_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

int json_util_load(const char *path, json_t **out, struct err *e)
{
	struct stat st;
	int fd = file_open_regular(path, &st, e);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		close(fd);
		return err_set(e, "%s: cannot open: %s", path, strerror(errno));
	}
	json_error_t je;
	*out = json_loadf(f, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	fclose(f);
	if (!*out)
		return err_set(e, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
	return 0;
}

int json_util_parse(const char *text, size_t len, const char *what, json_t **out, struct err *e)
{
	json_error_t je;
	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!*out)
		return err_set(e, "%s: line %d column %d: %s", what, je.line, je.column, je.text);
	return 0;
}

const char *json_util_show(const json_t *v, char *buf, size_t n)
{
	if (n == 0)
		return buf;
	buf[0] = 0;
	if (!v) {
		snprintf(buf, n, "(absent)");
		return buf;
	}
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		return buf;
	size_t len = strlen(s);
	if (len < n)
		memcpy(buf, s, len + 1);
	else if (n > 4) /* too long: keep the start */
		snprintf(buf, n, "%.*s...", (int)(n - 4), s);
	free(s);
	return buf;
}

const json_t *json_util_get(const json_t *obj, const char *key)
{
	const char *dot = strrchr(key, '.');
	return json_object_get(obj, dot ? dot + 1 : key);
}

static int wrong_type(struct err *e, const char *what, const char *key, const json_t *v, const char *expected)
{
	char buf[128];
	return err_set(e, "%s: key \"%s\": expected %s, got %s", what, key, expected,
		       json_util_show(v, buf, sizeof buf));
}

int json_util_int(const json_t *obj, const char *what, const char *key, long long def, long long *out, struct err *e)
{
	const json_t *v = json_util_get(obj, key);
	*out = def;
	if (!v || json_is_null(v))
		return 1;
	if (!json_is_integer(v))
		return wrong_type(e, what, key, v, "an integer");
	*out = json_integer_value(v);
	return 0;
}

int json_util_num(const json_t *obj, const char *what, const char *key, double def, double *out, struct err *e)
{
	const json_t *v = json_util_get(obj, key);
	*out = def;
	if (!v || json_is_null(v))
		return 1;
	if (!json_is_number(v))
		return wrong_type(e, what, key, v, "a number");
	*out = json_number_value(v);
	return 0;
}

int json_util_bool(const json_t *obj, const char *what, const char *key, bool def, bool *out, struct err *e)
{
	const json_t *v = json_util_get(obj, key);
	*out = def;
	if (!v || json_is_null(v))
		return 1;
	if (!json_is_boolean(v))
		return wrong_type(e, what, key, v, "true or false");
	*out = json_is_true(v);
	return 0;
}

int json_util_str(const json_t *obj, const char *what, const char *key, const char *def, const char **out,
		  struct err *e)
{
	const json_t *v = json_util_get(obj, key);
	*out = def;
	if (!v || json_is_null(v))
		return 1;
	if (!json_is_string(v))
		return wrong_type(e, what, key, v, "a string");
	*out = json_string_value(v);
	return 0;
}

int json_util_bad(struct err *e, const char *what, const char *key, const json_t *v, const char *adj, const char *fmt,
		  ...)
{
	char val[128], why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return err_set(e, "%s: key \"%s\": %s value %s (%s)", what, key, adj, json_util_show(v, val, sizeof val), why);
}

bool json_util_id(const json_t *v, int32_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= INT32_MAX)
		return false;
	*out = (int32_t)json_integer_value(v);
	return true;
}
