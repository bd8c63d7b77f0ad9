# cpytree's make targets. The development ones are here; the others are
# included from make/:
#   make/reliability.mk  sanitizers, fuzzing, stress runs, free-threaded CPython
#   make/release.mk      wheels, the sdist, and the suites against them
#                        (every CPython, torch release and architecture)
# `make test` and `make harness` set up what they need first (Debian
# packages, .venv, pip packages).
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2
# pytest-xdist workers for tests/python (here and in scripts/test_python.sh);
# 0 runs the suite in one process.
PYTEST_WORKERS ?= $(JOBS)
export PYTEST_WORKERS
# One build at a time: several checkouts (worktrees) can share one lock file
# (BUILD_LOCK=/tmp/cpytree-build.lock) so two builds never share the cores.
BUILD_LOCK ?= build.lock
export BUILD_LOCK
# Inductor's caches (compiled kernels, precompiled headers per torch release
# and AOTI compile) go under this checkout's build/, not
# /tmp/torchinductor_<user>: they leave with the checkout.
TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/build/inductor-cache
export TORCHINDUCTOR_CACHE_DIR
CPPBUILD := build/cpp

.PHONY: all setup setup-system build floor test test-cpp test-python lint harness bench bench-cpp clean \
        feature-study \
        test-aoti time-aoti

all: build

# Debian packages, the .venv and its pip packages (scripts/setup.sh).
setup:
	@bash scripts/setup.sh

# The Debian packages alone (wheels and the sdist build in venvs of their own).
setup-system:
	@SETUP_VENV=0 bash scripts/setup.sh

# The editable install of the package with its extension (pip, under
# BUILD_LOCK). It keeps its debug information (install.strip=false) for
# profiling; wheels are stripped (make/release.mk).
build: setup
	@flock $(BUILD_LOCK) env CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --no-build-isolation \
	  -C install.strip=false -e .

# The floor instrument (a minimal C traversal kept outside the product) when
# present; the harness reports it as missing otherwise.
FLOOR_SRC ?= $(abspath ../shared/tools/floor)
FLOOR_DIR := build/floor
floor:
	@if [ -f $(FLOOR_SRC)/floor.c ]; then mkdir -p $(FLOOR_DIR) && cp $(FLOOR_SRC)/floor.c $(FLOOR_SRC)/build.sh $(FLOOR_DIR)/ \
	  && (cd $(FLOOR_DIR) && PATH=$(abspath $(VENV))/bin:$$PATH sh build.sh >/dev/null); \
	else echo "floor: $(FLOOR_SRC) not found; the harness reports the floor as missing"; fi

# googletest suites, examples/cpp, the cross-language round trips (C++ <-> torch)
# and a find_package(cpytree) consumer built against an installed copy.
# simdjson: the pinned one (scripts/host_simdjson.sh), as the wheels link it.
test-cpp: setup
	@sj=$$(scripts/host_simdjson.sh | tail -1) && \
	$(VENV)/bin/cmake -S . -B $(CPPBUILD) -G Ninja -DCPYTREE_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -Dsimdjson_DIR=$$sj/lib/cmake/simdjson -DCPYTREE_EXPECTED_SIMDJSON=$$(cat $$sj/version) \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null
	@flock $(BUILD_LOCK) $(VENV)/bin/cmake --build $(CPPBUILD) -j $(JOBS)
	@flock $(BUILD_LOCK) $(VENV)/bin/ctest --test-dir $(CPPBUILD) --output-on-failure -j $(JOBS)

# C++ micro-benchmark of the header library (Release build of benchmarks/cpp),
# then the Python engine on the same tree (benchmarks/cpp/engine_compare.py;
# skipped with a note when the extension is not built: `make build`).
CPPBENCH := build/cpp-bench
bench-cpp: setup
	@$(VENV)/bin/cmake -S . -B $(CPPBENCH) -G Ninja -DCPYTREE_BUILD_BENCHMARKS=ON -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null
	@flock $(BUILD_LOCK) $(VENV)/bin/cmake --build $(CPPBENCH) -j $(JOBS) --target cpytree_bench
	@$(CPPBENCH)/benchmarks/cpp/cpytree_bench $(BENCH_CPP_ARGS)
	@$(PY) benchmarks/cpp/engine_compare.py $(BENCH_CPP_ARGS)

# examples/aoti end to end: export and AOT-compile the model (torch's
# AOTInductor; skipped when build/aoti/model.pt2 is newer than model.py),
# build the C++ program against the pip wheel's libtorch, then tests/cpp/aoti
# (C++ outputs equal Python's, mismatch errors). Needs no `make build`: the
# C++ side is the header library alone.
AOTI := build/aoti
test-aoti: setup
	@if [ ! -f $(AOTI)/model.pt2 ] || [ examples/aoti/model.py -nt $(AOTI)/model.pt2 ]; then \
	  flock $(BUILD_LOCK) $(PY) examples/aoti/model.py $(AOTI); fi
	@$(VENV)/bin/cmake -S examples/aoti -B $(AOTI)/cmake -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
	  -Dsimdjson_DIR=$$(scripts/host_simdjson.sh | tail -1)/lib/cmake/simdjson \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null
	@flock $(BUILD_LOCK) $(VENV)/bin/cmake --build $(AOTI)/cmake -j $(JOBS)
	@$(PY) -m pytest -q -p no:cacheprovider --noconftest tests/cpp/aoti

