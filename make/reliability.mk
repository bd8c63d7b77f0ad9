# Reliability: sanitizers, fuzzing, stress runs and free-threaded CPython
# (included by the Makefile; tests/fuzz documents each fuzzer in its header).
# Every campaign is bounded by inputs and seconds; override on the command line
# (`make fuzz FUZZ_SECONDS=3600`). Builds go through BUILD_LOCK like `build`.
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

.PHONY: fuzz-setup fuzz fuzz-cxx fuzz-torch sanitize-build sanitize sanitize-pythons stress \
        test-ft bench-ft test-ft-tsan

# atheris and the fuzzing toolchain (scripts/setup_fuzz.sh).
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
# ASan+UBSan build; then fuzz-torch and the stress tests.
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
# virtualenv of its own (.venv-3.x, requirements-sanitize.txt: no torch, so
# torch tests and the torch mode skip) with its own sanitized build
# (build/sanitize-py-3.x).
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

# ------------------------------------------------------- free-threaded CPython
# The engine without the GIL on CPython 3.13t (src/base/ft.h). PY313T_BUILDER
# builds CPython 3.13.0 with --disable-gil once (under BUILD_LOCK) into
# $$CPYTREE_CACHE/py313t and prints the interpreter; later runs only print it.
#   make test-ft       the cp313t wheel (scripts/wheel.sh) in a fresh venv
#                      (build/pythons/3.13t/venv) with pytest and
#                      hypothesis==6.155.0 (newer ones build a Rust part on 3.13t),
#                      then tests/packaging and all of tests/python there, the
#                      thread-stress suite (test_threads_stress.py) included
#   make bench-ft      benchmarks/ft_scaling.py on that venv (2 threads against 1)
#   make test-ft-tsan  the engine built with -fsanitize=thread on CPython 3.13t
#                      built with --with-thread-sanitizer (scripts/build_py313t_tsan.sh,
#                      cached), then the thread suites under it
#                      (scripts/test_ft_tsan.sh; suppressions: tests/tsan_suppressions.txt)
PY313T_BUILDER ?= $(firstword $(wildcard ../shared/pythons/build_py313t.sh \
                    /work/shared/pythons/build_py313t.sh))
PY313T = $$(flock $(BUILD_LOCK) $(PY313T_BUILDER) | tail -1)

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
