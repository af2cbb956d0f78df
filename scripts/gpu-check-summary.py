#!/usr/bin/env python3
"""Turns what scripts/gpu-check.sh left in its work folder into summary.json and the table.

gpu-check.sh runs each GPU test suite in its own process, then each benchmark, and writes in
its work folder (the one folder of the archive gpu-check.tar.gz it leaves in --out):
  steps.tsv     one line a step: kind (test|benchmark), binary, suite (empty: the whole
                binary), exit status ("missing": not run; "none": nothing to run), seconds, why
                it was not run (empty when it ran), a note
  facts.tsv     key, value: the device (emulated or not), driver, toolkit, `smelt devices` ...
  BINARY.Prefix_Suite.log, .json   a suite's whole output and gtest's report of it
  BINARY.log, NAME.log             a binary run whole (or whose listing timed out), a benchmark
This reads them (gtest's JSON, never its text), writes summary.json beside them (gpu-check.sh
copies it into --out) and prints the table; docs/gpu.md says what each field means.
Usage: gpu-check-summary.py WORK_FOLDER [OUT_FOLDER, named in the table's last line].
Exit status: 0 when every step ran and none failed, and, beside a GPU, no test skipped (a skip
there means the GPU was not used).
"""
import json
import re
import signal
import sys
from pathlib import Path

# Units a benchmark line may give a figure in; other numbers (sizes, counts) are not figures.
UNITS = ["TFLOP/s", "GFLOP/s", "GB/s", "MiB", "GiB", "ms", "us", "s", "%", "x"]
FIGURE = re.compile(r"(-?\d+(?:\.\d+)?)\s?(" + "|".join(re.escape(u) for u in UNITS) + r")(?![\w/])")
# What separates the clauses of a benchmark's line ("a 1 ms, b 2 ms: c 3x (d 4 %)").
CLAUSE = re.compile(r",\s|:\s|;\s|\(")
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?%?$")
# Lines that are not measurements: the device, a skip, an error, gpu-check's own timeout note.
NOT_FIGURES = re.compile(
    r"^(device:|skipped|error:|timed out after|smelt-bench-[\w-]+: (skipped|error))")


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
    return re.sub(r"\s+", " ", clause).strip(" :,;(")


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


def stem(binary, suite):
    """The name of a step's log and report, as gpu-check.sh gives it."""
    return f"{binary}.{suite.replace('/', '_')}" if suite else binary


def exit_why(code):
    """Why a process that exited `code` (timeout's codes included) did not finish, or None."""
    if code in (124, 137):
        return "timed out"
    if code > 128:
        try:
            return f"crashed ({signal.Signals(code - 128).name})"
        except ValueError:
            return f"crashed (signal {code - 128})"
    return None


def test_step(out, binary, suite, code, seconds, why, note, have_gpu):
    """One process of a test binary (a suite, or the whole binary): its row."""
    entry = {"suite": suite or None, "seconds": float(seconds) if seconds else None,
             "log": f"gpu-check/{stem(binary, suite)}.log"}
    if note:
        entry["note"] = note
    if why:
        return {**entry, "status": "not run", "why": why}
    if code == "none":
        return {**entry, "status": "skipped", "why": note or "no test to run"}
    code = int(code)
    entry["exit"] = code
    tests = gtest_tests(out / f"{stem(binary, suite)}.json")
    entry["tests"] = tests or []
    entry.update({s: sum(t["status"] == s for t in tests or []) for s in
                  ("passed", "failed", "skipped")})
    if exit_why(code):
        entry.update(status="failed", why=exit_why(code))
    elif tests is None:
        entry.update(status="failed", why=f"no gtest report (exit {code}): see the log")
    elif code != 0 or entry["failed"]:
        entry["status"] = "failed"
    elif entry["skipped"] and have_gpu:
        entry.update(status="failed", why="tests skipped beside a GPU")
    elif tests and entry["skipped"] == len(tests):
        entry["status"] = "skipped"
    else:
        entry["status"] = "passed"
    return entry


def test_binary(name, steps):
    """A test binary's entry from its steps: one run whole, or one a suite (then `suites`)."""
    if len(steps) == 1 and steps[0]["suite"] is None:
        entry = {"name": name, "kind": "test", **steps[0]}
        del entry["suite"]
        return entry
    tests = [t for s in steps for t in s.get("tests", [])]
    ran = [s["seconds"] for s in steps if s["seconds"] is not None]
    entry = {"name": name, "kind": "test", "seconds": sum(ran) if ran else None, "tests": tests}
    entry.update({k: sum(t["status"] == k for t in tests) for k in
                  ("passed", "failed", "skipped")})
    statuses = [s["status"] for s in steps]
    bad = [s for s in steps if s["status"] in ("failed", "not run")]
    if all(s == "not run" for s in statuses):
        entry["status"] = "not run"
    elif bad:
        entry["status"] = "failed"
    elif all(s == "skipped" for s in statuses):
        entry["status"] = "skipped"
    else:
        entry["status"] = "passed"
    if bad:
        entry["why"] = "; ".join(f"{s['suite']}: {s.get('why') or 'failed'}" for s in bad)
        entry["note"] = f"{len(bad)} of {len(steps)} suites failed or not run"
    entry["suites"] = steps
    return entry


