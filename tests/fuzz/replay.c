/* The test-suite driver of a fuzz target (tests/fuzz/fuzz.h): runs every file of
 * tests/fuzz/corpus/NAME/ through the target, in name order, and prints one TAP line. An
 * input that crashes or breaks a property aborts the binary, which the runner reports with
 * the last lines of its output (the file's name among them). */
#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "fuzz/fuzz.h"

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static unsigned char *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, len = 0;
	unsigned char *buf = malloc(cap);
	while (buf) {
		len += fread(buf + len, 1, cap - len, f);
		if (len < cap)
			break;
		unsigned char *nb = realloc(buf, cap *= 2);
		if (!nb)
			free(buf);
		buf = nb;
	}
	fclose(f);
	*n = len;
	return buf;
}

int main(int argc, char **argv)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "tests/fuzz/corpus");
	size_t dl = strlen(dir);
	snprintf(dir + dl, sizeof dir - dl, "/%s", fuzz_name);
	DIR *d = opendir(dir);
	if (!d) {
		printf("not ok - fuzz %s: cannot open %s: %s\n", fuzz_name, dir, strerror(errno));
		return 1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof *names);
			if (!nn)
				return 1;
			names = nn;
		}
		if (!(names[n++] = strdup(de->d_name)))
			return 1;
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_names);
	size_t bytes = 0;
	for (size_t i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		size_t len;
		unsigned char *buf = read_all(path, &len);
		if (!buf) {
			printf("not ok - fuzz %s: cannot read %s\n", fuzz_name, path);
			return 1;
		}
		fprintf(stderr, "fuzz %s: %s\n", fuzz_name, path);
		LLVMFuzzerTestOneInput(buf, len);
		bytes += len;
		free(buf);
		free(names[i]);
	}
	free(names);
	if (n == 0) {
		printf("not ok - fuzz %s: %s holds no inputs\n", fuzz_name, dir);
		return 1;
	}
	printf("ok - fuzz %s: %zu inputs (%zu bytes) replayed\n", fuzz_name, n, bytes);
	return 0;
}
