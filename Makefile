# The two commands users need: `make test` and `make harness`. Both set up
# everything they need first (Debian packages, .venv, pip packages).
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2
# pytest-xdist workers for tests/python (here, in scripts/test_python.sh and
# scripts/test_torch_versions.sh); 0 runs the suite in one process.
PYTEST_WORKERS ?= $(JOBS)
export PYTEST_WORKERS
# One build at a time: several checkouts (worktrees) can share one lock file
# (BUILD_LOCK=/tmp/cpytree-build.lock) so two builds never share the 2 cores.
BUILD_LOCK ?= build.lock
export BUILD_LOCK
# Inductor's caches (compiled kernels, ~150 MB of precompiled headers per
# torch release and AOTI compile) go under this checkout's build/, not
# /tmp/torchinductor_<user>: they leave with the checkout.
TORCHINDUCTOR_CACHE_DIR ?= $(CURDIR)/build/inductor-cache
export TORCHINDUCTOR_CACHE_DIR
CPPBUILD := build/cpp

.PHONY: all setup build floor test test-cpp test-python lint harness bench bench-cpp clean test-aoti time-aoti \
        fuzz-setup fuzz fuzz-cxx sanitize-build sanitize stress fuzz-torch sanitize-pythons

all: build

setup:
	@bash scripts/setup.sh

# flock: several shells (or agents) may build in one checkout; one at a time.
# The development build keeps its debug information (install.strip=false) for
# profiling; wheels are stripped (see `make wheel`).
build: setup
	@flock $(BUILD_LOCK) env CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --no-build-isolation \
	  -C install.strip=false -e .

