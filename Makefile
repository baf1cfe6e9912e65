# blockgtq: thin wrapper over CMake. The two commands a newcomer needs:
#   make demo   - build and run the quickstart (installs Debian packages if root)
#   make test   - configure, build and run the test suite
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test test-long test-asan test-tsan bench docs fuzz fuzz-smoke clean

all: build

deps:
	@scripts/ensure-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/bin/bgtq demo

# Every ctest run below stops a test after TEST_TIMEOUT seconds (ctest --timeout: the
# tests set none of their own, and plain ctest has no default). The slowest entry takes
# under 30 s here, a few minutes under the sanitizers; a hung one (an emulated kernel's
# wild write can leave its CTA's threads waiting at a barrier) then fails in minutes
# instead of holding CI until its own limit.
TEST_TIMEOUT ?= 900
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout $(TEST_TIMEOUT)

# Heavier sweeps hidden from the default run ([.long] test cases).
test-long: build
	@for t in $(BUILD)/bin/test_*; do echo "== $$t [.long]"; $$t "[.long]" || exit 1; done

# AddressSanitizer + UndefinedBehaviorSanitizer build of the same suite (docs/errors.md):
# -fno-sanitize-recover=all, plus float-cast-overflow (GCC's -fsanitize=undefined leaves it
# out; a NaN or huge float cast to int is UB the fuzzers found twice). A Debug build (-O0
# -g1, assertions on): the sanitizers check every access as written, and it compiles about
# 5x faster than -O2 (the suite's run time is seconds either way); -g1 keeps the line
# tables the reports' stacks need and saves a fifth of the compile time of -g
# (test_cache_contract.cpp: 38 s, 46 s at -g; ASAN_DEBUG=-g for a debugger's variables). Skips the install
# test (a nested package build, no library code of its own). ASAN_TARGETS / ASAN_LABELS
# restrict it to some programs and ctest labels, ASAN_EXCLUDE (a ctest -E regex) leaves
# out test cases (.ci/run uses them to fit its budget). The programs are built as one goal
# (bgtq_group, CMakeLists.txt), so both cores stay busy.
ASAN_CXXFLAGS ?= -fsanitize=float-cast-overflow
ASAN_DEBUG    ?= -g1
ASAN_TARGETS  ?= all
ASAN_LABELS   ?=
ASAN_EXCLUDE  ?=
ASAN_GROUP     = $(filter-out all,$(ASAN_TARGETS))
test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=$(ASAN_DEBUG)" -DBGTQ_SANITIZE=ON -DBGTQ_BUILD_BENCH=OFF \
	  -DBGTQ_ENABLE_CUDA=OFF "-DCMAKE_CXX_FLAGS=$(ASAN_CXXFLAGS)" \
	  "-DBGTQ_GROUP_TARGETS=$(ASAN_GROUP)" $(CMAKE_ARGS) >/dev/null
	@cmake --build build-asan -j $(JOBS) --target $(if $(ASAN_GROUP),bgtq_group,all)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout $(TEST_TIMEOUT) -LE "install|slow" $(if $(ASAN_LABELS),-L "$(ASAN_LABELS)") \
	  $(if $(ASAN_EXCLUDE),-E "$(ASAN_EXCLUDE)")

# ThreadSanitizer build of the programs that run threads (docs/errors.md, "make
# test-tsan"): the thread pool and its users (core, attention, eval, errors, the CLI's
# eval, the examples) and the CUDA emulator (cuda_emu), whose CTA threads are
# ThreadSanitizer fibers (or OS threads) that only the barriers order, so a kernel's
# missing __syncthreads or __syncwarp is reported as a data race on shared memory: a
# racecheck of the kernels without a GPU (race_probe:* checks that it reports).
# RelWithDebInfo at -O1 (-O1 -g1): the emulated kernels run about 5x slower under TSan at
# -O0; at -O1 the emulator's test file compiles in 43 CPU-s instead of 63 at -O2, and
# CI's subset runs as fast (its cuda_emu entries: 91 s against 83 s of CPU). -g1 (line
# tables and functions, no variables): a report's stacks still name file:line, and a
# test file compiles in two thirds of the time (test_cache_contract.cpp: 29 s, 44 s at -g).
# Each report goes to build-tsan/tsan-report.<pid> (TSAN_OPTIONS log_path), and any
# report fails the target, also where a test expects a non-zero exit. TSAN_EMU_SPEC (a
# Catch2 test spec) registers only some test_cuda_emu cases: .ci/run uses "[tsan]".
# Left out: the Python helpers of bench/gpu (gpu_script:*), `bgtq bench` (timing
# loops, 44 s under TSan) and the entries labelled slow (cli:test_demo: the demo at D = 128).
TSAN_TARGETS  ?= test_core test_attention test_eval test_errors test_cuda_emu bench_decode_emu bgtq \
                 quickstart integration_engine integration_parallel llama2c_generate
