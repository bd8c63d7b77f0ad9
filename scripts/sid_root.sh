#!/usr/bin/env bash
# A Debian sid folder (debootstrap --variant=minbase, used through chroot) with
# CPython 3.14 and 3.15 (interpreters, venv, headers): the newest CPythons,
# which pyenv here does not have. Made once into a cache outside the checkout
# and reused; prints the folder's path on the last line.
#
#   scripts/sid_root.sh                 # amd64: python3.14, python3.15 (+ -dev, -venv)
#   scripts/sid_root.sh arm64           # arm64: CPython 3.13, 3.14, 3.15 and their
#                                       # headers, unpacked only
#   scripts/sid_root.sh bookworm-arm64  # the same from Debian bookworm: CPython 3.11
#   scripts/sid_root.sh amd64 run CMD.. # CMD inside the folder (chroot, env -i),
#                                       # in the checkout: bound at its own path,
#                                       # as are $CPYTREE_CACHE and /tmp (build lock)
#
# CPYTREE_CACHE (default ~/.cache/cpytree) holds it: $CPYTREE_CACHE/sid-<arch>
# (bookworm-arm64: $CPYTREE_CACHE/bookworm-arm64).
# The mirror is the one apt already uses on this machine. On sid apt needs
# Acquire::Check-Valid-Until "false" (the mirror is a dated snapshot); pip
# inside needs this machine's locally added CA certificates, copied in.
#
# arm64: there is no binfmt_misc here, so nothing arm64 can run during
# debootstrap's second stage. The folder is debootstrap's first stage (--foreign:
# the essential packages unpacked) plus every package CPython needs unpacked
# with dpkg-deb -x (no maintainer scripts: CPython needs none of them). Its
# interpreter runs through qemu-aarch64 (sid's qemu-user 11, scripts/qemu_user.sh),
# named explicitly: scripts/wheel.sh's wrapper runs `qemu-aarch64 -L DIR
# DIR/usr/bin/python3.X`. The folder holds no qemu of its own.
set -euo pipefail
ARCH=${1:-amd64}
CACHE=${CPYTREE_CACHE:-$HOME/.cache/cpytree}
SUITE=sid
case $ARCH in bookworm-arm64) SUITE=bookworm ARCH=arm64 ;; esac
ROOT=$CACHE/$SUITE-$ARCH
MIRROR=${SID_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# g++: Inductor's CPU backend compiles its kernels with it (make test-torch-sid).
AMD64_PKGS="python3.14 python3.14-venv python3.14-dev python3.15 python3.15-venv python3.15-dev
  ca-certificates binutils g++"
# arm64: the CPythons each suite has (sid 3.13-3.15, bookworm 3.11), each
# with its headers: the aarch64 wheels are built and tested against them.
ARM64_PYTHONS=${ARM64_PYTHONS:-3.13 3.14 3.15}
[ "$SUITE" = bookworm ] && ARM64_PYTHONS=3.11
ARM64_PKGS=$(for v in $ARM64_PYTHONS; do echo "python$v python$v-venv libpython$v-dev"; done)

in_root() {  # chroot with a clean environment; /proc and /dev for CPython and pip
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  mountpoint -q "$ROOT/dev" || mount --bind /dev "$ROOT/dev"
  env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    chroot "$ROOT" "$@"
}

bind() {  # host directory -> the same path inside the folder
  mkdir -p "$ROOT$1"
  mountpoint -q "$ROOT$1" || mount --bind "$1" "$ROOT$1"
}

if [ "${2:-}" = run ]; then
  shift 2
  [ -f "$ROOT/.cpytree-done" ] || { echo "sid_root: $ROOT not made: scripts/sid_root.sh $ARCH" >&2; exit 1; }
  # The mounts live in a mount namespace of this command alone: they vanish
  # with it (so `rm -rf` of the folder never reaches the checkout or /tmp).
  if [ -z "${SID_ROOT_NS:-}" ]; then
    SID_ROOT_NS=1 exec unshare --mount --propagation private "$0" "$ARCH" run "$@"
  fi
  repo=$(cd "$(dirname "$0")/.." && pwd)
  bind "$repo"; bind "$CACHE"; bind /tmp
  # The checkout may be a git worktree whose .git names another folder.
  gitdir=$(git -C "$repo" rev-parse --git-common-dir 2>/dev/null || true)
  case "$gitdir" in /*) bind "$gitdir" ;; esac
  in_root /bin/sh -c 'cd "$1" && shift && exec "$@"' _ "$repo" \
    env BUILD_LOCK="${BUILD_LOCK:-/tmp/cpytree-build.lock}" JOBS="${JOBS:-2}" \
    CPYTREE_CACHE="$CACHE" WHEEL_SYMBOLS="${WHEEL_SYMBOLS:-0}" "$@"
  exit
fi

if [ -f "$ROOT/.cpytree-done" ]; then echo "$ROOT"; exit 0; fi
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >&2
rm -rf "$ROOT.tmp" && mkdir -p "$CACHE"
start=$(date +%s)
if [ "$ARCH" = amd64 ]; then
  echo "sid_root: debootstrap sid amd64 from $MIRROR into $ROOT" >&2
  debootstrap --variant=minbase sid "$ROOT.tmp" "$MIRROR" >&2
  echo 'Acquire::Check-Valid-Until "false";' > "$ROOT.tmp/etc/apt/apt.conf.d/99cpytree-snapshot"
  mkdir -p "$ROOT.tmp/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT.tmp/usr/local/share/ca-certificates/" 2>/dev/null || true
  ROOT=$ROOT.tmp
  in_root apt-get update -q >&2
  # shellcheck disable=SC2086
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $AMD64_PKGS >&2
  in_root update-ca-certificates >&2
  in_root apt-get clean
  umount "$ROOT/proc" "$ROOT/dev"
  ROOT=${ROOT%.tmp}
else
  echo "sid_root: debootstrap --foreign $SUITE $ARCH from $MIRROR into $ROOT" >&2
  # shellcheck disable=SC2086
  debootstrap --foreign --arch="$ARCH" --variant=minbase --include="$(echo $ARM64_PKGS | tr ' ' ,)" \
    "$SUITE" "$ROOT.tmp" "$MIRROR" >&2
  for deb in "$ROOT.tmp"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT.tmp"; done
  mkdir -p "$ROOT.tmp/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$ROOT.tmp/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
  rm -f "$ROOT.tmp"/var/cache/apt/archives/*.deb
fi
mv "$ROOT.tmp" "$ROOT"
touch "$ROOT/.cpytree-done"
echo "sid_root: $ROOT made in $(( $(date +%s) - start )) s" >&2
echo "$ROOT"
