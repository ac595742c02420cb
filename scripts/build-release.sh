#!/usr/bin/env bash
# Builds the release artifacts: static x86_64 musl binaries of storage-scheduler and
# storage-executor, into target/release-artifacts/, and checks that they are static.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-musl
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
cargo build --quiet --release --locked --target "$target" -p storage-framework --bin storage-scheduler
cargo build --quiet --release --locked --target "$target" -p storage-executor
out=target/release-artifacts
mkdir -p "$out"
for bin in storage-scheduler storage-executor; do
  cp "target/$target/release/$bin" "$out/$bin"
  # A static binary has no NEEDED entries (no shared libraries to load).
  if readelf -d "$out/$bin" 2>/dev/null | grep -q NEEDED; then
    echo "build-release.sh: $bin is dynamically linked" >&2
    exit 1
  fi
  printf '%s %s bytes\n' "$out/$bin" "$(stat -c %s "$out/$bin")"
done
