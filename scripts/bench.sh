#!/usr/bin/env bash
# Performance figures. Every line of interest is `bench <name> <value> <unit>`.
set -euo pipefail
cd "$(dirname "$0")/.."
# wire_decode_protobuf, wire_decode_json: events/s decoding an in-memory RecordIO stream of
# realistic OFFERS events, release build, one thread.
cargo bench --quiet --bench wire 2>/dev/null | grep '^bench '