# The floor instrument (a measuring tool kept outside the product) when present.
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
# AOTInductor, ~40 s; skipped when build/aoti/model.pt2 is newer than
# model.py), build the C++ program against the pip wheel's libtorch, then
# tests/cpp/aoti (C++ outputs equal Python's, mismatch errors). Needs no
# `make build`: the C++ side is the header library alone.
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
# complete). The set-up installs clang-format and clang-tidy from Debian.
# .ci/run runs it.
LINTBUILD := build/lint
lint:
	@SETUP_LINT=1 bash scripts/setup.sh
	@status=0; \
	echo "lint: ruff check python tests benchmarks scripts lab"; \
	$(VENV)/bin/ruff check python tests benchmarks scripts lab || status=1; \
	echo "lint: ruff format --check python tests benchmarks scripts lab"; \
	$(VENV)/bin/ruff format --check python tests benchmarks scripts lab || status=1; \
	echo "lint: mypy --strict python/cpytree python/_cpytree_autoload"; \
	$(VENV)/bin/mypy --strict python/cpytree python/_cpytree_autoload || status=1; \
	echo "lint: clang-format --dry-run --Werror src include"; \
	find src include -name '*.h' -o -name '*.cc' | sort | xargs clang-format --dry-run --Werror \
	  || status=1; \
	echo "lint: clang-tidy src"; \
	$(VENV)/bin/cmake -S . -B $(LINTBUILD) -G Ninja -DCPYTREE_BUILD_PYTHON=ON -DCPYTREE_BUILD_TESTS=OFF \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DPython_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null \
	  && ls src/*.cc | xargs -P $(JOBS) -n 4 clang-tidy -p $(LINTBUILD) --quiet \
	  || status=1; \
	echo "lint: clang-tidy include (tests/cpp/every_public_header.cc)"; \
	clang-tidy --quiet tests/cpp/every_public_header.cc -- -std=c++17 -Iinclude \
	  -isystem $$(scripts/host_simdjson.sh | tail -1)/include || status=1; \
	echo "lint: scripts/source_lint.py src"; \
	$(PY) scripts/source_lint.py src --headers-tu tests/cpp/every_public_header.cc || status=1; \
	exit $$status

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

# ---------------------------------------------------------------- reliability
# Fuzzing, sanitizers and stress runs (tests/fuzz, docs in each file's header).
# Every campaign is bounded by inputs and seconds; override on the command line
# (`make fuzz FUZZ_SECONDS=3600`). Builds go through build.lock like `build`.
FUZZ_DIR         := build/fuzz
FUZZ_RUNS        ?= 1000000
FUZZ_SECONDS     ?= 600
FUZZ_RANDOM      ?= 100000
FUZZ_CXX_SECONDS ?= 300
SAN_PY           := build/sanitize-py
SAN_CPP          := build/sanitize-cpp
SAN_SITE         := $(SAN_PY)/site
CLANGXX          ?= clang++
SAN_CMAKE := -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCPYTREE_SANITIZE=ON \
  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja
SAN_LOGS         := $(SAN_PY)/reports
# CPython is not instrumented: preload gcc's ASan runtime (and libstdc++, or
# ASan cannot intercept C++ throws of extensions loaded later: torch and
# matplotlib abort), let it own malloc (PYTHONMALLOC=malloc, so freed Python
# objects are poisoned too) and leave leak detection off (the interpreter
# frees little at exit). Reports go to files as well as stderr: pytest's
# capture would swallow a report from a test whose process then aborts.
SAN_ENV = LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
  PYTHONMALLOC=malloc PYTHONPATH=$(abspath $(SAN_SITE)) CPYTREE_SANITIZED=1 \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:print_summary=1:log_path=$(abspath $(SAN_LOGS))/asan \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(abspath $(SAN_LOGS))/ubsan
SAN_CHECK_LOGS = if ls $(SAN_LOGS)/* >/dev/null 2>&1; then head -c 20000 $(SAN_LOGS)/*; \
  echo "sanitizer reports: $(SAN_LOGS)"; exit 1; fi
SAN_CTEST_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The Python suites under the sanitizers: every test, Hypothesis at its dev
# profile (30 examples a test) to keep the run bounded.
SAN_PYTEST_ARGS ?= -q -p no:cacheprovider tests/python

fuzz-setup: setup
	@bash scripts/setup_fuzz.sh

# The extension and the googletest suites with ASan+UBSan, apart from the
# editable install: the extension in $(SAN_PY), importable from $(SAN_SITE).
sanitize-build: setup
	@$(VENV)/bin/cmake -S . -B $(SAN_PY) $(SAN_CMAKE) -DCPYTREE_BUILD_PYTHON=ON \
	  -DPython_EXECUTABLE=$(abspath $(PY)) >/dev/null
	@flock $(BUILD_LOCK) $(VENV)/bin/cmake --build $(SAN_PY) -j $(JOBS) --target _C
	@bash scripts/sanitize_site.sh $(SAN_PY) $(SAN_SITE)
	@$(VENV)/bin/cmake -S . -B $(SAN_CPP) $(SAN_CMAKE) -DCPYTREE_BUILD_TESTS=ON >/dev/null
	@flock $(BUILD_LOCK) $(VENV)/bin/cmake --build $(SAN_CPP) -j $(JOBS)

# Every suite under ASan+UBSan; any report fails the target.
sanitize: sanitize-build
	@echo "sanitize: googletest suites (ASan+UBSan)"
	@$(SAN_CTEST_ENV) $(VENV)/bin/ctest --test-dir $(SAN_CPP) --output-on-failure -j $(JOBS)
	@rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	@echo "sanitize: Python suites against the sanitized extension"
	@$(SAN_ENV) HYPOTHESIS_PROFILE=dev $(PY) -m pytest $(SAN_PYTEST_ARGS) || { $(SAN_CHECK_LOGS); exit 1; }
	@echo "sanitize: differential fuzzer, random inputs"
	@$(SAN_ENV) $(PY) tests/fuzz/pytree_fuzz.py --random 20000 --seed 7 --seconds 120 || { $(SAN_CHECK_LOGS); exit 1; }
	@if $(PY) -c "import torch" >/dev/null 2>&1; then echo "sanitize: differential fuzzer, torch mode"; \
	  $(SAN_ENV) $(PY) tests/fuzz/pytree_fuzz.py --torch --random 20000 --seed 7 --seconds 120 \
	  || { $(SAN_CHECK_LOGS); exit 1; }; else echo "sanitize: torch not installed, torch mode skipped"; fi
	@$(SAN_CHECK_LOGS)
	@echo "sanitize: no reports"

# The differential fuzzing campaign (tests/fuzz/pytree_fuzz.py): atheris,
# coverage-guided, against the normal build, growing $(FUZZ_DIR)/corpus-py;
# then that corpus and $(FUZZ_RANDOM) random inputs replayed against the
# ASan+UBSan build; then the stress tests (10M leaves, long thread runs).
fuzz: build fuzz-setup sanitize-build
	@mkdir -p $(FUZZ_DIR)/corpus-py $(FUZZ_DIR)/artifacts
	@echo "fuzz: atheris campaign ($(FUZZ_RUNS) inputs or $(FUZZ_SECONDS) s)"
	@$(PY) tests/fuzz/pytree_fuzz.py -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=1024 -artifact_prefix=$(FUZZ_DIR)/artifacts/ $(FUZZ_DIR)/corpus-py
	@echo "fuzz: corpus and random inputs under ASan+UBSan"
	@rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	@$(SAN_ENV) $(PY) tests/fuzz/pytree_fuzz.py --replay $(FUZZ_DIR)/corpus-py || { $(SAN_CHECK_LOGS); exit 1; }
	@$(SAN_ENV) $(PY) tests/fuzz/pytree_fuzz.py --random $(FUZZ_RANDOM) --seed $$(date +%s) \
	  --seconds $(FUZZ_SECONDS) || { $(SAN_CHECK_LOGS); exit 1; }
	@$(SAN_CHECK_LOGS)
	@$(MAKE) --no-print-directory fuzz-torch
	@$(MAKE) --no-print-directory stress

# The torch mode of the fuzzer (install() active, torch-made inputs against
# torch's results; tests/fuzz/torch_mode.py): an atheris campaign growing
# $(FUZZ_DIR)/corpus-torch, then that corpus and random inputs under
# ASan+UBSan. Skipped where torch is not installed.
fuzz-torch: build fuzz-setup sanitize-build
	@if ! $(PY) -c "import torch" >/dev/null 2>&1; then echo "fuzz-torch: torch not installed, skipped"; exit 0; fi; \
	mkdir -p $(FUZZ_DIR)/corpus-torch $(FUZZ_DIR)/artifacts-torch && \
	echo "fuzz: torch mode, atheris campaign ($(FUZZ_RUNS) inputs or $(FUZZ_SECONDS) s)" && \
	$(PY) tests/fuzz/pytree_fuzz.py --torch -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=1024 -artifact_prefix=$(FUZZ_DIR)/artifacts-torch/ $(FUZZ_DIR)/corpus-torch && \
	echo "fuzz: torch mode, corpus and random inputs under ASan+UBSan" && \
	rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS) && \
	{ $(SAN_ENV) $(PY) tests/fuzz/pytree_fuzz.py --torch --replay $(FUZZ_DIR)/corpus-torch \
	  && $(SAN_ENV) $(PY) tests/fuzz/pytree_fuzz.py --torch --random $(FUZZ_RANDOM) --seed $$(date +%s) \
	     --seconds $(FUZZ_SECONDS) || { $(SAN_CHECK_LOGS); exit 1; }; } && \
	{ $(SAN_CHECK_LOGS); true; }

# `make sanitize` on the newer CPythons of the machine (pyenv), each in a
# virtualenv of its own (.venv-3.x, requirements-sanitize.txt: no torch, whose
# only local wheel is for 3.11, so torch tests and the torch mode skip) with
# its own sanitized build (build/sanitize-py-3.x).
SAN_PYTHONS ?= 3.12 3.13
sanitize-pythons:
	@for v in $(SAN_PYTHONS); do \
	  py=$$(ls -d $$HOME/.pyenv/versions/$$v.*/bin/python$$v 2>/dev/null | tail -n 1); \
	  [ -n "$$py" ] || { echo "sanitize-pythons: no CPython $$v under ~/.pyenv"; exit 1; }; \
	  echo "sanitize-pythons: CPython $$v ($$py)"; \
	  $(MAKE) --no-print-directory sanitize VENV=.venv-$$v PYTHON=$$py \
	    REQUIREMENTS=requirements-sanitize.txt SAN_PY=build/sanitize-py-$$v || exit 1; \
	done

