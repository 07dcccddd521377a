/* Test helpers shared by the tokenizer tests (header-only, static). */
#ifndef MLA_TESTS_TOK_TEST_UTIL_H
#define MLA_TESTS_TOK_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes text (with ' turned into ", so that JSON reads well in C strings) to a new temp
 * file; returns its path (one of 8 static buffers, reused in turn), NULL on failure. */
static inline const char *tok_test_write_tmp(const char *text)
{
	static char path[8][64];
	static int k;
	char *p = path[k++ % 8];
	strcpy(p, "/tmp/mlaserve-tok-XXXXXX");
	int fd = mkstemp(p);
	if (fd < 0)
		return NULL;
	size_t n = strlen(text);
	char *s = malloc(n + 1);
	if (!s) {
		close(fd);
		unlink(p);
		return NULL;
	}
	for (size_t i = 0; i <= n; i++)
		s[i] = text[i] == '\'' ? '"' : text[i];
	ssize_t w = write(fd, s, n);
	close(fd);
	free(s);
	return w == (ssize_t)n ? p : NULL;
}

#endif