# The pytree work around one call of the examples/aoti model: C++ (allocation
# counts beside the times) and torch's Python pytree.
time-aoti: test-aoti
	@$(AOTI)/cmake/aoti_main $(AOTI)/model.pt2 --time $(or $(AOTI_ITERS),2000)
	@$(PY) examples/aoti/model.py $(AOTI) --time-pytree --iters $(or $(AOTI_ITERS),2000)

# tests/python against the editable install (pytest-xdist).
test-python: build
	@$(PY) -m pytest -q -n $(PYTEST_WORKERS) tests/python

test: test-cpp test-python

# Static checks, each run even when an earlier one fails: ruff (rules in
# pyproject.toml) and `ruff format --check`, mypy --strict on the package
# (python/cpytree, the harness included, nothing excluded; _C.pyi types the
# extension), clang-format (.clang-format) on src/ and include/, clang-tidy
# (.clang-tidy) on src/ (compile commands from a configure-only tree,
# build/lint) and on the header library through one translation unit that
# includes every public header (tests/cpp/every_public_header.cc; simdjson
# and nlohmann as system headers), and scripts/source_lint.py (every entry
# point guarded, recursion calls paired, one guard header, that unit
# complete), and scripts/cross_compile.sh (every translation unit of the
# engine and the header library compiled with zig for aarch64-macos,
# x86_64-macos and x86_64-windows-gnu against CPython's headers, -Werror,
# under BUILD_LOCK; ninja recompiles only what changed: about 1.3 s warm;
# cold, 81 objects, 115 s of CPU: 235 s wall measured on the shared 2 cores).
# The set-up installs clang-format and
# clang-tidy from Debian.
LINTBUILD := build/lint
lint:
	@SETUP_LINT=1 bash scripts/setup.sh
	@status=0; \
	echo "lint: ruff check python tests benchmarks scripts lab examples"; \
	$(VENV)/bin/ruff check python tests benchmarks scripts lab examples || status=1; \
	echo "lint: ruff format --check python tests benchmarks scripts lab examples"; \
	$(VENV)/bin/ruff format --check python tests benchmarks scripts lab examples || status=1; \
	echo "lint: mypy --strict python/cpytree python/_cpytree_autoload"; \
	$(VENV)/bin/mypy --strict python/cpytree python/_cpytree_autoload || status=1; \
	echo "lint: clang-format --dry-run --Werror src include"; \
	find src include -name '*.h' -o -name '*.cc' | sort | xargs clang-format --dry-run --Werror \
	  || status=1; \
	echo "lint: clang-tidy src"; \
	$(VENV)/bin/cmake -S . -B $(LINTBUILD) -G Ninja -DCPYTREE_BUILD_PYTHON=ON -DCPYTREE_BUILD_TESTS=OFF \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DPython_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null \
	  && find src -name '*.cc' | sort | xargs -P $(JOBS) -n 4 clang-tidy -p $(LINTBUILD) --quiet \
	  || status=1; \
	echo "lint: clang-tidy include (tests/cpp/every_public_header.cc)"; \
	clang-tidy --quiet tests/cpp/every_public_header.cc -- -std=c++17 -Iinclude \
	  -isystem $$(scripts/host_simdjson.sh | tail -1)/include || status=1; \
	echo "lint: scripts/source_lint.py src"; \
	$(PY) scripts/source_lint.py src --headers-tu tests/cpp/every_public_header.cc || status=1; \
	echo "lint: scripts/cross_compile.sh (macOS arm64/x86_64, Windows x86_64: zig, -Werror)"; \
	NINJA=$(abspath $(VENV))/bin/ninja JOBS=$(JOBS) scripts/cross_compile.sh || status=1; \
	echo "lint: the stubs (_C.pyi) and declarations against the names table and the built _C"; \
	$(PY) -m pytest -q -p no:cacheprovider tests/python/test_names.py || status=1; \
	exit $$status

# The harness (cpytree-harness; HARNESS_ARGS passes options).
harness: build floor
	@CPYTREE_FLOOR_PATH=$(abspath $(FLOOR_DIR)) $(VENV)/bin/cpytree-harness $(HARNESS_ARGS)

# pytest-benchmark suites, the harness's op tables (every workload x op x
# backend, and every cell against its closest peer; report in
# build/bench-harness), then the Dynamo suite (bytecodes, guards, graphs of
# compiled functions calling pytree, with and without install()) and the
# runtime section (benchmarks/dynamo_suite.py; BENCH_DYNAMO_ARGS=--quick for a
# short run).
bench: build floor
	@CPYTREE_FLOOR_PATH=$(abspath $(FLOOR_DIR)) $(PY) -m pytest benchmarks --benchmark-only -q
	@CPYTREE_FLOOR_PATH=$(abspath $(FLOOR_DIR)) $(VENV)/bin/cpytree-harness --no-scaling --no-progress \
	  --out build/bench-harness
	@$(PY) benchmarks/dynamo_suite.py $(BENCH_DYNAMO_ARGS)

# torch's own features that call pytree inside Dynamo (cond, while_loop, scan,
# map, flex_attention, nested_compile_region, nonstrict_trace, export, ...)
# with torch alone and with cpytree autoloaded: outcomes, graphs, bytecodes
# and guards per case, a Markdown table (FEATURES= limits it to case prefixes).
feature-study: build
	@CUDA_VISIBLE_DEVICES= $(PY) -m cpytree.harness.studies.feature_study $(FEATURES)

clean:
	rm -rf build harness-report

include make/reliability.mk make/release.mk