TSAN_LABELS   ?= ^(core|attention|eval|errors|cuda_emu|cli|examples)$$
TSAN_EXCLUDE  ?= ^gpu_script:|^cli:test_bench$$
TSAN_EMU_SPEC ?=
test-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
	  -DBGTQ_SANITIZE_THREAD=ON -DBGTQ_BUILD_BENCH=OFF \
	  -DBGTQ_ENABLE_CUDA=OFF "-DBGTQ_GROUP_TARGETS=$(TSAN_TARGETS)" "-DBGTQ_EMU_TEST_SPEC=$(TSAN_EMU_SPEC)" \
	  $(CMAKE_ARGS) >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target bgtq_group
	@rm -f build-tsan/tsan-report.*
	@cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 log_path=$$PWD/tsan-report" \
	  ctest --output-on-failure -j $(JOBS) --timeout $(TEST_TIMEOUT) -L "$(TSAN_LABELS)" -LE slow $(if $(TSAN_EXCLUDE),-E "$(TSAN_EXCLUDE)"); rc=$$?; \
	  if ls tsan-report.* >/dev/null 2>&1; then \
	    echo "test-tsan: ThreadSanitizer reports (build-tsan/tsan-report.*):"; head -n 60 tsan-report.*; exit 1; fi; \
	  exit $$rc

bench: build
	@$(BUILD)/bin/bgtq bench encode

# API reference (HTML) from the //! comments, with Doxygen when it is installed. Nothing
# else depends on it. The Doxyfile writes to build/docs; OUTPUT_DIRECTORY and WARN_LOGFILE
# appended to it on doxygen's standard input move that to $(BUILD)/docs (later settings win).
docs:
	@if command -v doxygen >/dev/null 2>&1; then \
	  mkdir -p "$(BUILD)/docs" && \
	  { cat Doxyfile; echo 'OUTPUT_DIRECTORY = "$(BUILD)/docs"'; \
	    echo 'WARN_LOGFILE = "$(BUILD)/docs/doxygen-warnings.txt"'; } | doxygen - && \
	  echo "API reference: $(BUILD)/docs/html/index.html (warnings: $(BUILD)/docs/doxygen-warnings.txt)"; \
	else \
	  echo "make docs: doxygen is not installed (Debian: apt-get install doxygen)."; \
	  echo "The API reference is also readable as the //! comments in include/bgtq/."; \
	fi

# libFuzzer targets (clang) in build-fuzz/: the .npy reader, the plan loader, the llama2.c
# checkpoint and tokenizer loaders, the packed-page codecs, decode attention and the
# eval-results JSON reader of `bgtq plot eval` (tests/fuzz/target_*.hpp, docs/errors.md
# section 7). deps first (scripts/ensure-deps.sh): it checks for the CMake and Eigen the
# fuzz project needs.
FUZZ_CXX     ?= $(shell command -v clang++-14 || command -v clang++)
FUZZ_SECONDS ?= 60
fuzz: deps
	@test -n "$(FUZZ_CXX)" || { echo "make fuzz needs clang (apt-get install clang-14)"; exit 1; }
	@cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

# Runs every fuzz target for FUZZ_SECONDS from its seed corpus; fails on any crash.
fuzz-smoke: fuzz
	@tests/fuzz/smoke.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-cov
