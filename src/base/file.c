#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int file_open_regular(const char *path, struct stat *st, struct err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return err_set(e, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		close(fd);
		return err_set(e, "%s: cannot open: not a regular file", path);
	}
	return fd;
}

int file_read_all(const char *path, char **out, size_t *len, struct err *e)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(e, "%s: cannot open: %s", path, strerror(errno));
	size_t cap = 4096, n = 0, k;
	char *s = malloc(cap);
	/* one byte always stays free for the NUL */
	while (s && (k = fread(s + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap) {
			char *g = cap <= SIZE_MAX / 2 ? realloc(s, cap * 2) : NULL;
			if (!g)
				free(s);
			s = g;
			cap *= 2;
		}
	}
	int bad = ferror(f);
	fclose(f);
	if (!s)
		return err_set(e, "%s: out of memory", path);
	if (bad) {
		free(s);
		return err_set(e, "%s: read error", path);
	}
	s[n] = 0;
	*out = s;
	if (len)
		*len = n;
	return 0;
}
