# mlaserve — one GNU Makefile. Targets: all (build/mlaserve), test, asan, bench, check-layers,
# clean.
# Every src/**/*.c except src/app/main.c is library code linked into the binary and every
# test; tests/unit/test_*.c each become one test binary; tests/fuzz/fuzz_*.c each become a
# test binary that replays its corpus (test_fuzz_*) and, with `make fuzz`, a libFuzzer one.

PKGS      := jansson libpcre2-8 libmicrohttpd libcurl icu-uc gnutls
CC        ?= cc
BUILD     ?= build
OPT       ?= -O2 -march=x86-64-v2 -mtune=native
CFLAGS    ?= $(OPT) -g
CFLAGS    += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -pthread -Isrc -Itests \
             $(shell pkg-config --cflags $(PKGS))
LDLIBS    += $(shell pkg-config --libs $(PKGS)) -lm -pthread
# MPI through Open MPI's C wrapper flags (no mpicc needed).
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null)
CFLAGS    += $(MPI_CFLAGS)
LDLIBS    += $(MPI_LIBS)

LIB_SRC   := $(filter-out src/app/main.c,$(shell find src -name '*.c' | sort))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HARNESS   := $(BUILD)/tests/harness.o
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TEST := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/tests/test_fuzz_%)
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/fuzz_%)

all: $(BUILD)/mlaserve $(TEST_BIN) $(FUZZ_TEST)

$(BUILD)/mlaserve: $(BUILD)/src/app/main.o $(BUILD)/libmlaserve.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libmlaserve.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(HARNESS) $(BUILD)/libmlaserve.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/test_fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(BUILD)/libmlaserve.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# libFuzzer binaries (only built by `make fuzz`, with clang, into build-fuzz/)
$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/libmlaserve.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

$(HARNESS): tests/harness.c tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

test: all
	BUILD=$(BUILD) bash tests/run.sh

# AddressSanitizer + UBSan build of everything, then the whole suite on it.
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -march=x86-64-v2 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		LDLIBS_EXTRA= all
	BUILD=build-asan MLASERVE_ASAN=1 bash tests/run.sh

# The fuzz targets under libFuzzer, ASan and UBSan (clang); scripts/fuzz.sh NAME SECONDS runs one.
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT="-O1 -march=x86-64-v2 -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		fuzz-bins

fuzz-bins: $(FUZZ_BIN)

bench: all
	bash bench/run.sh

# Every #include of src/ against the dependency list of docs/DESIGN.md (the suite runs it).
check-layers:
	@bash scripts/check_layers.sh docs/DESIGN.md src

clean:
	rm -rf build build-asan build-fuzz

.PHONY: all test asan fuzz fuzz-bins bench check-layers clean
.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
