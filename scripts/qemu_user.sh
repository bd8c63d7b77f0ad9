#!/usr/bin/env bash
# The qemu-aarch64 every aarch64 run uses (scripts/wheel.sh's interpreter
# wrapper, scripts/sid_root.sh's arm64 folders, scripts/test_python.sh --arch
# aarch64): Debian sid's qemu-user, pinned in scripts/qemu-user.lock
# (version, sha256). A static binary, so it runs on this bookworm host: the
# .deb is downloaded once into $CPYTREE_CACHE/downloads (sha256 checked on
# every use) and unpacked with dpkg-deb -x into $CPYTREE_CACHE/qemu-<version>.
# Prints the binary's path on the last line.
#
# Why not bookworm's qemu-user-static (7.2): PyPI's aarch64 torch dies under
# it with SIGSEGV at `from torch._C import *` (issue 39); 11.1.3 imports it.
# QEMU_USER_DEB_URL: where to download the pinned .deb instead of the lock's
# source (a sid mirror drops old versions; the sha256 is checked either way).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CPYTREE_CACHE:-$HOME/.cache/cpytree}
# shellcheck source=scripts/pinned_sources.sh
. scripts/pinned_sources.sh
export PIN_FILE=scripts/qemu-user.lock
version=$(pin qemu-user 2)
dir=$CACHE/qemu-${version#*:}
bin=$dir/usr/bin/qemu-aarch64
if [ ! -x "$bin" ]; then
  if [ -n "${QEMU_USER_DEB_URL:-}" ]; then
    deb=$CACHE/downloads/$(basename "$(pin qemu-user 4)")
    mkdir -p "$CACHE/downloads"
    [ -f "$deb" ] || { curl -sSfL --retry 3 -o "$deb.part" "$QEMU_USER_DEB_URL" && mv "$deb.part" "$deb"; }
  fi
  deb=$(fetch qemu-user)
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  dpkg-deb -x "$deb" "$dir.tmp"
  # Only the aarch64 emulator is kept (the package holds one for every target).
  find "$dir.tmp/usr/bin" ! -type d ! -name qemu-aarch64 -delete
  rm -rf "$dir.tmp/usr/share" "$dir" && mv "$dir.tmp" "$dir"
fi
got=$("$bin" --version | head -1)
case $got in
  *"(Debian $version)"*) ;;
  *) echo "qemu_user: $bin says '$got', the pin is $version" >&2; exit 1 ;;
esac
echo "$bin"
