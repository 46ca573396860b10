#!/usr/bin/env python3
"""Per-condition, per-metric % error between two summary CSVs (standard library only).

    python3 scripts/compare_summaries.py REFERENCE.csv OTHER.csv [--keys 2]
        [--labels inprocess,endpoint] [--metrics throughput_tok_s,itl_median_ms]
        [--out compare.csv] [--table]

The first --keys columns of each file name a row's condition (cb_sweep and
prefix_cache have 2: max_num_seqs, concurrency; caching, round); every other
column both files have and whose values are numbers is a metric. Rows are
matched by condition, so OTHER may hold only some of REFERENCE's conditions
(one reproduced by scripts/openai_load.py). error_pct = (other - reference)
/ reference x 100, empty when the reference is 0 or a value is missing:
the rule of `exp run --mode both`'s compare.csv, whose columns this writes
with the two labels in place of `real` and `sim`. --table prints an aligned
table instead of CSV on stdout.
"""

import argparse
import csv
import io
import sys


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise SystemExit("%s is empty; expected a summary CSV with a header" % path)
    return rows[0], rows[1:]


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def condition(header, row, keys):
    return " ".join("%s=%s" % (c, v) for c, v in zip(header[:keys], row[:keys]))


def compare(ref, other, keys, metrics=None):
    """Rows (condition, metric, reference, other, error_pct) in REFERENCE's order."""
    (rh, rrows), (oh, orows) = ref, other
    if rh[:keys] != oh[:keys]:
        raise SystemExit("the key columns differ: %s against %s; check --keys"
                         % (rh[:keys], oh[:keys]))
    by_condition = {condition(oh, r, keys): r for r in orows}
    names = [c for c in rh[keys:] if c in oh and (metrics is None or c in metrics)]
    if metrics:
        missing = [m for m in metrics if m not in names]
        if missing:
            raise SystemExit("metric(s) %s are not columns of both files" % ", ".join(missing))
    out = []
    for row in rrows:
        cond = condition(rh, row, keys)
        match = by_condition.get(cond)
        if match is None:
            continue
        for name in names:
            a = number(row[rh.index(name)])
            b = number(match[oh.index(name)])
            if a is None and b is None:
                continue
            err = (b - a) / a * 100.0 if a not in (None, 0.0) and b is not None else None
            out.append((cond, name, a, b, err))
    return out


def fmt(x, digits=4):
    return "" if x is None else "%.*g" % (digits, x)


def to_csv(rows, labels):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["condition", "metric", labels[0], labels[1], "error_pct"])
    for cond, name, a, b, err in rows:
        w.writerow([cond, name, fmt(a, 6), fmt(b, 6), "" if err is None else "%.2f" % err])
    return buf.getvalue()


def to_table(rows, labels):
    header = ("condition", "metric", labels[0], labels[1], "error %")
    cells = [header] + [(c, m, fmt(a), fmt(b), "" if e is None else "%+.1f" % e)
                        for c, m, a, b, e in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) if i < 2 else v.rjust(w)
                       for i, (v, w) in enumerate(zip(r, widths))) for r in cells]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reference")
    p.add_argument("other")
    p.add_argument("--keys", type=int, default=2, help="leading key columns (default 2)")
    p.add_argument("--labels", default="reference,other", help="two names for the columns")
    p.add_argument("--metrics", help="comma-separated metrics to keep (default: all shared)")
    p.add_argument("--out", help="write the CSV here")
    p.add_argument("--table", action="store_true", help="print an aligned table, not CSV")
    args = p.parse_args(argv)
    labels = args.labels.split(",")
    if len(labels) != 2 or args.keys < 1:
        p.error("--labels takes two names and --keys at least 1")
    metrics = args.metrics.split(",") if args.metrics else None
    rows = compare(read(args.reference), read(args.other), args.keys, metrics)
    if not rows:
        raise SystemExit("no condition of %s is in %s" % (args.other, args.reference))
    text = to_csv(rows, labels)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.stdout.write(to_table(rows, labels) if args.table else text)


if __name__ == "__main__":
    main()
