# The two commands users need: `make test` and `make harness`. Both set up
# everything they need first (Debian packages, .venv, pip packages).
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2
CPPBUILD := build/cpp

.PHONY: all setup build test test-cpp test-python harness bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --no-build-isolation -e .

test-cpp: setup
	@$(VENV)/bin/cmake -S . -B $(CPPBUILD) -G Ninja -DCPYTREE_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja >/dev/null
	@$(VENV)/bin/cmake --build $(CPPBUILD) -j $(JOBS)
	@$(VENV)/bin/ctest --test-dir $(CPPBUILD) --output-on-failure -j $(JOBS)

test-python: build
	@$(PY) -m pytest -q tests/python

test: test-cpp test-python

harness: build
	@$(VENV)/bin/cpytree-harness $(HARNESS_ARGS)

bench: build
	@$(PY) -m pytest benchmarks --benchmark-only --benchmark-columns=median,min,max -q

clean:
	rm -rf build harness-report