# libFuzzer on the header library's Loads (tests/fuzz/cxx), seeded with the
# specs torch wrote for tests/cpp/fixtures and a dictionary of the format.
fuzz-cxx: fuzz-setup
	@mkdir -p $(FUZZ_DIR)/cxx-corpus $(FUZZ_DIR)/cxx-artifacts
	@$(PY) tests/fuzz/cxx/make_seeds.py $(FUZZ_DIR)/cxx-seeds
	@flock $(BUILD_LOCK) $(CLANGXX) -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -Iinclude tests/fuzz/cxx/loads_fuzzer.cc \
	  -o $(FUZZ_DIR)/loads_fuzzer
	@$(FUZZ_DIR)/loads_fuzzer -max_total_time=$(FUZZ_CXX_SECONDS) -dict=tests/fuzz/cxx/protocol1.dict \
	  -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/cxx-artifacts/ $(FUZZ_DIR)/cxx-corpus $(FUZZ_DIR)/cxx-seeds

# Long, memory-hungry runs kept out of `make test`: 10,000,000-leaf trees
# (peak RSS per leaf) and the thread stress at full length.
stress: build
	@CPYTREE_STRESS=1 $(PY) -m pytest -q -p no:cacheprovider tests/python/test_limits.py \
	  tests/python/test_threads.py tests/python/test_threads_stress.py

