#!/usr/bin/env python3
"""Re-prices the sim side of an `exp validate` run with the exp at hand (standard library only).

    python3 scripts/reprice_validation.py VALIDATION --model M [--short] [--exp PATH]
        [--runs DIR] [--out reprice.csv] [--table] [-- EXP_ARGS...]

VALIDATION is the validation.csv an `exp validate --out DIR` wrote (or DIR):
its `real` column is the reference. Each experiment in it is run again in sim
mode, `exp run NAME --mode sim --model M --out RUNS --quiet`, with exp
validate's --short settings when --short is given and EXP_ARGS after `--`
(for example `--cost-model operators --gpu h100-sxm`), and each metric of
each condition is compared with the measured one: error_pct = (sim - real)
/ real x 100, the rule of validation.csv. So a cost model can be checked
against real runs already committed, without a GPU. What differs from exp
validate's own sim side: the sim sizes its KV cache from the GPU's memory
(exp validate gives it the real runner's), and the per-step rows are not
re-priced. Writes experiment, condition, metric, real, sim, error_pct,
sim_low, sim_high (CSV on stdout or --out; the last two from the run's
bands.csv, the sim figure with its cost model's held-out step error carried
through, empty where the run wrote none); --table prints, per experiment
and metric, the median and largest |error|, the signed median, and how many
measured figures lie outside the sim's band instead.
"""

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys

# exp validate's --short settings (experiments/src/validate.rs, SHORT).
SHORT = {
    "cb_sweep": ["batches=3"],
    "chunk_sweep": ["long_prompts=3", "batches=3"],
    "prefix_cache": ["rounds=3"],
    "salt_isolation": ["rounds=3"],
    "timing_leak": ["trials=60"],
    "poisson_mix": ["requests=100", "skip=10"],
}
# Rows of validation.csv that are not an experiment's metric.
NOT_METRICS = {"steps"}


def read_validation(path):
    if os.path.isdir(path):
        path = os.path.join(path, "validation.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"experiment", "condition", "metric", "real"}
    if not rows or not need <= set(rows[0]):
        raise SystemExit("%s: expected exp validate's validation.csv (columns %s)" % (path, ", ".join(sorted(need))))
    return [r for r in rows if r["experiment"] not in NOT_METRICS and "cached" not in r["metric"]]


def condition_of(text):
    """`max_num_seqs=1 concurrency=4` as a dict; a condition without `=` (the empty one) is {}."""
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def sim_command(exp, name, model, short, runs, extra):
    cmd = [exp, "run", name, "--mode", "sim", "--model", model, "--out", runs, "--quiet"]
    for kv in SHORT.get(name, []) if short else []:
        cmd += ["--set", kv]
    return cmd + extra


def compare(rows, summaries, bands=None):
    """(experiment, condition, metric, real, sim, error_pct, sim_low, sim_high) for each row whose
    condition one sim summary row matches; the band from `bands` {(experiment, condition, metric): (low, high)}."""
    bands = bands or {}
    out = []
    for r in rows:
        sim = summaries.get(r["experiment"], [])
        cond = condition_of(r["condition"])
        match = [s for s in sim if all(s.get(k) == v for k, v in cond.items())]
        if len(match) != 1 or r["metric"] not in match[0]:
            continue
        real, value = float(r["real"]), float(match[0][r["metric"]])
        error = "" if real == 0 else "%.3f" % ((value - real) / real * 100)
        low, high = bands.get((r["experiment"], r["condition"], r["metric"]), ("", ""))
        out.append((r["experiment"], r["condition"], r["metric"], r["real"], match[0][r["metric"]], error, low, high))
    return out


def read_bands(runs, name):
    """{(name, condition, metric): (low, high)} from RUNS/NAME/sim/bands.csv; {} when the run wrote none."""
    path = os.path.join(runs, name, "sim", "bands.csv")
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {(name, b["condition"], b["metric"]): (b["low"], b["high"]) for b in csv.DictReader(f)}


def table(compared):
    by = {}
    for e, _, m, real, _, err, low, high in compared:
        if err != "":
            outside = low != "" and not float(low) <= float(real) <= float(high)
            by.setdefault((e, m), []).append((float(err), outside))
    lines = ["%-15s %-22s %3s %8s %8s %8s %12s" % ("experiment", "metric", "n", "med|e|%", "max|e|%", "med e%", "out of band")]
    for (e, m), v in by.items():
        a = sorted(abs(x) for x, _ in v)
        signed = statistics.median(x for x, _ in v)
        lines.append("%-15s %-22s %3d %8.1f %8.1f %+8.1f %12d" % (e, m, len(v), statistics.median(a), a[-1], signed, sum(o for _, o in v)))
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("validation")
    p.add_argument("--model", required=True)
    p.add_argument("--short", action="store_true")
    p.add_argument("--exp", default="exp")
    p.add_argument("--runs", default="/tmp/servetwin-reprice")
    p.add_argument("--out")
    p.add_argument("--table", action="store_true")
    a = p.parse_args(argv)
    rows = read_validation(a.validation)
    summaries, bands = {}, {}
    for name in sorted({r["experiment"] for r in rows}):
        cmd = sim_command(a.exp, name, a.model, a.short, a.runs, extra)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("%s failed (%d):\n%s" % (" ".join(cmd), done.returncode, done.stderr))
        with open(os.path.join(a.runs, name, "sim", "summary.csv"), newline="") as f:
            summaries[name] = list(csv.DictReader(f))
        bands.update(read_bands(a.runs, name))
    compared = compare(rows, summaries, bands)
    if a.table:
        text = table(compared)
    else:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["experiment", "condition", "metric", "real", "sim", "error_pct", "sim_low", "sim_high"])
        w.writerows(compared)
        text = buf.getvalue()
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
