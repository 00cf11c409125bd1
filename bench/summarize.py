"""Turns the raw runs of bench/run_benchmarks.sh into OUTDIR/results.json and
OUTDIR/results.md: per benchmark, the median of the native trials, the median
of the gshare trials, their ratio, and whether gshare meets its target.

usage: summarize.py OUTDIR   (reads OUTDIR/raw/NAME.MODE.TRIAL.jsonl)
"""

import datetime
import json
import pathlib
import sys

from benchlib import stats

MiB = 1 << 20


def result_key(record):
    """Which row of the table a JSON line of a benchmark belongs to."""
    if record["benchmark"] == "alloc_free":
        return f"alloc_free_{record['bytes'] // MiB}MiB"
    if record["benchmark"] == "train_steps":
        return f"train_steps_{record['model']}"
    return record["benchmark"]


# key: (label, field, unit, target kind, target value)
#   "ratio_at_least": gshare / native must be >= value (higher is better)
#   "added_at_most":  gshare - native must be <= value (lower is better)
ROWS = {
    "launch_rate": ("launch rate, back to back", "per_second", "launches/s",
                    "ratio_at_least", 0.98),
    "launch_cost": ("launch rate, host side (bursts of 1000)", "per_second", "launches/s",
                    "ratio_at_least", 0.98),
    # Two calls a pair: a microsecond each at most.
    "alloc_free_1MiB": ("alloc+free, 1 MiB", "ns_per_pair", "ns/pair", "added_at_most", 2000),
    "alloc_free_64MiB": ("alloc+free, 64 MiB", "ns_per_pair", "ns/pair", "added_at_most", 2000),
    "train_steps_launch_bound": ("training, launch-bound MLP (64 x 64-wide)", "steps_per_second",
                                 "steps/s", "ratio_at_least", 0.99),
    "train_steps_compute_bound": ("training, compute-bound MLP (4 x 4096-wide, bf16)",
                                  "steps_per_second", "steps/s", "ratio_at_least", 0.99),
    "train_steps_transformer": ("training, transformer (4 x d 1024, AdamW, loss read every step)",
                                "steps_per_second", "steps/s", "ratio_at_least", 0.99),
}


def read_runs(raw):
    """{key: {"native": {trial: value}, "gshare": {trial: value}}}."""
    values = {}
    def name_mode_trial(path):
        name, mode, trial, _ = path.name.split(".")
        return name, mode, int(trial)

    for path in sorted(raw.glob("*.jsonl"), key=name_mode_trial):
        _, mode, trial = name_mode_trial(path)
        for line in path.read_text().splitlines():
            if not line.strip().startswith("{"):
                continue
            record = json.loads(line)
            key = result_key(record)
            if key in ROWS and mode in ("native", "gshare"):
                runs = values.setdefault(key, {"native": {}, "gshare": {}})
                runs[mode][trial] = record[ROWS[key][1]]
    return values


def summarize_row(key, runs):
    """Medians per mode, and the verdict from *paired* trials: trial t ran
    native and gshare back to back, so gshare_t / native_t (or their
    difference) cancels the slow drift of a shared machine, which moves
    both modes together and is larger than the effect being measured."""
    label, field, unit, kind, target = ROWS[key]
    native_runs, gshare_runs = runs.get("native", {}), runs.get("gshare", {})
    row = {"name": key, "label": label, "field": field, "unit": unit,
           "native": {"median": None, "values": [native_runs[t] for t in sorted(native_runs)]},
           "gshare": {"median": None, "values": [gshare_runs[t] for t in sorted(gshare_runs)]},
           "ratio": None, "met": False}
    if kind == "ratio_at_least":
        row["target"] = f">= {target} x native"
    else:
        row["target"] = f"<= {target} ns added"
    for mode in ("native", "gshare"):
        if row[mode]["values"]:
            row[mode]["median"] = stats.median(row[mode]["values"])
    paired = sorted(set(native_runs) & set(gshare_runs))
    if not paired:
        row["note"] = "no paired trials"
        return row
    row["paired_trials"] = len(paired)
    row["ratio"] = stats.median(gshare_runs[t] / native_runs[t] for t in paired)
    if kind == "ratio_at_least":
        row["met"] = row["ratio"] >= target
    else:
        row["added"] = stats.median(gshare_runs[t] - native_runs[t] for t in paired)
        row["met"] = row["added"] <= target
    return row


# In-process A/B records: the hooked call against the driver's own function,
# alternating within one process (launch_rate.cpp, alloc_free.cpp).
#   key: (label, field, unit, target kind, target value)
AB_ROWS = {
    "launch_ab": ("launch, host side: hooked / direct rate", "ratio", "",
                  "ratio_at_least", 0.98),
    "request_ab": ("request (32 launches, copy, sync): hooked - direct", "added_ns", "ns",
                   "added_at_most", 10000),
    # The goal is per call: an allocation, and a free, a microsecond at most
    # each. The pair is reported beside them.
    "alloc_ab_1MiB": ("allocation 1 MiB: hooked - direct", "added_alloc_ns", "ns", "added_at_most", 1000),
    "free_ab_1MiB": ("free 1 MiB: hooked - direct", "added_free_ns", "ns", "added_at_most", 1000),
    "alloc_ab_64MiB": ("allocation 64 MiB: hooked - direct", "added_alloc_ns", "ns", "added_at_most", 1000),
    "free_ab_64MiB": ("free 64 MiB: hooked - direct", "added_free_ns", "ns", "added_at_most", 1000),
    "alloc_free_ab_1MiB": ("alloc+free 1 MiB: hooked - direct", "added_ns", "ns", "reported", None),
    "alloc_free_ab_64MiB": ("alloc+free 64 MiB: hooked - direct", "added_ns", "ns", "reported", None),
    # Under GSHARE_PAGING=on a movable allocation is made through the
    # driver's virtual memory calls (reserve, create, map, set access): its
    # cost is reported, with no target (paging is off by default for it).
    "alloc_free_ab_1MiB_paging": ("alloc+free 1 MiB, GSHARE_PAGING=on: hooked - direct", "added_ns", "ns",
                                  "reported", None),
    "alloc_free_ab_64MiB_paging": ("alloc+free 64 MiB, GSHARE_PAGING=on: hooked - direct", "added_ns",
                                   "ns", "reported", None),
}


