# blockgtq: thin wrapper over CMake. The two commands a newcomer needs:
#   make demo   - build and run the quickstart (installs Debian packages if root)
#   make test   - configure, build and run the test suite
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test test-long test-asan bench docs fuzz fuzz-smoke clean

all: build

deps:
	@scripts/ensure-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/bin/bgtq demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Heavier sweeps hidden from the default run ([.long] test cases).
test-long: build
	@for t in $(BUILD)/bin/test_*; do echo "== $$t [.long]"; $$t "[.long]" || exit 1; done

# AddressSanitizer + UndefinedBehaviorSanitizer build of the same suite.
test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBGTQ_SANITIZE=ON -DBGTQ_BUILD_BENCH=OFF \
	  -DBGTQ_ENABLE_CUDA=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE "install|slow"

bench: build
	@$(BUILD)/bin/bgtq bench encode

# API reference (HTML) from the //! comments, with Doxygen when it is installed. Nothing
# else depends on it.
docs:
	@if command -v doxygen >/dev/null 2>&1; then \
	  mkdir -p $(BUILD)/docs && BGTQ_DOCS_DIR=$(BUILD)/docs doxygen Doxyfile && \
	  echo "API reference: $(BUILD)/docs/html/index.html (warnings: $(BUILD)/docs/doxygen-warnings.txt)"; \
	else \
	  echo "make docs: doxygen is not installed (Debian: apt-get install doxygen)."; \
	  echo "The API reference is also readable as the //! comments in include/bgtq/."; \
	fi

clean:
	rm -rf $(BUILD) build-asan build-fuzz
