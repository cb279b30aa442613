# needle - build the library (static + shared), the CLI and the tests.
#   make            library + build/needle
#   make test       build and run every test; ends with "N passed, N failed"
#   make asan       the same tests under AddressSanitizer + UBSan (build-asan/)
#   make tsan       the same tests under ThreadSanitizer (gcc, build-tsan/)
#   make fuzz       libFuzzer harnesses (clang), run briefly
#   make CC=clang   any C11 compiler; the build is -Wall -Wextra -Werror clean

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
NATIVE  ?= 1
ifeq ($(NATIVE),1)
ARCHFLAGS := -march=native
endif
WARN    := -Wall -Wextra -Werror
CFLAGS  += -std=c11 $(OPT) -g $(WARN) $(ARCHFLAGS) -fPIC -D_GNU_SOURCE -Iinclude -Isrc -pthread $(EXTRA_CFLAGS)
LDLIBS  += -lm -pthread

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/server/*' | sort)
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# helper programs the tests drive (samplers, benches): tools/*.c -> BUILD/tools/*
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_BIN := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)

.PHONY: all lib test asan tsan fuzz clean check-golden long-inputs
all: $(BUILD)/needle $(BUILD)/libneedle.so

# `needle serve` (src/server/) links GNU libmicrohttpd into build/needle only, when pkg-config
# finds it; libneedle never depends on it, and without it `needle serve` says how to get it.
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
ifneq ($(MHD_LIBS),)
SERVER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/server/*.c)))
CLI_OBJ  += $(SERVER_OBJ)
$(SERVER_OBJ) $(BUILD)/obj/src/cli/cmd_serve.o: override CFLAGS += -DND_WITH_SERVER $(shell pkg-config --cflags libmicrohttpd)
$(BUILD)/obj/src/server/assets.o: $(wildcard src/server/playground/*)
$(BUILD)/needle: override LDLIBS += $(MHD_LIBS)
endif

lib: $(BUILD)/libneedle.a $(BUILD)/libneedle.so

# ISA-specific kernels: a file named *_avx512.c or *_avx2.c is compiled with that instruction set
# whatever the build's baseline, so one binary can carry every path and pick one at run time
# (it must only be called after the CPU was checked for the features).
ISA_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c
ISA_AVX2   := -mavx2 -mfma -mf16c
$(BUILD)/obj/%_avx512.o: override CFLAGS += $(ISA_AVX512)
$(BUILD)/obj/%_avx2.o: override CFLAGS += $(ISA_AVX2)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libneedle.a: $(LIB_OBJ)
	@mkdir -p $(BUILD)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/libneedle.so: $(LIB_OBJ)
	$(CC) -shared $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/needle: $(CLI_OBJ) $(BUILD)/libneedle.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libneedle.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libneedle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libneedle.a $(LDLIBS)

$(BUILD)/tools/%: tools/%.c $(BUILD)/libneedle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libneedle.a $(LDLIBS)

test: $(BUILD)/needle $(TEST_BIN) $(TOOL_BIN)
	@sh tools/run_tests.sh $(BUILD)

# the oversized inputs of issue 20 (D2) at full size: outcome, wall time and peak RSS of each
long-inputs: $(BUILD)/needle
	@sh tests/long/time_long_inputs.sh $(BUILD)

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDLIBS="-lm -pthread -fsanitize=address,undefined" test

# ThreadSanitizer: gcc (its runtime ships with gcc); the Python oracles are skipped
# (they would run an uninstrumented interpreter against instrumented binaries for long)
tsan:
	NEEDLE_SKIP_PYTHON=1 $(MAKE) BUILD=build-tsan CC=gcc OPT=-O1 EXTRA_CFLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  LDLIBS="-lm -pthread -fsanitize=thread" test

FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_SECONDS ?= 20
build-fuzz/%: tests/fuzz/%.c
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libneedle.a
	clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=fuzzer,address,undefined -o $@ $< build-fuzz/libneedle.a -lm -pthread
fuzz: $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	  echo "fuzz $$n for $(FUZZ_SECONDS)s"; \
	  if $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 build-fuzz/corpus-$$n tests/fuzz/seeds/$$n > build-fuzz/$$n.log 2>&1; \
	  then tail -n 2 build-fuzz/$$n.log; else tail -n 40 build-fuzz/$$n.log; echo "fuzz $$n FAILED"; exit 1; fi; done

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# the CUDA backend (make CUDA=1): nvcc objects, cuBLAS, -DND_WITH_CUDA
ifeq ($(CUDA),1)
include Makefile.cuda
endif

# The bundled default model, models/needle-default.cact, retrained from the seeds by our own
# trainer (tools/train_default_model.sh; about 90 minutes on 2 cores; docs/default-model.md).
.PHONY: default-model
default-model: $(BUILD)/needle
	sh tools/train_default_model.sh $(BUILD)/needle data/default-model
