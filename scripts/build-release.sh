#!/usr/bin/env bash
# Builds a release: static x86_64 musl binaries of storage-scheduler and storage-executor in
# dist/<tag>/ with a SHA256SUMS file, the layout of a release location
# `{release_url}/<release_tag>/` (deployment-spec.md sections 1 and 9).
#
#   scripts/build-release.sh [TAG]
#
# TAG is `v<major>.<minor>.<patch>`, optionally with a suffix (`v0.0.0-test`); without it, the
# tag on HEAD if there is exactly one, else `v<crate version>-dev`. Both binaries embed the tag
# and the commit (`-version` prints them). Fails when a binary is not static or exceeds its
# size budget. Installs the musl target (rustup) and musl-tools (apt) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-release.sh: $*" >&2; exit 1; }
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -le 1 ] || die "one argument at most: the tag (see --help)"

# Size budgets in bytes: the launcher fetches both binaries on every (re)start. The
# scheduler's was 4 MiB, then 4.5 MiB with TLS on its own API; the storage health model
# (gateway poll, host reports, /api/health, page and metrics) took it to 4.64 MiB after the
# release profile was trimmed (our crates at opt-level 2, cold dependencies for size), so it
# was 5 MiB for the day-two lifecycle and operator API; with those built (the operator API,
# Mesos maintenance, decommission and the `ctl` client: 5.06 to 5.31 MB) it is 5.5 MiB. The
# largest parts, as leads for trimming: serde's derived (de)serializers of the model and the
# Mesos types, ring's P-256 table (151 KB), std's backtrace symbolizer (about 75 KB, useless
# in a stripped binary, but linked by the default panic hook). What would keep it
# under 4.5 MiB and was refused: our crate at opt-level "s" (-650 KB, but +6 to +28% decode
# instructions) and a non-PIE link (-100 KB, but no address randomisation for a server that
# steers root on every agent).
# A cliff to know of: the scheduler sits about 170 KB from a jump that is not its own code. If
# LLVM simplifies std's `RawVecInner::current_memory` before inlining it, SimplifyCFG's sinking
# leaves a store through a phi of two stack slots that SROA cannot split, in every drop of a
# `Vec` or `String` it is inlined into; the drop glue grows and stops being inlined (7,542
# such phis in the crate's IR against 88). Which way it goes moved with one more `Vec` field
# in one struct (`gateway_work/poll.rs`). Turning the sinking off
# (`-C llvm-args=-simplifycfg-sink-common=false`) removes the cliff but slowed the protobuf
# decode by a fifth, so it is not set. A build that jumps by 150 KB or more: look here first.
SCHEDULER_BUDGET=$((11 * 512 * 1024))
EXECUTOR_BUDGET=$((3 * 1024 * 1024))

crate_version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
tag_pattern='^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$'
if [ $# -eq 1 ]; then
  tag="$1"
  [[ "$tag" =~ $tag_pattern ]] || die "tag \"$tag\" is not v<major>.<minor>.<patch>[-suffix]"
else
  tag="$(git describe --tags --exact-match 2>/dev/null || true)"
  [[ "$tag" =~ $tag_pattern ]] || tag="v$crate_version-dev"
fi
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi

target=x86_64-unknown-linux-musl
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
# musl-gcc compiles any C code of dependencies (ring, for TLS) against musl.
if ! command -v musl-gcc >/dev/null; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "build-release.sh: installing musl-tools" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends musl-tools >/dev/null \
    || { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
         $SUDO apt-get install -y -qq --no-install-recommends musl-tools >/dev/null; }
fi

export STORAGE_RELEASE_TAG="$tag" STORAGE_RELEASE_COMMIT="$commit"
cargo build --quiet --release --locked --target "$target" -p storage-framework --bin storage-scheduler
cargo build --quiet --release --locked --target "$target" -p storage-executor

out="dist/$tag"
rm -rf "$out"
mkdir -p "$out"
for bin in storage-scheduler storage-executor; do
  cp "target/$target/release/$bin" "$out/$bin"
  # A static binary has no NEEDED entries and no program interpreter.
  if readelf -d "$out/$bin" 2>/dev/null | grep -q NEEDED || readelf -l "$out/$bin" | grep -q INTERP; then
    die "$bin is dynamically linked"
  fi
  # The embedded identity is what an operator will see: check it is this build's.
  got="$("$out/$bin" -version)"
  [ "$got" = "$bin $tag (commit $commit)" ] || die "$bin -version says \"$got\", expected tag $tag commit $commit"
done

size_sched=$(stat -c %s "$out/storage-scheduler")
size_exec=$(stat -c %s "$out/storage-executor")
[ "$size_sched" -le "$SCHEDULER_BUDGET" ] \
  || die "storage-scheduler is $size_sched bytes, over its budget of $SCHEDULER_BUDGET"
[ "$size_exec" -le "$EXECUTOR_BUDGET" ] \
  || die "storage-executor is $size_exec bytes, over its budget of $EXECUTOR_BUDGET"

(cd "$out" && sha256sum storage-scheduler storage-executor > SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
printf '%s %s bytes (budget %s)\n' "$out/storage-scheduler" "$size_sched" "$SCHEDULER_BUDGET"
printf '%s %s bytes (budget %s)\n' "$out/storage-executor" "$size_exec" "$EXECUTOR_BUDGET"
# Scripts that measure the artifacts (bench.sh) find the newest build here.
ln -sfn "$tag" dist/last-build
echo "$out/SHA256SUMS verified; release $tag, commit $commit"
