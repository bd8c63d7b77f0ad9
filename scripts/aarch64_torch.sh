# Sourced by scripts/test_python.sh: `--arch aarch64 --torch 3.11` (make
# test-aarch64-torch), the torch-facing suites under qemu with PyPI's aarch64
# torch 2.15.0 in Debian bookworm's arm64 CPython 3.11.
#
# torch and what it loads are pinned with hashes in requirements-aarch64-torch.txt
# (why that set: the file's header), downloaded once into
# $CPYTREE_CACHE/wheelhouse-aarch64 and installed --no-deps with pip --target
# into build/torch/2.15.0-aarch64/site (4.1 GB, kept while the pin file is
# unchanged), which follows the cpytree wheel's site folder on PYTHONPATH.
# Then, one qemu process at a time (one pytest, then the Dynamo suite, whose
# two children run one after the other):
#   1. pytest -m torch on AARCH64_TORCH_TESTS (default below);
#   2. benchmarks/dynamo_suite.py --quick --no-runtime (81 cases, each mode in
#      a child under qemu), its table in $SHARD_LOGS/dynamo_quick.txt, to set
#      against x86_64's (the same command in build/torch/2.15.0/venv).
# AARCH64_TORCH_TESTS=none leaves step 1 out, AARCH64_TORCH_DYNAMO=0 step 2;
# AARCH64_TORCH_DYNAMO_ARGS (default --quick) picks the suite's cases, e.g.
# "--quick --sizes 10" (the 10-leaf half).

# pip --target for aarch64 takes the one platform tag it is given; the CUDA
# wheels are tagged manylinux_2_17 to 2_27 (requirements-aarch64-torch.txt).
AARCH64_PLATFORMS=(manylinux_2_28_aarch64 manylinux_2_27_aarch64 manylinux_2_25_aarch64
  manylinux_2_18_aarch64 manylinux_2_17_aarch64 manylinux2014_aarch64)

# The torch-facing tests run under qemu. The whole `-m torch` set (about
# 1,700 tests) is hours under emulation on 2 cores: a child interpreter that
# imports torch takes 15 s (idle machine) to 100 s (loaded) under qemu, and
# many tests start two. The default is what issue 39 asks for, the tests that
# start children cut to one case of each kind:
# - autoload on and off: `import torch` installs (CPYTREE_INSTALL unset/1)
#   and CPYTREE_INSTALL=0 / TORCH_DEVICE_BACKEND_AUTOLOAD=0 keep torch as
#   shipped (children);
# - install() / uninstall(), specs, compile on eager and aot_eager, export
#   save/load: test_torch_install (in-process) and export saved in one
#   process and loaded in another (children);
# - the higher-order operators of issue 38: the control_flow group (cond,
#   while_loop, scan, map, each mode in a child) and the in-process cases of
#   test_torch_features (a site torch never had, cond's operand structure
#   guarded, uninstall);
# - parity with torch's module: test_api_parity, test_torch_releases.
# AARCH64_TORCH_TESTS=all: the whole of each of these files (regions,
# attention_and_grads and export groups, the rest of test_autoload: 30 more
# children).
AARCH64_TORCH_DEFAULT="tests/python/test_autoload.py::test_import_torch_installs
  tests/python/test_autoload.py::test_cpytree_install_off_keeps_torch_as_shipped
  tests/python/test_autoload.py::test_torch_switch_keeps_torch_as_shipped
  tests/python/test_torch_install.py
  tests/python/test_autoload_everywhere.py::test_export_save_in_one_process_load_in_another
  tests/python/test_torch_features.py::test_features_as_without_cpytree[control_flow]
  tests/python/test_torch_features.py::test_a_site_torch_never_had
  tests/python/test_torch_features.py::test_cond_operand_structure_guarded
  tests/python/test_torch_features.py::test_uninstall_takes_the_choke_point_out
  tests/python/test_api_parity.py tests/python/test_torch_releases.py"
