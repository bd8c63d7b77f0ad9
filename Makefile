# The two commands users need: `make test` and `make harness`. Both set up
# everything they need first (Debian packages, .venv, pip packages).
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2
CPPBUILD := build/cpp

.PHONY: all setup build floor test test-cpp test-python harness bench bench-cpp clean

all: build

setup:
	@bash scripts/setup.sh

# flock: several shells (or agents) may build in one checkout; one at a time.
build: setup
	@flock build.lock env CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --no-build-isolation -e .

# The floor instrument (a measuring tool kept outside the product) when present.
FLOOR_SRC ?= /work/shared/tools/floor
FLOOR_DIR := build/floor
floor:
	@if [ -f $(FLOOR_SRC)/floor.c ]; then mkdir -p $(FLOOR_DIR) && cp $(FLOOR_SRC)/floor.c $(FLOOR_SRC)/build.sh $(FLOOR_DIR)/ \
	  && (cd $(FLOOR_DIR) && PATH=$(abspath $(VENV))/bin:$$PATH sh build.sh >/dev/null); \
	else echo "floor: $(FLOOR_SRC) not found; the harness reports the floor as missing"; fi

# googletest suites, examples/cpp, the cross-language round trips (C++ <-> torch)
# and a find_package(cpytree) consumer built against an installed copy.
test-cpp: setup
	@$(VENV)/bin/cmake -S . -B $(CPPBUILD) -G Ninja -DCPYTREE_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null
	@flock build.lock $(VENV)/bin/cmake --build $(CPPBUILD) -j $(JOBS)
	@flock build.lock $(VENV)/bin/ctest --test-dir $(CPPBUILD) --output-on-failure -j $(JOBS)

# C++ micro-benchmark of the header library (Release build of benchmarks/cpp).
CPPBENCH := build/cpp-bench
bench-cpp: setup
	@$(VENV)/bin/cmake -S . -B $(CPPBENCH) -G Ninja -DCPYTREE_BUILD_BENCHMARKS=ON -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null
	@flock build.lock $(VENV)/bin/cmake --build $(CPPBENCH) -j $(JOBS) --target cpytree_bench
	@$(CPPBENCH)/benchmarks/cpp/cpytree_bench $(BENCH_CPP_ARGS)

test-python: build
	@$(PY) -m pytest -q tests/python

test: test-cpp test-python

harness: build floor
	@CPYTREE_FLOOR_PATH=$(abspath $(FLOOR_DIR)) $(VENV)/bin/cpytree-harness $(HARNESS_ARGS)

bench: build floor
	@CPYTREE_FLOOR_PATH=$(abspath $(FLOOR_DIR)) $(PY) -m pytest benchmarks --benchmark-only -q

clean:
	rm -rf build harness-report
