#include "setup/cli_util.h"

#include <errno.h>
#include <stdlib.h>

int cli_int_parse(const char *flag, const char *v, int lo, int hi, int *out, struct err *e)
{
	char *end;
	errno = 0;
	long x = v ? strtol(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || x < lo || x > hi)
		return err_set(e, "%s: invalid value '%s' (expected an integer in [%d, %d])", flag, v ? v : "", lo,
			       hi);
	*out = (int)x;
	return 0;
}

static bool is_sep(char c) { return c == ' ' || c == ',' || c == '[' || c == ']' || c == '\n' || c == '\t'; }

int cli_ids_parse(const char *flag, const char *s, bool allow_empty, int32_t **out, size_t *n, struct err *e)
{
	size_t cap = 16, cnt = 0;
	int32_t *v = malloc(cap * sizeof *v);
	if (!v)
		return err_set(e, "%s: out of memory", flag);
	const char *p = s;
	for (;;) {
		while (is_sep(*p))
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long x = strtol(p, &end, 10);
		/* the id must end at a separator: "1x" or "1-2" is not a list */
		if (errno || end == p || x < 0 || x > INT32_MAX || (*end && !is_sep(*end))) {
			free(v);
			return err_set(e, "%s: invalid token id list '%s'", flag, s);
		}
		if (cnt == cap) {
			int32_t *g = realloc(v, (cap *= 2) * sizeof *v);
			if (!g) {
				free(v);
				return err_set(e, "%s: out of memory", flag);
			}
			v = g;
		}
		v[cnt++] = (int32_t)x;
		p = end;
	}
	if (!cnt && !allow_empty) {
		free(v);
		return err_set(e, "%s: empty token id list", flag);
	}
	*out = v;
	*n = cnt;
	return 0;
}