def benchmark(out, name, code, seconds, why, have_gpu, emulated):
    entry = {"name": name, "kind": "benchmark", "log": f"gpu-check/{name}.log",
             "seconds": float(seconds) if seconds else None}
    if why:
        return {**entry, "status": "not run", "why": why}
    code = int(code)
    log = out / f"{name}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    entry["exit"] = code
    entry["lines"] = text.splitlines()
    entry["figures"] = benchmark_figures(text)
    if emulated:  # the emulator's timings: never to be read as a GPU's
        entry["emulated"] = True
        for figure in entry["figures"]:
            figure["emulated"] = True
    last = (text.strip().splitlines() or [f"exit {code}"])[-1]
    if code == 77:
        entry["status"] = "failed" if have_gpu else "skipped"
        entry["why"] = last
    elif code != 0:
        entry.update(status="failed", why=exit_why(code) or f"exit {code}: {last[:160]}")
    else:
        entry["status"] = "passed"
    return entry


def main():
    out = Path(sys.argv[1])
    final = Path(sys.argv[2]) if len(sys.argv) > 2 else out
    facts = dict((row + [""])[:2] for row in read_tsv(out / "facts.tsv"))
    have_gpu = facts.get("have_gpu") == "1"
    emulated = facts.get("emulated") == "1"
    binaries, tests_of = [], {}
    for row in read_tsv(out / "steps.tsv"):
        kind, name, suite, code, seconds, why, note = (row + [""] * 7)[:7]
        if kind == "test":
            if name not in tests_of:  # the binary's entry, where its first step came
                tests_of[name] = []
                binaries.append(name)
            tests_of[name].append(test_step(out, name, suite, code, seconds, why, note,
                                            have_gpu))
        else:
            binaries.append(benchmark(out, name, code, seconds, why, have_gpu, emulated))
    binaries = [test_binary(b, tests_of[b]) if isinstance(b, str) else b for b in binaries]
    status = int(any(b["status"] in ("failed", "not run") for b in binaries))

    summary = {key: facts.get(key, "") for key in
               ("date", "host", "device", "driver", "cuda_toolkit", "cuda_include", "ptxas",
                "binaries")}
    summary["gpu"] = have_gpu
    summary["emulated"] = emulated
    summary["libraries"] = {name: facts.get(name, "") for name in
                            ("CUDA driver", "NVRTC", "cuBLASLt", "cuDNN", "NCCL")}
    summary["smelt_devices"] = facts.get("smelt_devices", "").split("\\n")
    summary["archive"] = "gpu-check.tar.gz"
    summary["status"] = "passed" if status == 0 else "failed"
    summary["results"] = binaries
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    # The table, last: one row a binary, one under it for each of its suites, then every
    # benchmark figure.
    print(f"\ngpu-check {summary['date']} on {summary['host']}: {summary['device']}")
    if emulated:
        print("EMULATED CUDA (tests/emucuda): kernels ran on a CPU SIMT emulator; "
              "no figure below measures a GPU")
    print(f"driver {summary['driver'] or '-'}; toolkit {summary['cuda_toolkit'] or '-'}; " +
          "; ".join(f"{k} {v or '-'}" for k, v in summary["libraries"].items()))
    print(f"binaries {summary['binaries']}; cuda_fp16.h {summary['cuda_include']}; "
          f"ptxas {summary['ptxas']}")
    print(f"{'binary / suite':<27} {'status':<8} {'tests':>5} {'passed':>6} {'failed':>6} "
          f"{'skipped':>7} {'seconds':>8}  note")

    def row(label, e, note):
        seconds = f"{e['seconds']:.1f}" if e.get("seconds") is not None else "-"
        cells = [str(e.get(k, "-")) for k in ("passed", "failed", "skipped")]
        tests = str(len(e["tests"])) if "tests" in e else "-"
        print(f"{label:<27} {e['status']:<8} {tests:>5} {cells[0]:>6} {cells[1]:>6} "
              f"{cells[2]:>7} {seconds:>8}  {note}".rstrip())

    for b in binaries:
        # A binary run suite by suite: its suites' rows, below it, say why.
        note = b.get("note", "") if b.get("suites") else b.get("why") or b.get("note") or ""
        if b.get("emulated"):
            note = f"emulated; {note}" if note else "emulated"
        row(b["name"], b, note)
        for s in b.get("suites", []):
            row(f"  {s['suite']}", s, " ".join(filter(None, (s.get("why"), s.get("note")))))
    for b in binaries:
        for f in b.get("figures", []):
            mark = " [emulated]" if f.get("emulated") else ""
            print(f"  {b['name']}: {f['name']}: {f['value']:g} {f['unit']}{mark}")
    print(f"summary: {final / 'summary.json'}; logs: {final / 'gpu-check.tar.gz'}; "
          f"{summary['status']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
