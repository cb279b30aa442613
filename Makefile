# needle - build the library (static + shared), the CLI and the tests.
#   make            library + build/needle
#   make test       build and run every test; ends with "N passed, N failed"
#   make test-isa   the C tests once per kernel path this CPU runs (AVX-512, AVX2, portable)
#   make asan       the same tests under AddressSanitizer + UBSan (build-asan/)
#   make tsan       the same tests under ThreadSanitizer (gcc, build-tsan/)
#   make fuzz       libFuzzer harnesses (clang), run briefly
#   make CC=clang   any C11 compiler; the build is -Wall -Wextra -Werror clean
#   make install    PREFIX=...: header, libneedle.a/.so (SONAME), the CLI, needle.pc
#   make test-arm64 AArch64 (NEON) cross build, the whole C test suite under qemu-aarch64
#   make musl       a static CLI on musl (build-musl/needle)
#   make wasm       WebAssembly build + JavaScript API (web/); make test-wasm: Node + Chromium tests

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
# The default build targets the compiler's portable baseline (x86-64: SSE2) and carries the
# AVX2 and AVX-512 kernel copies, chosen at run time (NEEDLE_ISA forces one); NATIVE=1 compiles
# everything for this machine's CPU instead (the binary may not run on another).
NATIVE  ?= 0
ifeq ($(NATIVE),1)
ARCHFLAGS := -march=native
endif
WARN    := -Wall -Wextra -Werror
CFLAGS  += -std=c11 $(OPT) -g $(WARN) $(ARCHFLAGS) -fPIC -D_GNU_SOURCE -Iinclude -Isrc -pthread $(EXTRA_CFLAGS)
LDLIBS  += -lm -pthread

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/server/*' | sort)
# the target's architecture: *_avx512.c / *_avx2.c are x86-64 only, *_neon.c AArch64 only
TARGET_ARCH_NAME := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine)))
ifneq ($(TARGET_ARCH_NAME),x86_64)
LIB_SRC  := $(filter-out %_avx512.c %_avx2.c,$(LIB_SRC))
endif
ifneq ($(TARGET_ARCH_NAME),aarch64)
LIB_SRC  := $(filter-out %_neon.c,$(LIB_SRC))
endif
ifeq ($(TARGET_ARCH_NAME),aarch64)
# Debian's aarch64 gcc 12 stops with an internal compiler error (vect_transform_reduction) on
# some test loops (test_backend_ops.c, test_cpu_isa.c): the tests compile without the loop
# vectoriser there (the library does not hit it and keeps it)
$(BUILD)/tests/%: override CFLAGS += -fno-tree-loop-vectorize
endif
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# helper programs the tests drive (samplers, benches): tools/*.c -> BUILD/tools/*
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_BIN := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)

.PHONY: all lib test test-isa asan tsan fuzz clean check-golden long-inputs
all: $(BUILD)/needle $(BUILD)/libneedle.so

# `needle serve` (src/server/) uses GNU libmicrohttpd in build/needle only, when pkg-config
# finds it; libneedle never depends on it, and without it `needle serve` says how to get it.
# (native builds only: a cross build, e.g. make test-arm64, has no target copy of it)
ifeq ($(TARGET_ARCH_NAME),$(shell uname -m))
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
endif
ifneq ($(MHD_LIBS),)
SERVER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/server/*.c)))
CLI_OBJ  += $(SERVER_OBJ)
$(SERVER_OBJ) $(BUILD)/obj/src/cli/cmd_serve.o: override CFLAGS += -DND_WITH_SERVER $(shell pkg-config --cflags libmicrohttpd)
$(BUILD)/obj/src/server/assets.o: $(wildcard src/server/playground/*)
# not linked: src/server/mhd_dl.c opens the library when `needle serve` starts (every other
# command then runs without it and the TLS stack it pulls in: 2.6 MB less resident memory)
$(BUILD)/needle: override LDLIBS += -ldl
endif
# cmd_serve.c compiles differently with and without the library: a stamp that changes when the
# library appears or goes makes it rebuild (before, a stale object kept `needle serve` disabled)
SERVER_BUILD := $(if $(MHD_LIBS),with,without) libmicrohttpd
$(BUILD)/server.stamp: FORCE
	@mkdir -p $(BUILD); echo "$(SERVER_BUILD)" | cmp -s - $@ || echo "$(SERVER_BUILD)" > $@
$(BUILD)/obj/src/cli/cmd_serve.o: $(BUILD)/server.stamp

lib: $(BUILD)/libneedle.a $(BUILD)/libneedle.so

# ISA-specific kernels: a file named *_avx512.c or *_avx2.c is compiled with that instruction set
# whatever the build's baseline, so one binary can carry every path and pick one at run time
# (it must only be called after the CPU was checked for the features).
ISA_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c
ISA_AVX2   := -mavx2 -mfma -mf16c
$(BUILD)/obj/%_avx512.o: override CFLAGS += $(ISA_AVX512)
$(BUILD)/obj/%_avx2.o: override CFLAGS += $(ISA_AVX2)
# AArch64: NEON is the baseline; a *_dotprod_neon.c file also gets the Armv8.2 dot-product extension
# (called only when the CPU reports it: HWCAP_ASIMDDP)
$(BUILD)/obj/%_dotprod_neon.o: override CFLAGS += -march=armv8.2-a+dotprod

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libneedle.a: $(LIB_OBJ)
	@mkdir -p $(BUILD)
	rm -f $@
	ar rcs $@ $^

# The shared library: SONAME libneedle.so.MAJOR, and only the public needle_* symbols exported
# (tools/libneedle.map); the static library, the CLI and the tests see everything.
VERSION   := $(shell sed -n 's/^\#define NEEDLE_VERSION "\(.*\)"/\1/p' include/needle.h)
SO_MAJOR  := $(firstword $(subst ., ,$(VERSION)))
SONAME    := libneedle.so.$(SO_MAJOR)
$(BUILD)/libneedle.so: $(LIB_OBJ) tools/libneedle.map
	$(CC) -shared $(CFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=tools/libneedle.map -o $@ $(filter %.o,$^) $(LDLIBS)

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

# the C test suite once per kernel path this machine runs (NEEDLE_ISA=avx512, avx2, portable...)
test-isa: $(BUILD)/needle $(TEST_BIN) $(TOOL_BIN)
	@sh tools/test_isa.sh $(BUILD)

# make install PREFIX=/usr/local (DESTDIR for staging): the header, libneedle.a, libneedle.so
# (with its SONAME link), the CLI, the bundled model (share/needle/models) and needle.pc.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
.PHONY: install
install: $(BUILD)/needle $(BUILD)/libneedle.a $(BUILD)/libneedle.so
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/needle/models
	install -m 644 include/needle.h $(DESTDIR)$(PREFIX)/include/needle.h
	install -m 644 $(BUILD)/libneedle.a $(DESTDIR)$(LIBDIR)/libneedle.a
	install -m 755 $(BUILD)/libneedle.so $(DESTDIR)$(LIBDIR)/libneedle.so.$(VERSION)
	ln -sf libneedle.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libneedle.so
	install -m 755 $(BUILD)/needle $(DESTDIR)$(PREFIX)/bin/needle
	install -m 644 models/needle-default.cact models/tools.json $(DESTDIR)$(PREFIX)/share/needle/models/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@VERSION@|$(VERSION)|' tools/needle.pc.in \
	  > $(DESTDIR)$(LIBDIR)/pkgconfig/needle.pc

# AArch64 (NEON): cross-compiled (Debian gcc-aarch64-linux-gnu), statically linked, and the whole C
# test suite run under qemu-aarch64 (Debian qemu-user; its default CPU has the dot-product
# extension), two tests at a time where there are two CPUs (tools/test_cross.sh); then the
# integer-kernel test, the A8 golden test and `needle info` once more on a CPU without it
# (ARM64_NODOT_CPU), so both NEON integer kernels are chosen and checked.
# CI runs make test-arm64 (about 15 minutes on 2 cores at most: keep new tests cheap, see
# tools/test_cross.sh).  make test-arm64-quick, for development, leaves out the slowest tests
# (training, retrieval) and says its result is partial.
ARM64_CC   ?= aarch64-linux-gnu-gcc
ARM64_QEMU ?= qemu-aarch64
ARM64_NODOT_CPU ?= cortex-a72
.PHONY: test-arm64 test-arm64-quick test-bins
test-bins: $(BUILD)/needle $(TEST_BIN) $(TOOL_BIN)
test-arm64:
	$(MAKE) BUILD=build-arm64 CC=$(ARM64_CC) LDLIBS="-lm -pthread -static" test-bins
	sh tools/test_cross.sh build-arm64 $(ARM64_QEMU)
	$(ARM64_QEMU) -cpu $(ARM64_NODOT_CPU) build-arm64/needle info | grep -q 'int8 kernel: neon ('
	$(ARM64_QEMU) -cpu $(ARM64_NODOT_CPU) build-arm64/tests/test_cq_int
	$(ARM64_QEMU) -cpu $(ARM64_NODOT_CPU) build-arm64/tests/test_a8_golden
test-arm64-quick:
	$(MAKE) BUILD=build-arm64 CC=$(ARM64_CC) LDLIBS="-lm -pthread -static" test-bins
	ARM64_QUICK=1 sh tools/test_cross.sh build-arm64 $(ARM64_QEMU)
	$(ARM64_QEMU) -cpu $(ARM64_NODOT_CPU) build-arm64/needle info | grep -q 'int8 kernel: neon ('
	$(ARM64_QEMU) -cpu $(ARM64_NODOT_CPU) build-arm64/tests/test_cq_int
	$(ARM64_QEMU) -cpu $(ARM64_NODOT_CPU) build-arm64/tests/test_a8_golden

# A static CLI on musl (Debian musl-tools): one file that runs on any x86-64 Linux; no server.
.PHONY: musl
musl:
	$(MAKE) BUILD=build-musl CC=musl-gcc MHD_LIBS= LDLIBS="-lm -pthread -static" build-musl/needle

# WebAssembly (Debian emscripten): the library's inference part and web/needle_wasm.c -> web/dist/needle-core.mjs
# + .wasm, loaded by web/needle.mjs (the JavaScript API) in the demo page and in Node
# (node web/test.mjs).  SIMD128 kernels (cpu_simd.h); single-threaded.  NODE_PATH: emcc's JavaScript
# optimiser needs Debian's node-acorn, which a node from another source does not look for.
EMCC       ?= emcc
WASM_BUILD ?= build-wasm
# inference only: the trainer and the evaluation harness stay out (they assume 64-bit sizes)
WASM_SRC   := $(filter-out %_avx512.c %_avx2.c %_neon.c src/train/% src/eval/%,$(LIB_SRC)) web/needle_wasm.c
WASM_OBJ   := $(WASM_SRC:%.c=$(WASM_BUILD)/obj/%.o)
WASM_CFLAGS := -std=c11 -O3 $(WARN) -msimd128 -D_GNU_SOURCE -Iinclude -Isrc
WASM_EXPORTS := _needle_wasm_error,_needle_wasm_model_open,_needle_wasm_model_close,_needle_wasm_session_open
WASM_EXPORTS := $(WASM_EXPORTS),_needle_wasm_session_close,_needle_wasm_session_reset,_needle_wasm_send
WASM_EXPORTS := $(WASM_EXPORTS),_needle_wasm_free,_malloc,_free
.PHONY: wasm test-wasm
wasm: web/dist/needle-core.mjs
$(WASM_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(EMCC) $(WASM_CFLAGS) -MMD -MP -c $< -o $@
web/dist/needle-core.mjs: $(WASM_OBJ)
	@mkdir -p web/dist
	NODE_PATH=/usr/share/nodejs $(EMCC) -O3 -msimd128 -o $@ $(WASM_OBJ) -sMODULARIZE=1 -sEXPORT_ES6=1 -sEXPORT_NAME=createNeedleCore \
	  -sENVIRONMENT=web,worker -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=33554432 -sTOTAL_STACK=1048576 \
	  -sEXPORTED_FUNCTIONS=$(WASM_EXPORTS) -sEXPORTED_RUNTIME_METHODS=cwrap,UTF8ToString,HEAPU8
# the integer kernel test (tests/test_cq_int.c) built with the same flags and run in Node: the SIMD128
# kernel against the portable one, bit for bit
$(WASM_BUILD)/tests/test_cq_int.js: tests/test_cq_int.c tests/check.h $(WASM_OBJ)
	@mkdir -p $(dir $@)
	NODE_PATH=/usr/share/nodejs $(EMCC) $(WASM_CFLAGS) -Itests -o $@ $< $(filter-out %/needle_wasm.o,$(WASM_OBJ)) \
	  -sENVIRONMENT=node -sALLOW_MEMORY_GROWTH=1 -sSINGLE_FILE=1
test-wasm: wasm $(WASM_BUILD)/tests/test_cq_int.js
	node $(WASM_BUILD)/tests/test_cq_int.js
	node web/test.mjs
	python3 web/test_browser.py
-include $(WASM_OBJ:.o=.d)

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
# FORCE: the library is rebuilt by the inner make, so the harness is relinked every time
# (a stale harness once replayed an old library against a fixed crash)
build-fuzz/%: tests/fuzz/%.c FORCE
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libneedle.a
	clang -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=fuzzer,address,undefined -o $@ $< build-fuzz/libneedle.a -lm -pthread
FORCE:
.PHONY: FORCE
fuzz: $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	  echo "fuzz $$n for $(FUZZ_SECONDS)s"; \
	  if $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 build-fuzz/corpus-$$n tests/fuzz/seeds/$$n > build-fuzz/$$n.log 2>&1; \
	  then tail -n 2 build-fuzz/$$n.log; else tail -n 40 build-fuzz/$$n.log; echo "fuzz $$n FAILED"; exit 1; fi; done

clean:
	rm -rf build build-asan build-tsan build-fuzz build-arm64 build-musl $(WASM_BUILD) web/dist

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# the CUDA backend (make CUDA=1): nvcc objects, cuBLAS, -DND_WITH_CUDA
ifeq ($(CUDA),1)
include Makefile.cuda
endif

# The bundled default model, models/needle-default.cact, retrained from the seeds by our own
# trainer (tools/train_default_model.sh, then the fine-tuning rounds r13-r16, r20-r23 and r26; about
# six hours on 2 cores; docs/default-model.md).
.PHONY: default-model
default-model: $(BUILD)/needle
	sh tools/train_default_model.sh $(BUILD)/needle data/default-model
	sh tools/train_round_r16.sh $(BUILD)/needle data/default-model
	sh tools/train_round_r22.sh $(BUILD)/needle data/default-model
	sh tools/train_round_r23.sh $(BUILD)/needle data/default-model
	sh tools/train_round_r26.sh $(BUILD)/needle data/default-model
	cp data/default-model/r26.cact models/needle-default.cact
	cp data/default-model/r26_fp16.safetensors models/needle-default.safetensors