clean:
	rm -rf build harness-report

# ---------------------------------------------------------------- free-threaded CPython
# The engine without the GIL on CPython 3.13t (src/ft.h; README "Free-threaded
# CPython"). No 3.13t can be installed here: PY313T_BUILDER builds CPython
# 3.13.0 with --disable-gil once (~8 min on 2 cores, under BUILD_LOCK) into
# $$CPYTREE_CACHE/py313t and prints the interpreter; later runs only print it.
#   make test-ft       the cp313t wheel (scripts/wheel.sh: zig, manylinux_2_28)
#                      in a fresh venv (build/pythons/3.13t/venv) with pytest and
#                      hypothesis==6.155.0 (newer ones build a Rust part on 3.13t),
#                      then tests/packaging and all of tests/python there, the
#                      thread-stress suite (test_threads_stress.py) included
#   make bench-ft      benchmarks/ft_scaling.py on that venv (2 threads against 1)
#   make test-ft-tsan  the engine built with -fsanitize=thread on CPython 3.13t
#                      built with --with-thread-sanitizer (scripts/build_py313t_tsan.sh,
#                      cached, ~35 min once), the thread suites under it (~4 min)
#                      (scripts/test_ft_tsan.sh; suppressions: tests/tsan_suppressions.txt)
PY313T_BUILDER ?= $(firstword $(wildcard ../shared/pythons/build_py313t.sh \
                    /work/shared/pythons/build_py313t.sh))
PY313T = $$(flock $(BUILD_LOCK) $(PY313T_BUILDER) | tail -1)

.PHONY: test-ft bench-ft test-ft-tsan

test-ft: setup-system
	@[ -n "$(PY313T_BUILDER)" ] || { echo "test-ft: no build_py313t.sh (PY313T_BUILDER=)"; exit 1; }
	@py=$(PY313T) && JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/test_python.sh $$py

test-ft-tsan: setup-system
	@[ -n "$(PY313T_BUILDER)" ] || { echo "test-ft-tsan: no build_py313t.sh (PY313T_BUILDER=)"; exit 1; }
	@py=$(PY313T) && PY313T_TARBALL=$(dir $(PY313T_BUILDER))Python-3.13.0-ft-src.tar.xz \
	  BUILD_LOCK=$(BUILD_LOCK) JOBS=$(JOBS) scripts/test_ft_tsan.sh

bench-ft:
	@[ -x build/pythons/3.13t/venv/bin/python ] || { echo "bench-ft: run make test-ft first"; exit 1; }
	@build/pythons/3.13t/venv/bin/python benchmarks/ft_scaling.py $(BENCH_FT_ARGS)

