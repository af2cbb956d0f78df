"""Test helper for the inspection lit tests: reads the JSON smelt writes (a dump's
manifest.json, a --profile trace, `smelt bench --json`), fails on anything malformed and
prints one line per fact the tests check with FileCheck."""
import json
import os
import sys


def manifest(directory):
    m = json.load(open(os.path.join(directory, "manifest.json")))
    for entry in m["files"]:
        # Every file the manifest lists exists and is not empty.
        size = os.path.getsize(os.path.join(directory, entry["file"]))
        print(f"{entry['file']}: {entry['kind']}" + ("" if size else " (EMPTY)"))
    for device, peak in m.get("peak_bytes", {}).items():
        print(f"peak bytes on {device}: {int(peak)}")


def trace(path):
    events = json.load(open(path))["traceEvents"]
    names = {}  # (pid, tid) -> "process/thread"
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    for e in events:
        if e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = processes[e["pid"]] + "/" + e["args"]["name"]
    spans = [e for e in events if e["ph"] == "X"]
    for e in spans:
        assert e["dur"] >= 0 and e["ts"] >= 0, e
    for category in sorted({e["cat"] for e in spans}):
        first = next(e for e in spans if e["cat"] == category)
        where = names[(first["pid"], first["tid"])]
        print(f"span {category} on {where}: {first['name']} {json.dumps(first.get('args', {}), sort_keys=True)}")
    counters = [e for e in events if e["ph"] == "C"]
    for name in sorted({e["name"] for e in counters}):
        samples = [e for e in counters if e["name"] == name]
        peak = max(e["args"]["peak"] for e in samples)
        print(f"counter {name}: {len(samples)} samples, peak {peak:.0f}")


def bench(path):
    b = json.load(sys.stdin if path == "-" else open(path))
    print(f"function {b['function']} runs {b['runs']} steps {len(b['steps'])}")
    for s in b["steps"]:
        assert s["median_us"] >= 0 and s["bytes"] > 0, s
        print(f"step {s['step']} {s['kind']} {s['name']}: {s['ops']}")
    # The whole run beside its parts: consistent with each other, never a timing threshold.
    parts = sum(s["median_us"] for s in b["steps"])
    assert abs(b["steps_sum_us"] - parts) <= 1e-9 * max(1.0, parts), (b["steps_sum_us"], parts)
    assert b["wall_median_us"] >= 0 and b["total_median_us"] >= 0, b
    between = b["wall_median_us"] - b["steps_sum_us"]
    assert abs(b["between_steps_us"] - between) <= 1e-9 * max(1.0, b["wall_median_us"]), b
    print("steps_sum_us is the sum of the steps; wall_median_us and between_steps_us agree")
    # The roofs' 2 x 128 MiB copy buffers are not the model's: a model of a few KiB stays far
    # below them (the process itself is about 60 MiB).
    mib = b["peak_resident_bytes"] / 2**20
    print(f"peak resident memory {'below' if mib < 200 else 'at or above'} 200 MiB")


if __name__ == "__main__":
    {"manifest": manifest, "trace": trace, "bench": bench}[sys.argv[1]](sys.argv[2])
