"""wire_decode_upb: Google's upb decoding the scheduler events the wire bench decodes.

upb is the backend of the Python protobuf runtime (pip's `protobuf` 4.21 and later); the issue
that set the wire targets measured it, and its goal for `wire_decode_protobuf` is five times
this. Usage: upb.py GENERATED_DIR STREAM_DIR, where GENERATED_DIR holds `scheduler_pb2` (made
by tests/bench/upb.sh from the official Mesos protos) and STREAM_DIR the RecordIO streams the
wire bench wrote (`WIRE_BENCH_STREAMS`). Each event is decoded whole, as `Event.FromString`.
Prints `bench <name> <events/s> events/s` (median of the passes) and a `_spread` line.
"""
import sys
import time


def records(path):
    """The records of a RecordIO file ("<length>\\n<bytes>", repeated)."""
    data = open(path, "rb").read()
    out, at = [], 0
    while at < len(data):
        nl = data.index(b"\n", at)
        n = int(data[at:nl])
        out.append(data[nl + 1 : nl + 1 + n])
        at = nl + 1 + n
    return out


def measure(name, decode, recs):
    rates = []
    deadline = time.perf_counter() + 3.0
    while len(rates) < 15 and (len(rates) < 5 or time.perf_counter() < deadline):
        start = time.perf_counter()
        for r in recs:
            decode(r)
        rates.append(len(recs) / (time.perf_counter() - start))
    rates.sort()
    print(f"bench {name} {rates[len(rates) // 2]:.0f} events/s")
    print(f"bench {name}_spread {rates[0]:.0f}-{rates[-1]:.0f} events/s ({len(rates)} passes, median above)")


def main():
    generated, streams = sys.argv[1], sys.argv[2]
    sys.path.insert(0, generated)
    from google.protobuf.internal import api_implementation

    import scheduler_pb2

    backend = api_implementation.Type()
    if backend != "upb":
        sys.exit(f"the protobuf runtime's backend is {backend!r}, not upb")
    print(f"# wire_decode_upb: python protobuf {__import__('google.protobuf').protobuf.__version__}, backend {backend}")
    offers = records(f"{streams}/offers.recordio")
    # A decode that lost the offer would be fast and wrong.
    assert len(scheduler_pb2.Event.FromString(offers[0]).offers.offers) == 1
    measure("wire_decode_upb", scheduler_pb2.Event.FromString, offers)
    measure("wire_decode_upb_update", scheduler_pb2.Event.FromString, records(f"{streams}/update.recordio"))


main()