# ---------------------------------------------------------------- packaging
# Wheels, the sdist, and the suites against them on every CPython and torch
# version (README: "Wheels"). Wheels are built with zig for glibc 2.28 with
# abseil, simdjson and libc++ linked in (cmake/deps.lock, scripts/native_deps.sh;
# toolchain and dependencies cached in ~/.cache/cpytree).
#   make wheels                manylinux_2_28 x86_64 wheels, cp310-cp313 from the
#                              machine (pyenv) and cp314, cp315 from a Debian sid
#                              folder (scripts/sid_root.sh), in dist/; the
#                              free-threaded cp314t, cp315t against sid's headers
#                              (FT_HEADERS=1 scripts/wheel.sh; built, not run);
#                              the aarch64 wheels cp310-cp315 (scripts/wheel_aarch64.sh:
#                              3.11 from bookworm's arm64 CPython, 3.13-3.15 from
#                              sid's, 3.10 and 3.12 against their headers, not run);
#                              then every wheel's extension checked (glibc <= 2.28,
#                              exports, tags, suffix, architecture, free-threaded ABI).
#                              The 8 aarch64/free-threaded builds add ~30-45 min
#                              here (2-5.5 min each at load 7-12; first run also the
#                              aarch64 deps, 12 min); AARCH64_PYTHONS= SID_FT_PYTHONS=
#                              builds the x86_64 GIL wheels alone, as before
#   make wheels WHEEL_SYMBOLS=1  the same with debug information kept (profiling)
#   make sdist                 dist/cpytree-<v>.tar.gz, checked to build, and to fail
#                              clearly where abseil or simdjson is missing
#   make test-pythons          per CPython (3.10-3.15): its wheel in a fresh venv,
#                              tests/packaging then the whole tests/python
#   make test-torch-versions   the torch-facing tests (pytest -m torch) on the torch
#                              releases CI tests: 2.13.0, 2.14.1 and 2.15.0
#   make test-torch-range      the same on every supported release, 2.10.0-2.15.0
#                              (cpytree._releases.SUPPORTED); each release's wheels
#                              come from $CPYTREE_CACHE/wheelhouse (outside the checkout,
#                              fetched once); its venv build/torch/<release> is kept
# PYTHONS overrides the machine's interpreters (default: scripts/find_pythons.sh);
# SID_PYTHONS the sid folder's (default 3.14 3.15; empty: none); SID_FT_PYTHONS
# the free-threaded wheels built from sid's headers (default 3.14 3.15; empty:
# none); AARCH64_PYTHONS the aarch64 wheels (default 3.10-3.15; empty: none).
PYTHONS        ?= $(shell scripts/find_pythons.sh)
SID_PYTHONS    ?= 3.14 3.15
SID_FT_PYTHONS ?= 3.14 3.15
AARCH64_PYTHONS ?= 3.10 3.11 3.12 3.13 3.14 3.15
# make test-aarch64: the CPythons whose aarch64 wheel runs tests/python under
# qemu, one after the other (every one with an arm64 interpreter here; ~8 min
# each once the build tools are cached).
AARCH64_TEST_PYTHONS ?= 3.11 3.13 3.14 3.15
WHEEL_SYMBOLS  ?= 0
# zig (manylinux_2_28, everything but glibc and the unwinder linked in; what
# CI tests) or system (the machine's gcc, Debian's abseil/simdjson grafted in).
WHEEL_TOOLCHAIN ?= zig
export WHEEL_TOOLCHAIN
TORCH_VERSIONS ?= 2.13.0 2.14.1 2.15.0
# Every supported release (cpytree._releases.SUPPORTED; tests/python/test_releases.py
# checks the two agree).
TORCH_RANGE    ?= 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0
SID            := scripts/sid_root.sh amd64

.PHONY: setup-system wheel wheels sdist test-pythons test-torch-versions test-torch-range test-aarch64 \
        test-torch-sid

setup-system:
	@SETUP_VENV=0 bash scripts/setup.sh

wheel: wheels