def read_ab(raw):
    """{key: {"native": [values], "gshare": [values]}} of the A/B records.
    The runs under GSHARE_PAGING=on (mode "paging") fill the gshare side of
    the _paging rows, whose native side is the same size's noise floor."""
    values = {}
    for path in sorted(raw.glob("*.jsonl")):
        mode = path.name.split(".")[1]
        for line in path.read_text().splitlines():
            if not line.strip().startswith("{"):
                continue
            record = json.loads(line)
            keys = [record["benchmark"]]
            if keys[0] == "alloc_free_ab":
                size = f"{record['bytes'] // MiB}MiB"
                keys = [f"alloc_free_ab_{size}"]
                if mode == "paging":
                    keys[0] += "_paging"
                else:
                    keys += [f"alloc_ab_{size}", f"free_ab_{size}"]
            side = "gshare" if mode == "paging" else mode
            for key in keys:
                if key in AB_ROWS and side in ("native", "gshare") and AB_ROWS[key][1] in record:
                    values.setdefault(key, {"native": [], "gshare": []})[side].append(
                        record[AB_ROWS[key][1]])
    for key in [k for k in values if k.endswith("_paging")]:
        values[key]["native"] = list(values.get(key[:-len("_paging")], {}).get("native", []))
    return values


def summarize_ab(key, runs):
    """Under gshare, the median A/B result is the hook's cost; natively both
    sides are the same function, so that median is the noise floor."""
    label, field, unit, kind, target = AB_ROWS[key]
    row = {"name": key, "label": label, "unit": unit,
           "target": {"ratio_at_least": f">= {target}", "added_at_most": f"<= {target} ns"}.get(kind, "—"),
           "gshare_values": runs.get("gshare", []), "native_values": runs.get("native", [])}
    row["gshare"] = stats.median(row["gshare_values"]) if row["gshare_values"] else None
    row["native"] = stats.median(row["native_values"]) if row["native_values"] else None
    if kind == "reported":
        row["met"] = None
    elif row["gshare"] is None:
        row["met"] = False
    elif kind == "ratio_at_least":
        row["met"] = row["gshare"] >= target
    else:
        row["met"] = row["gshare"] <= target
    return row


def read_optional(outdir, name):
    path = outdir / name
    return path.read_text().strip() if path.exists() else None


def markdown(summary):
    lines = [
        "# gshare benchmarks",
        "",
        f"- device: {summary['device']}",
        f"- PyTorch: {summary['torch'] or 'unknown'}",
        f"- commit: {summary['commit'] or 'unknown'}",
        f"- date: {summary['date']}",
        f"- trials: {summary['trials']} per mode, native and gshare back to back in each trial, order alternating",
        "",
        "| benchmark | native median | gshare median | paired ratio | target | met? |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary["benchmarks"]:
        def cell(value):
            return "—" if value is None else f"{value:,.1f} {row['unit']}"
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.4f}"
        if "added" in row:
            ratio += f" ({row['added']:+,.0f} ns)"
        met = "yes" if row["met"] else ("no data" if row["ratio"] is None else "**no**")
        lines.append(f"| {row['label']} | {cell(row['native']['median'])} | "
                     f"{cell(row['gshare']['median'])} | {ratio} | {row['target']} | {met} |")
    lines += ["", "Paired ratio: the median over trials of gshare / native within the same "
              "trial (for alloc+free, the median of their differences). Raw runs: raw/*.jsonl; "
              "see bench/README.md for what each benchmark measures.", ""]
    if summary.get("in_process"):
        lines += ["## In one process: hooked against direct", "",
                  "Each run alternates bursts through the linked driver function (gshare's "
                  "wrapper under the preload) with bursts through libcuda's own, every few "
                  "milliseconds; medians over runs. Natively both sides are the same function, "
                  "which shows the noise floor.", "",
                  "| measure | under gshare | natively (noise floor) | target | met? |",
                  "| --- | --- | --- | --- | --- |"]
        for row in summary["in_process"]:
            def fmt(v):
                return "—" if v is None else (f"{v:.4f}" if row["unit"] == "" else f"{v:+,.0f} ns")
            met = "—" if row["met"] is None else ("yes" if row["met"] else "**no**")
            lines.append(f"| {row['label']} | {fmt(row['gshare'])} | {fmt(row['native'])} | "
                         f"{row['target']} | {met} |")
        lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py OUTDIR")
    outdir = pathlib.Path(sys.argv[1])
    runs = read_runs(outdir / "raw")
    rows = [summarize_row(key, runs.get(key, {})) for key in ROWS]
    ab = read_ab(outdir / "raw")
    in_process = [summarize_ab(key, ab[key]) for key in AB_ROWS if key in ab]
    trials = max((len(r["native"]["values"]) for r in rows), default=0)
    summary = {
        "device": read_optional(outdir, "device.txt") or "unknown",
        "torch": read_optional(outdir, "torch_version.txt"),
        "commit": read_optional(outdir, "commit.txt"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "trials": trials,
        "benchmarks": rows,
        "in_process": in_process,
        "all_met": all(row["met"] for row in rows),
    }
    (outdir / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = markdown(summary)
    (outdir / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
