"""Tests of scripts/reprice_validation.py (standard library only), with a stub exp.

    python3 -m unittest discover -s scripts -p 'test_*.py'
"""

import csv
import io
import os
import stat
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reprice_validation as reprice  # noqa: E402

VALIDATION = """experiment,condition,metric,real,sim,error_pct
cb_sweep,max_num_seqs=1 concurrency=1,itl_median_ms,1.000,1.2,20.0
cb_sweep,max_num_seqs=1 concurrency=4,itl_median_ms,2.000,2.4,20.0
cb_sweep,max_num_seqs=1 concurrency=4,cached_tokens,0,0,
poisson_mix,rate_rps=10,throughput_tok_s,100.0,90.0,-10.0
steps,cb_sweep,step_abs_error_pct_median,,,3.0
"""

# A stub `exp run NAME --mode sim ... --out DIR`: writes DIR/NAME/sim/summary.csv
# and records its arguments; exits 3 for an experiment named `broken`.
STUB = r"""#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
name, out = args[1], args[args.index("--out") + 1]
with open(os.path.join(out, "calls.txt"), "a") as f:
    f.write(" ".join(args) + "\n")
if name == "broken":
    sys.stderr.write("no such experiment\n")
    sys.exit(3)
d = os.path.join(out, name, "sim")
os.makedirs(d, exist_ok=True)
rows = {
    "cb_sweep": "max_num_seqs,concurrency,itl_median_ms\n1,1,1.1\n1,4,1.8\n",
    "poisson_mix": "rate_rps,throughput_tok_s\n10,105.0\n40,300.0\n",
}[name]
open(os.path.join(d, "summary.csv"), "w").write(rows)
if name == "cb_sweep":
    open(os.path.join(d, "bands.csv"), "w").write(
        "condition,metric,value,low,high,error_pct\n"
        "max_num_seqs=1 concurrency=1,itl_median_ms,1.1,1.05,1.15,4.5\n"
        "max_num_seqs=1 concurrency=4,itl_median_ms,1.8,1.7,2.2,22.2\n"
    )
"""


class Reprice(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.exp = os.path.join(self.dir, "exp")
        with open(self.exp, "w") as f:
            f.write(STUB)
        os.chmod(self.exp, os.stat(self.exp).st_mode | stat.S_IEXEC)
        self.validation = os.path.join(self.dir, "validation.csv")
        with open(self.validation, "w") as f:
            f.write(VALIDATION)
        self.runs = os.path.join(self.dir, "runs")
        os.makedirs(self.runs)

    def run_main(self, *args):
        out = io.StringIO()
        with redirect_stdout(out):
            reprice.main([self.validation, "--model", "qwen3-8b", "--exp", self.exp, "--runs", self.runs, *args])
        return out.getvalue()

    def test_each_metric_is_compared_with_its_measured_condition(self):
        rows = list(csv.DictReader(io.StringIO(self.run_main("--short", "--", "--cost-model", "operators"))))
        got = {(r["experiment"], r["condition"], r["metric"]): float(r["error_pct"]) for r in rows}
        # Cached-token and step rows are not metrics; poisson_mix's rate 40 has no measured row.
        self.assertEqual(
            got,
            {
                ("cb_sweep", "max_num_seqs=1 concurrency=1", "itl_median_ms"): 10.0,
                ("cb_sweep", "max_num_seqs=1 concurrency=4", "itl_median_ms"): -10.0,
                ("poisson_mix", "rate_rps=10", "throughput_tok_s"): 5.0,
            },
        )
        bands = {(r["condition"], r["metric"]): (r["sim_low"], r["sim_high"]) for r in rows}
        self.assertEqual(bands[("max_num_seqs=1 concurrency=4", "itl_median_ms")], ("1.7", "2.2"))
        self.assertEqual(bands[("rate_rps=10", "throughput_tok_s")], ("", ""), "a run without bands.csv")
        calls = open(os.path.join(self.runs, "calls.txt")).read().splitlines()
        self.assertEqual(len(calls), 2)
        self.assertIn("run cb_sweep --mode sim --model qwen3-8b", calls[0])
        self.assertIn("--set batches=3 --cost-model operators", calls[0])
        self.assertIn("--set requests=100 --set skip=10", calls[1])

    def test_the_table_gives_median_largest_and_signed_median(self):
        text = self.run_main("--table")
        line = [l for l in text.splitlines() if "itl_median_ms" in l][0].split()
        self.assertEqual(line[:3], ["cb_sweep", "itl_median_ms", "2"])
        # Measured 1.0 lies below the band 1.05-1.15, 2.0 inside 1.7-2.2.
        self.assertEqual([float(x) for x in line[3:]], [10.0, 10.0, 0.0, 1.0])

    def test_a_file_that_is_not_a_validation_table_is_refused(self):
        with open(self.validation, "w") as f:
            f.write("rate_rps,throughput_tok_s\n10,1\n")
        with self.assertRaises(SystemExit) as e:
            self.run_main()
        self.assertIn("validation.csv", str(e.exception))

    def test_a_failing_sim_run_stops_with_its_command_and_message(self):
        with open(self.validation, "a") as f:
            f.write("broken,,ttft_ms,1,1,0\n")
        with self.assertRaises(SystemExit) as e:
            self.run_main()
        self.assertIn("run broken --mode sim", str(e.exception))
        self.assertIn("no such experiment", str(e.exception))


if __name__ == "__main__":
    unittest.main()
