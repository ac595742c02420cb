#!/usr/bin/env bash
# wire_decode_upb: sets up Google's upb (pip's protobuf, in target/upb-venv), generates the
# Python classes of the official Mesos scheduler protos (mesos-go's copies, which test.sh
# installs, with their gogo options stripped: Go code-generation options that do not change
# the wire), and runs tests/bench/upb.py on the streams in $1 (the wire bench's
# WIRE_BENCH_STREAMS).
set -euo pipefail
cd "$(dirname "$0")/../.."
streams=$1
venv=target/upb-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import google.protobuf' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'protobuf>=4.21'
fi
lib=${MESOS_PROTO_ROOT:-/usr/share/gocode/src}/github.com/mesos/mesos-go/api/v1/lib
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
mkdir -p "$gen/src" "$gen/py"
for f in "$lib/mesos.proto" "$lib/scheduler/scheduler.proto"; do
  sed -E -e '/^import "github.com\/gogo/d' -e '/^[[:space:]]*option \(gogoproto/d' \
    -e 's/ *\[\(gogoproto[^]]*\]//g' \
    -e 's#^import "github.com/mesos/mesos-go/api/v1/lib/mesos.proto";#import "mesos.proto";#' \
    "$f" >"$gen/src/$(basename "$f")"
done
protoc -I "$gen/src" --python_out="$gen/py" "$gen/src/mesos.proto" "$gen/src/scheduler.proto"
"$venv/bin/python" tests/bench/upb.py "$gen/py" "$streams"