AARCH64_TORCH_ALL="tests/python/test_autoload.py tests/python/test_torch_install.py
  tests/python/test_autoload_everywhere.py::test_export_save_in_one_process_load_in_another
  tests/python/test_torch_features.py tests/python/test_api_parity.py
  tests/python/test_torch_releases.py"
AARCH64_TORCH_TESTS=${AARCH64_TORCH_TESTS:-$AARCH64_TORCH_DEFAULT}
[ "$AARCH64_TORCH_TESTS" != all ] || AARCH64_TORCH_TESTS=$AARCH64_TORCH_ALL

# Tests that need a C++ compiler torch can start: Inductor runs `g++` in a
# subprocess, and an arm64 compiler cannot be exec'd from inside qemu-user here
# (no binfmt_misc: the host kernel gets the arm64 ELF and answers "Exec format
# error"); the Dynamo and export tests use backend="eager"/"aot_eager".
NO_COMPILER_UNDER_QEMU=(
  tests/python/test_torch_install.py::test_compile_inductor_mlp
  tests/python/test_autoload_everywhere.py::test_inductor_compile_workers
)

install_aarch64_torch() {  # -> the site folder's path
  local reqs=requirements-aarch64-torch.txt wheelhouse dest mark
  wheelhouse=${CPYTREE_CACHE:-$HOME/.cache/cpytree}/wheelhouse-aarch64
  dest=build/torch/2.15.0-aarch64/site
  mark=$(sha256sum "$reqs" | cut -c1-16)
  local plat=()
  for p in "${AARCH64_PLATFORMS[@]}"; do plat+=(--platform "$p"); done
  if [ "$(cat "$dest/.pins" 2>/dev/null)" != "$mark" ]; then
    mkdir -p "$wheelhouse"
    local pipargs=(--no-deps --require-hashes -r "$reqs" --only-binary :all: "${plat[@]}"
      --python-version 3.11 --implementation cp)
    echo "test-python aarch64 --torch: torch 2.15.0 into $dest (wheels: $wheelhouse)" >&2
    rm -rf "$dest"
    if ! "$tools/python" -m pip install -q --no-index --find-links "$wheelhouse" --target "$dest" \
         --no-compile "${pipargs[@]}" >/dev/null 2>&1; then
      # Fetched once (2.5 GB), with pip's own index settings.
      "$tools/python" -m pip download -q -d "$wheelhouse" "${pipargs[@]}" >&2
      rm -rf "$dest"
      "$tools/python" -m pip install -q --no-index --find-links "$wheelhouse" --target "$dest" \
        --no-compile "${pipargs[@]}" 2>&1 | { grep -v "is ignored: it is neither" || true; } >&2
    fi
    echo "$mark" > "$dest/.pins"
  fi
  realpath "$dest"
}

test_aarch64_torch() {
  local logs=${SHARD_LOGS:-/tmp/cpytree-aarch64} rc=0 start=$SECONDS
  mkdir -p "$logs"
  export PYTHONPATH=$PYTHONPATH:$torch_site CUDA_VISIBLE_DEVICES=
  echo "test-python aarch64 --torch: $("$root/python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null) ($(( SECONDS - start )) s to import)"
  if [ "$AARCH64_TORCH_TESTS" != none ]; then
    # shellcheck disable=SC2086
    FILE_COUNTS_JSON=$logs/torch.json "${pytest[@]}" -m torch $AARCH64_TORCH_TESTS || rc=1
    echo "test-python aarch64 --torch: pytest $(( SECONDS - start )) s"
  fi
  if [ "${AARCH64_TORCH_DYNAMO:-1}" != 0 ]; then
    local t=$SECONDS
    # shellcheck disable=SC2086
    "$root/python" benchmarks/dynamo_suite.py ${AARCH64_TORCH_DYNAMO_ARGS:---quick} --no-runtime \
      | tee "$logs/dynamo_quick.txt" || rc=1
    echo "test-python aarch64 --torch: dynamo suite --quick $(( SECONDS - t )) s ($logs/dynamo_quick.txt)"
  fi
  exit $rc
}
