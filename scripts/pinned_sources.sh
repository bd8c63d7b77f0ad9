# Sourced by the scripts that build from cmake/deps.lock (scripts/native_deps.sh,
# scripts/host_simdjson.sh): reads a pin and downloads its archive once into
# $CACHE/downloads, checking the sha256 on every use. Needs CACHE set.
# PIN_FILE: the lock file read (default cmake/deps.lock; scripts/qemu_user.sh
# reads scripts/qemu-user.lock, kept apart so the wheels' dependency hash,
# which covers cmake/deps.lock, does not change with it).

pin() {  # name field -> that field of the name's line in $PIN_FILE
  awk -v n="$1" -v f="$2" '$1 == n { print $f }' "${PIN_FILE:-cmake/deps.lock}"
}

# Download a pinned archive once and check its sha256.
fetch() {  # name -> path of the archive
  local name=$1 url sha file
  url=$(pin "$name" 4) sha=$(pin "$name" 3)
  [ -n "$url" ] || { echo "$name: no pin in ${PIN_FILE:-cmake/deps.lock}" >&2; exit 1; }
  mkdir -p "$CACHE/downloads"
  file=$CACHE/downloads/$(basename "$url")
  if [ ! -f "$file" ]; then
    curl -sSfL --retry 3 -o "$file.part" "$url"
    mv "$file.part" "$file"
  fi
  echo "$sha  $file" | sha256sum -c --quiet - >&2 || { rm -f "$file"; echo "$name: sha256 mismatch" >&2; exit 1; }
  echo "$file"
}
