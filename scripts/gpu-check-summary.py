#!/usr/bin/env python3
"""Turns what scripts/gpu-check.sh left in its output folder into summary.json and the table.

gpu-check.sh runs each binary and writes, in the folder given to it (--out):
  steps.tsv     one line a binary: kind (test|benchmark), name, exit status or "missing",
                seconds, why it was not run (empty when it ran)
  facts.tsv     key, value: the device, driver, toolkit, what `smelt devices` printed ...
  NAME.log      the binary's whole output; NAME.json gtest's own report (--gtest_output=json)
This reads them (gtest's JSON, never its text), writes summary.json beside them and prints the
table; docs/gpu.md says what each field means. Exit status: 0 when every binary ran and none
failed, and, beside a GPU, none skipped (a skip there means the GPU was not used).
"""
import json
import re
import sys
from pathlib import Path

# Units a benchmark line may give a figure in; other numbers (sizes, counts) are not figures.
UNITS = ["TFLOP/s", "GFLOP/s", "GB/s", "MiB", "GiB", "ms", "us", "s", "%", "x"]
FIGURE = re.compile(r"(-?\d+(?:\.\d+)?)\s?(" + "|".join(re.escape(u) for u in UNITS) + r")(?![\w/])")
# What separates the clauses of a benchmark's line ("a 1 ms, b 2 ms: c 3x (d 4 %)").
CLAUSE = re.compile(r",\s|:\s|;\s|\(")
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?%?$")
# Lines that are not measurements: the device, a skip, an error.
NOT_FIGURES = re.compile(r"^(device:|skipped|error:|smelt-bench-[\w-]+: (skipped|error))")


def read_tsv(path):
    if not path.exists():
        return []
    return [line.rstrip("\n").split("\t") for line in path.read_text().splitlines() if line]


def gtest_tests(report_path):
    """Every test in gtest's JSON report: name, status, seconds, and the failure messages."""
    if not report_path.exists():
        return None
    report = json.loads(report_path.read_text())
    tests = []
    for suite in report.get("testsuites", []):
        for test in suite.get("testsuite", []):
            failures = [f.get("failure", "") for f in test.get("failures", [])]
            if failures:
                status = "failed"
            elif test.get("result") == "SKIPPED" or test.get("status") == "NOTRUN":
                status = "skipped"
            else:
                status = "passed"
            entry = {
                "name": f"{suite['name']}.{test['name']}",
                "status": status,
                "seconds": float(str(test.get("time", "0s")).rstrip("s") or 0),
            }
            if failures:
                entry["failures"] = [f[:2000] for f in failures]
            if status == "skipped":
                skipped = test.get("skipped", [])
                if skipped:
                    entry["why"] = skipped[0].get("message", "")[:500]
            tests.append(entry)
    return tests


def label_of(clause):
    """The words that name a figure: the clause up to its number, without leading noise."""
    return re.sub(r"\s+", " ", clause).strip(" :,;")


def table_figures(header, row):
    """A row of a table whose header line names its columns (smelt-bench-gemm's): columns with
    a unit in the header (ms, TFLOP/s) or values in % are figures, the others name the row."""
    keys, figures = [], []
    for column, value in zip(header, row):
        if column in UNITS and NUMBER.match(value):
            figures.append((column, float(value), column))
        elif value.endswith("%") and NUMBER.match(value):
            figures.append((column, float(value[:-1]), "%"))
        else:
            keys.append(f"{column}={value}")
    return [(" ".join(keys) + " " + name, v, unit) for name, v, unit in figures]


def benchmark_figures(log_text):
    """name/value/unit for every figure the benchmark printed, each with the line it came from."""
    figures, header = [], None
    for line in log_text.splitlines():
        stripped = line.strip()
        if not stripped or NOT_FIGURES.match(stripped):
            header = None
            continue
        columns = re.split(r"\s{2,}", stripped)
        if len(columns) > 1 and not any(c[0].isdigit() for c in columns):
            header = columns  # a table's header: the rows under it follow its columns
            continue
        cells = stripped.split(None, len(header) - 1) if header else []
        if header and len(cells) == len(header) and all(
                NUMBER.match(v) for c, v in zip(header, cells) if c in UNITS):
            for name, value, unit in table_figures(header, cells):
                figures.append({"name": name, "value": value, "unit": unit, "line": stripped})
            continue
        header = None
        # "context: a 1.2 ms, b 3.4 ms: c 5x": each figure named by its line's head (before the
        # first ": ") and the clause just before it.
        head = label_of(stripped.split(": ")[0]) if ": " in stripped else ""
        start = 0
        for match in FIGURE.finditer(stripped):
            before = stripped[start:match.start()]
            name = label_of(CLAUSE.split(before)[-1]) or label_of(before)
            if head and not name.startswith(head):
                name = f"{head}: {name}" if name else head
            figures.append({"name": name, "value": float(match.group(1)),
                            "unit": match.group(2), "line": stripped})
            start = match.end()
    return figures


