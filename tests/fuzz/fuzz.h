/* Fuzz targets (tests/fuzz/fuzz_NAME.c): each defines libFuzzer's entry point and its name.
 * Built two ways:
 *   - `make fuzz` links them with clang's libFuzzer + ASan/UBSan (build-fuzz/fuzz_NAME);
 *     scripts/fuzz.sh NAME SECONDS runs one on its corpus.
 *   - `make all` links them with tests/fuzz/replay.c as build/tests/test_fuzz_NAME, which
 *     runs every input kept in tests/fuzz/corpus/NAME/ (seeds, and each input that once
 *     crashed or broke a property) as part of the test suite, under `make asan` too.
 * A target never prints; a broken property aborts (a crash to both drivers). Every parser of
 * untrusted input (request bodies, the Responses translation, chat templates, the tokenizer,
 * schemas, regexes, grammars, tool-call and reasoning parsers, checkpoint files) has a target,
 * and so has the engine as a whole (fuzz_engine.c: every choice ends once and every KV block
 * comes back). Targets check properties, not just "no crash": refused requests are 4xx with a
 * message, encode / decode round-trips, streamed parsers equal whole ones, regex DFAs agree with
 * PCRE2, a refused byte leaves the matcher unchanged. */
#ifndef MLA_TESTS_FUZZ_H
#define MLA_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern const char fuzz_name[]; /* the corpus directory's name */

#define FUZZ_CHECK(cond)                                                                            \
	do {                                                                                        \
		if (!(cond)) {                                                                      \
			fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                    \
		}                                                                                   \
	} while (0)

/* A fixture that every input needs could not be loaded: the target cannot run at all. */
#define FUZZ_SETUP(cond, what)                                                                                    \
	do {                                                                                                      \
		if (!(cond)) {                                                                                    \
			fprintf(stderr, "fuzz %s: cannot set up: %s (run from the repository root)\n", fuzz_name, \
				what);                                                                            \
			exit(2);                                                                                  \
		}                                                                                                 \
	} while (0)

#endif
