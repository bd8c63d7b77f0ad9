# Release: wheels, the sdist, and the suites against them on every CPython,
# torch release and architecture (included by the Makefile). Wheels are built
# with zig for glibc 2.28 with abseil, simdjson and libc++ linked in
# (cmake/deps.lock, scripts/native_deps.sh; toolchain and dependencies cached
# in ~/.cache/cpytree).
#   make wheels                every wheel the project ships, in dist/, each one run
#                              here by a make target: manylinux_2_28 x86_64 cp310-cp313
#                              from the machine (pyenv) and cp314, cp315 from a Debian
#                              sid folder (scripts/sid_root.sh) (make test-pythons);
#                              the free-threaded cp313t from the CPython 3.13t that
#                              ../shared/pythons/build_py313t.sh builds (make test-ft);
#                              the aarch64 cp311, cp313-cp315 (scripts/wheel.sh --arch
#                              aarch64: 3.11 from bookworm's arm64 CPython, 3.13-3.15
#                              from sid's; make test-aarch64 runs them under qemu);
#                              then every wheel's extension checked (glibc <= 2.28,
#                              exports, tags, suffix, architecture, free-threaded ABI).
#                              AARCH64_PYTHONS= FT313= builds the x86_64 GIL wheels alone
#   make wheels-unrun          the wheels that compile here but cannot run here, in
#                              build/unrun-dist/, never in dist/ (not shipped): the
#                              free-threaded cp314t, cp315t against sid's headers
#                              (FT_HEADERS=1 scripts/wheel.sh) and the aarch64 cp310,
#                              cp312 against their headers; checked like dist/'s
#   make wheels WHEEL_SYMBOLS=1  the same with debug information kept (profiling)
#   make sdist                 dist/cpytree-<v>.tar.gz, checked to build, to carry
#                              the pins, and to fail clearly where abseil or simdjson
#                              is missing and downloads are off
#   make test-sdist-clean      the sdist installed by pip where there is a compiler
#                              and CMake alone (a sid folder without libabsl-dev and
#                              libsimdjson-dev: abseil and simdjson from
#                              cmake/deps.lock), with gcc (downloading) and clang
#                              (offline), tests/python against each
#                              (scripts/test_sdist_clean.sh; SDIST_COMPILERS)
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
# none); AARCH64_PYTHONS the aarch64 wheels (default: those test-aarch64 runs;
# empty: none); FT313 (default 1; empty: none) the cp313t wheel;
# UNRUN_AARCH64_PYTHONS the aarch64 wheels wheels-unrun builds.
PYTHONS        ?= $(shell scripts/find_pythons.sh)
SID_PYTHONS    ?= 3.14 3.15
SID_FT_PYTHONS ?= 3.14 3.15
# make test-aarch64: the CPythons whose aarch64 wheel runs tests/python under
# qemu, one after the other (every one with an arm64 interpreter here).
AARCH64_TEST_PYTHONS ?= 3.11 3.13 3.14 3.15
AARCH64_PYTHONS ?= $(AARCH64_TEST_PYTHONS)
UNRUN_AARCH64_PYTHONS ?= 3.10 3.12
FT313          ?= 1
UNRUN_DIST     := build/unrun-dist
WHEEL_SYMBOLS  ?= 0
TORCH_VERSIONS ?= 2.13.0 2.14.1 2.15.0
# Every supported release (cpytree._releases.SUPPORTED; tests/python/test_releases.py
# checks the two agree).
TORCH_RANGE    ?= 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0
SID            := scripts/sid_root.sh amd64
SDIST_COMPILERS ?= gcc clang

