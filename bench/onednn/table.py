#!/usr/bin/env python3
"""The markdown tables of run.sh's raw lines (round, version, threads, model, case, mode,
variant, count, ms, note): medians over the rounds, ratios against the oldest library (Debian's
2.x), and per-step totals (each shape's median times how often the step runs it)."""
import collections
import statistics
import sys

VARIANTS = ["smelt", "reorder_kept", "weights_once", "hwio", "blocked"]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 10:
                continue
            rnd, version, threads, model, case, mode, variant, count, ms, note = parts
            rows.append(dict(round=int(rnd), version=version, threads=threads, model=model,
                             case=case, mode=mode, variant=variant, count=int(count),
                             ms=float(ms), note=note))
    return rows


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def fmt(ms):
    return f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def main(path):
    rows = load(path)
    versions = sorted({r["version"] for r in rows}, key=version_key)
    base, others = versions[0], versions[1:]
    threads_list = sorted({r["threads"] for r in rows})
    # (version, threads, model, case, mode, variant) -> {round: ms}
    times = collections.defaultdict(dict)
    counts, notes, cases = {}, {}, []
    for r in rows:
        key = (r["model"], r["case"], r["mode"])
        if key not in counts:
            cases.append(key)
        counts[key] = r["count"]
        times[(r["version"], r["threads"]) + key + (r["variant"],)][r["round"]] = r["ms"]
        if r["variant"] == "smelt" and r["note"]:
            notes[(r["version"],) + key] = r["note"]

    def median(version, threads, key, variant):
        got = times.get((version, threads) + key + (variant,))
        return statistics.median(got.values()) if got else None

    def step_totals(version, threads, model, variant, weighted=True):
        """Per round: the step's total over its convolutions (each shape once, unweighted)."""
        by_round = collections.defaultdict(float)
        for key in cases:
            if key[0] != model:
                continue
            for rnd, ms in times.get((version, threads) + key + (variant,), {}).items():
                by_round[rnd] += (counts[key] if weighted else 1) * ms
        return by_round

    rounds = len({r["round"] for r in rows})
    print(f"Medians of {rounds} rounds; ratio = library / {base}.\n")
    print("#### Smelt's calls (NHWC, weights `any`, HWIO filter reordered on each call), "
          "per convolution\n")
    head = ["model", "case", "pass", "x/step", "threads", f"{base} ms"]
    for v in others:
        head += [f"{v} ms", f"{v}/{base}"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in cases:
        for threads in threads_list:
            b = median(base, threads, key, "smelt")
            if b is None:
                continue
            cells = [key[0], key[1], key[2], str(counts[key]), threads, fmt(b)]
            for v in others:
                m = median(v, threads, key, "smelt")
                cells += [fmt(m), f"{m / b:.2f}"] if m is not None else ["-", "-"]
            print("| " + " | ".join(cells) + " |")

    print("\n#### Per training step: the step's convolutions summed (shape's median x how often "
          "the step runs it)\n")
    head = ["model", "threads", f"{base} ms"]
    for v in others:
        head += [f"{v} ms", f"{v}/{base} (per-round range)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model in dict.fromkeys(k[0] for k in cases):
        for threads in threads_list:
            b = step_totals(base, threads, model, "smelt")
            cells = [model, threads, fmt(statistics.median(b.values()))]
            for v in others:
                o = step_totals(v, threads, model, "smelt")
                ratios = [o[r] / b[r] for r in o if r in b]
                cells += [fmt(statistics.median(o.values())),
                          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"]
            print("| " + " | ".join(cells) + " |")

    print("\n#### What Smelt's choices cost, per training step (ms, the same sums)\n")
    print("smelt: Smelt's call; reorder_kept: the weights' reorder primitive made once instead "
          "of on each call; weights_once: no weights reorder (weights kept in oneDNN's layout); "
          "hwio: oneDNN given the HWIO filter as is; blocked: every tensor in oneDNN's chosen "
          "layout, activations' reorders not counted.\n")
    head = ["model", "threads", "library"] + VARIANTS
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model in dict.fromkeys(k[0] for k in cases):
        for threads in threads_list:
            for v in versions:
                cells = [model, threads, v]
                for variant in VARIANTS:
                    t = step_totals(v, threads, model, variant)
                    cells.append(fmt(statistics.median(t.values())) if t else "-")
                print("| " + " | ".join(cells) + " |")

    print("\n#### Making the primitives (ms, summed over the shapes, each once; 1 thread)\n")
    head = ["model", "library", "afresh", "from oneDNN's primitive cache"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model in dict.fromkeys(k[0] for k in cases):
        for v in versions:
            cells = [model, v]
            for variant in ["create_cold", "create_cached"]:
                t = step_totals(v, threads_list[0], model, variant, weighted=False)
                cells.append(fmt(statistics.median(t.values())) if t else "-")
            print("| " + " | ".join(cells) + " |")

    print("\n#### The implementations oneDNN picked for Smelt's call\n")
    head = ["model", "case", "pass"] + versions
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in cases:
        cells = list(key) + [notes.get((v,) + key, "-") for v in versions]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
