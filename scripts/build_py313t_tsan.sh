#!/bin/sh
# Builds the free-threaded CPython 3.13.0 of ../shared/pythons with
# ThreadSanitizer (./configure --disable-gil --with-thread-sanitizer) once,
# into $CPYTREE_CACHE/py313t-tsan, and prints the interpreter's path on the
# last line (cached: a second run only prints it). `make test-ft-tsan` runs the
# engine's thread suites on it; TSan needs the interpreter instrumented too,
# or every object CPython hands between threads is reported as a race.
# About 35 minutes on 2 cores (its compileall runs instrumented). The build dependencies are the ones
# build_py313t.sh installs (run it once first).
set -eu
tarball=${PY313T_TARBALL:?the CPython 3.13.0 free-threaded source tarball (../shared/pythons)}
prefix=${CPYTREE_CACHE:-$HOME/.cache/cpytree}/py313t-tsan
py=$prefix/bin/python3.13t
if [ -x "$py" ] && "$py" -c 'import sys, sysconfig
sys.exit("--with-thread-sanitizer" not in sysconfig.get_config_var("CONFIG_ARGS"))' 2>/dev/null; then
  echo "$py"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$tarball" -C "$work"
cd "$work/Python-3.13.0"
./configure --disable-gil --with-thread-sanitizer --prefix="$prefix" > "$work/configure.log" 2>&1 \
  || { tail -20 "$work/configure.log" >&2; exit 1; }
nice -n 10 make -j"$(nproc)" > "$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
make install > "$work/install.log" 2>&1 || { tail -20 "$work/install.log" >&2; exit 1; }
# CPython's own suppressions for its free-threaded build, kept beside it.
cp Tools/tsan/suppressions_free_threading.txt "$prefix/tsan_suppressions_cpython.txt"
echo "$py"