.PHONY: wheel wheels wheels-unrun sdist test-sdist-clean test-pythons test-torch-versions test-torch-range test-aarch64 \
  test-aarch64-torch test-torch-sid

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
	if [ -n "$(FT313)" ]; then \
	  [ -n "$(PY313T_BUILDER)" ] || { echo "wheels: no build_py313t.sh for cp313t (PY313T_BUILDER=, or FT313=)"; exit 1; }; \
	  py=$(PY313T) && JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/wheel.sh $$py >/dev/null || exit 1; \
	fi; \
	for v in $(AARCH64_PYTHONS); do \
	  JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/wheel.sh --arch aarch64 $$v >/dev/null || exit 1; \
	done; ls -l dist/*.whl; \
	first=$$(echo $(PYTHONS) | cut -d' ' -f1); \
	ver=$$($$first -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	CPYTREE_DIST=dist build/wheel/$$ver-zig/venv/bin/python -m pytest -q -p no:cacheprovider \
	  tests/packaging/test_wheel.py tests/packaging/test_wheel_tags.py -k "every_wheel_in_dist or tags" \
	  || exit 1; \
	echo "wheels: built and checked in $$(( $$(date +%s) - start )) s"

wheels-unrun: setup
	@start=$$(date +%s); rm -rf $(UNRUN_DIST) && mkdir -p $(UNRUN_DIST); \
	if [ -n "$(SID_FT_PYTHONS)" ]; then $(SID) >/dev/null || exit 1; fi; \
	for v in $(SID_FT_PYTHONS); do \
	  JOBS=$(JOBS) $(SID) run env DIST=$(UNRUN_DIST) FT_HEADERS=1 WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) \
	    scripts/wheel.sh /usr/bin/python$$v >/dev/null || exit 1; \
	done; \
	for v in $(UNRUN_AARCH64_PYTHONS); do \
	  DIST=$(UNRUN_DIST) JOBS=$(JOBS) WHEEL_SYMBOLS=$(WHEEL_SYMBOLS) scripts/wheel.sh --arch aarch64 $$v >/dev/null \
	    || exit 1; \
	done; \
	rm -f $(UNRUN_DIST)/cpytree-*-cp3??-cp3??-*x86_64.whl; ls -l $(UNRUN_DIST)/*.whl; \
	CPYTREE_DIST=$(UNRUN_DIST) $(PY) -m pytest -q -p no:cacheprovider \
	  tests/packaging/test_wheel.py tests/packaging/test_wheel_tags.py -k "every_wheel_in_dist or tags" \
	  || exit 1; \
	echo "wheels-unrun: built and checked in $$(( $$(date +%s) - start )) s (not shipped)"

sdist: setup-system
	@JOBS=$(JOBS) scripts/sdist.sh

# Not in .ci/run (CI would pass 75 minutes cold): see docs/building.md.
test-sdist-clean:
	@JOBS=$(JOBS) scripts/test_sdist_clean.sh $(SDIST_COMPILERS)

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

# Not in .ci/run (each takes longer than CI allows):
# test-aarch64: the aarch64 wheel of each of AARCH64_TEST_PYTHONS (default
#   3.11, 3.13, 3.14, 3.15) cross-built with zig and
#   tests/python under qemu-aarch64 (Debian sid's qemu-user 11.1.3, pinned:
#   scripts/qemu_user.sh, scripts/qemu-user.lock) with Debian's arm64 CPython
#   (scripts/test_python.sh --arch aarch64: child interpreters run under qemu too; the
#   one test deselected is listed there with the reason; two pytest
#   processes; test_leaks at 10,000 iterations; PYTEST_ARGS="<files>").
# test-aarch64-torch: the cp311 aarch64 wheel with PyPI's aarch64 torch 2.15.0
#   (requirements-aarch64-torch.txt, wheels in $CPYTREE_CACHE/wheelhouse-aarch64,
#   site kept in build/torch/2.15.0-aarch64) in bookworm's arm64 CPython 3.11
#   under qemu: pytest -m torch on the autoload, install/uninstall, Dynamo
#   features (higher-order operators), parity and export save/load suites,
#   then benchmarks/dynamo_suite.py --quick (scripts/aarch64_torch.sh says
#   which tests and why; the two Inductor tests are deselected there).
#   Not in .ci/run: about 52 min on this loaded 2-core machine (the default
#   pytest set 23 min, 325 passed; the Dynamo suite's 10- and 100-leaf halves
#   468 s and 1,216 s; docs/building.md).
# test-torch-sid: torch 2.14.1 (PyPI's CUDA build, run on the CPU) on CPython
#   3.14 in the sid folder, the torch-facing tests (pytest -m torch, as
#   scripts/test_python.sh --torch runs them). The wheels are kept in
#   $CPYTREE_CACHE/wheelhouse-cp314 (outside the checkout) and the venv
#   build/torch/2.14.1-py3.14 is kept, so only the first run downloads; g++ is
#   installed into the sid folder when missing (Inductor compiles its CPU
#   kernels with it).
test-aarch64: setup-system
	@for v in $(AARCH64_TEST_PYTHONS); do \
	  JOBS=$(JOBS) scripts/test_python.sh --arch aarch64 $$v || exit 1; \
	done

test-aarch64-torch: setup-system
	@JOBS=$(JOBS) scripts/test_python.sh --arch aarch64 --torch 3.11

test-torch-sid: setup-system
	@$(SID) >/dev/null && $(SID) run sh -c 'command -v g++ >/dev/null || { apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++ && apt-get clean; } >&2' && \
	  $(SID) run env TORCH_PYTHON=/usr/bin/python3.14 TORCH_VENV_SUFFIX=-py3.14 \
	  TORCH_WHEELHOUSE=$${CPYTREE_CACHE:-$$HOME/.cache/cpytree}/wheelhouse-cp314 scripts/test_python.sh --torch 2.14.1

test-torch-versions: setup-system
	@JOBS=$(JOBS) scripts/test_python.sh --torch $(TORCH_VERSIONS)

test-torch-range: setup-system
	@JOBS=$(JOBS) scripts/test_python.sh --torch $(TORCH_RANGE)