wheels: setup-system
	@start=$$(date +%s); rm -f dist/cpytree-*.whl; \
	for py in $(PYTHONS); do \
	  JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/wheel.sh $$py >/dev/null || exit 1; \
	done; \
	if [ -n "$(SID_PYTHONS)" ]; then $(SID) >/dev/null || exit 1; fi; \
	for v in $(SID_PYTHONS); do \
	  JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) $(SID) run scripts/wheel.sh /usr/bin/python$$v >/dev/null \
	    || exit 1; \
	done; \
	for v in $(SID_FT_PYTHONS); do \
	  JOBS=$(JOBS) $(SID) run env FT_HEADERS=1 WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) \
	    scripts/wheel.sh /usr/bin/python$$v >/dev/null || exit 1; \
	done; \
	for v in $(AARCH64_PYTHONS); do \
	  ARM64_PYTHON=$$v JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/wheel_aarch64.sh >/dev/null || exit 1; \
	done; ls -l dist/*.whl; \
	first=$$(echo $(PYTHONS) | cut -d' ' -f1); \
	ver=$$($$first -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	CPYTREE_DIST=dist build/wheel/$$ver-zig/venv/bin/python -m pytest -q -p no:cacheprovider \
	  tests/packaging/test_wheel.py tests/packaging/test_wheel_tags.py -k "every_wheel_in_dist or tags" \
	  || exit 1; \
	echo "wheels: built and checked in $$(( $$(date +%s) - start )) s"

sdist: setup-system
	@JOBS=$(JOBS) scripts/sdist.sh

test-pythons: setup-system
	@status=0; summary=""; for py in $(PYTHONS); do \
	  if JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/test_python.sh $$py; then r=ok; else r=FAILED; status=1; fi; \
	  summary="$$summary $$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])'):$$r"; \
	done; \
	if [ -n "$(SID_PYTHONS)" ]; then $(SID) >/dev/null || exit 1; fi; \
	for v in $(SID_PYTHONS); do \
	  if JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) $(SID) run scripts/test_python.sh /usr/bin/python$$v; \
	  then r=ok; else r=FAILED; status=1; fi; summary="$$summary $$v(sid):$$r"; \
	done; echo "test-pythons:$$summary"; exit $$status

# Not in .ci/run (too long there; README "Building wheels" gives the numbers):
# test-aarch64: the aarch64 wheel of each of AARCH64_TEST_PYTHONS (default
#   3.11, 3.13, 3.14, 3.15) cross-built with zig and
#   tests/python under qemu-aarch64-static with Debian's arm64 CPython
#   (scripts/wheel_aarch64.sh: child interpreters run under qemu too; the
#   one test deselected is listed there with the reason; two pytest
#   processes; test_leaks at 10,000 iterations; PYTEST_ARGS="<files>").
# test-torch-sid: torch 2.14.1 (PyPI's CUDA build, 5.4 GB installed, run on the
#   CPU) on CPython 3.14 in the sid folder, the torch-facing tests (pytest -m
#   torch, as scripts/test_torch_versions.sh runs them). The wheels are kept in
#   $CPYTREE_CACHE/wheelhouse-cp314 (outside the checkout) and the venv
#   build/torch/2.14.1-py3.14 is kept, so only the first run downloads; g++ is installed into folders made before sid_root.sh
#   listed it (Inductor compiles its CPU kernels with it).
test-aarch64: setup-system
	@for v in $(AARCH64_TEST_PYTHONS); do \
	  ARM64_PYTHON=$$v JOBS=$(JOBS) scripts/wheel_aarch64.sh test || exit 1; \
	done

test-torch-sid: setup-system
	@$(SID) >/dev/null && $(SID) run sh -c 'command -v g++ >/dev/null || { apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++ && apt-get clean; } >&2' && \
	  $(SID) run env TORCH_PYTHON=/usr/bin/python3.14 TORCH_VENV_SUFFIX=-py3.14 \
	  TORCH_WHEELHOUSE=$${CPYTREE_CACHE:-$$HOME/.cache/cpytree}/wheelhouse-cp314 scripts/test_torch_versions.sh 2.14.1

test-torch-versions: setup-system
	@JOBS=$(JOBS) scripts/test_torch_versions.sh $(TORCH_VERSIONS)

test-torch-range: setup-system
	@JOBS=$(JOBS) scripts/test_torch_versions.sh $(TORCH_RANGE)