def main():
    out = Path(sys.argv[1])
    facts = dict((row + [""])[:2] for row in read_tsv(out / "facts.tsv"))
    have_gpu = facts.get("have_gpu") == "1"
    binaries, status = [], 0
    for row in read_tsv(out / "steps.tsv"):
        kind, name, code, seconds, why = (row + [""] * 5)[:5]
        entry = {"name": name, "kind": kind, "log": str(out / f"{name}.log"),
                 "seconds": float(seconds) if seconds else None}
        log = out / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        if why:
            entry.update(status="not run", why=why)
        else:
            entry["exit"] = int(code)
        if kind == "test" and not why:
            tests = gtest_tests(out / f"{name}.json")
            entry["tests"] = tests or []
            counts = {s: sum(t["status"] == s for t in tests or []) for s in
                      ("passed", "failed", "skipped")}
            entry.update(counts)
            if int(code) in (124, 137):
                entry.update(status="failed", why="timed out")
            elif tests is None:
                entry.update(status="failed", why=f"no gtest report (exit {code}): see the log")
            elif int(code) != 0 or counts["failed"]:
                entry["status"] = "failed"
            elif counts["skipped"] and have_gpu:
                entry.update(status="failed", why="tests skipped beside a GPU")
            elif counts["skipped"] == len(tests) and tests:
                entry["status"] = "skipped"
            else:
                entry["status"] = "passed"
            corpus = re.search(r"NVRTC rendered and compiled .*", text)
            if corpus:
                entry["note"] = corpus.group(0)
        elif kind == "benchmark" and not why:
            entry["lines"] = text.splitlines()
            entry["figures"] = benchmark_figures(text)
            if int(code) == 77:
                entry["status"] = "failed" if have_gpu else "skipped"
                entry["why"] = (text.strip().splitlines() or ["exit 77"])[-1]
            elif int(code) != 0:
                entry.update(status="failed", why="timed out" if int(code) in (124, 137) else
                             f"exit {code}: see the log")
            else:
                entry["status"] = "passed"
        if entry["status"] in ("failed", "not run"):
            status = 1
        binaries.append(entry)

    summary = {key: facts.get(key, "") for key in
               ("date", "host", "device", "driver", "cuda_toolkit", "cuda_include", "ptxas",
                "binaries")}
    summary["gpu"] = have_gpu
    summary["libraries"] = {name: facts.get(name, "") for name in
                            ("CUDA driver", "NVRTC", "cuBLASLt", "cuDNN", "NCCL")}
    summary["smelt_devices"] = facts.get("smelt_devices", "").split("\\n")
    summary["status"] = "passed" if status == 0 else "failed"
    summary["results"] = binaries
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    # The table, last: one row a binary, then every benchmark figure.
    print(f"\ngpu-check {summary['date']} on {summary['host']}: {summary['device']}")
    print(f"driver {summary['driver'] or '-'}; toolkit {summary['cuda_toolkit'] or '-'}; " +
          "; ".join(f"{k} {v or '-'}" for k, v in summary["libraries"].items()))
    print(f"binaries {summary['binaries']}; cuda_fp16.h {summary['cuda_include']}; "
          f"ptxas {summary['ptxas']}")
    print(f"{'binary':<26} {'status':<8} {'tests':>5} {'passed':>6} {'failed':>6} "
          f"{'skipped':>7} {'seconds':>8}  note")
    for b in binaries:
        seconds = f"{b['seconds']:.1f}" if b["seconds"] is not None else "-"
        cells = [str(b.get(k, "-")) for k in ("passed", "failed", "skipped")]
        tests = str(len(b["tests"])) if "tests" in b else "-"
        note = b.get("why") or b.get("note") or ""
        print(f"{b['name']:<26} {b['status']:<8} {tests:>5} {cells[0]:>6} {cells[1]:>6} "
              f"{cells[2]:>7} {seconds:>8}  {note}")
    for b in binaries:
        for f in b.get("figures", []):
            print(f"  {b['name']}: {f['name']}: {f['value']:g} {f['unit']}")
    print(f"summary: {out / 'summary.json'}; logs: {out}; {summary['status']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
