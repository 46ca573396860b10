"""Tests of scripts/openai_load.py and scripts/compare_summaries.py (standard library only).

    python3 -m unittest discover -s scripts -p 'test_*.py'

The statistics, the chunk counting, the summaries and the comparison run
everywhere; the load itself against a stub server on loopback runs only
where aiohttp is installed (it is skipped, and says so, elsewhere).
"""

import http.server
import importlib.util
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_summaries  # noqa: E402
import openai_load as load  # noqa: E402

HAS_AIOHTTP = importlib.util.find_spec("aiohttp") is not None


class Statistics(unittest.TestCase):
    def test_percentiles_interpolate_between_ranks_as_exp_does(self):
        xs = [4.0, 1.0, 3.0, 2.0]
        self.assertEqual(load.median(xs), 2.5)
        self.assertEqual(load.percentile(xs, 0), 1.0)
        self.assertEqual(load.percentile(xs, 100), 4.0)
        self.assertAlmostEqual(load.percentile(xs, 99), 3.97)
        self.assertIsNone(load.median([]))
        self.assertEqual(load.median([float("nan"), 5.0]), 5.0)
        self.assertEqual(load.spread_pct([90.0, 100.0, 110.0]), 20.0)

    def test_poisson_gaps_have_the_asked_mean(self):
        t = load.poisson_arrivals(20000, 50.0, random.Random(1))
        self.assertTrue(all(b > a for a, b in zip(t, t[1:])))
        self.assertAlmostEqual(t[-1] / len(t), 1 / 50.0, delta=0.001)


def chunk(text=None, finish=None, ids=None, usage=None):
    choice = {"index": 0, "text": text, "finish_reason": finish}
    if ids is not None:
        choice["token_ids"] = ids
    body = {"choices": [choice] if text is not None else []}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body)


class Chunks(unittest.TestCase):
    def test_a_token_per_text_chunk_then_the_final_usage_corrects_the_count(self):
        t = load.Tally()
        t.on_data(chunk("a"), 1.0)
        t.on_data(chunk("bc"), 2.0)  # two tokens merged into one chunk
        t.on_data(chunk("", finish="length"), 2.5)
        t.on_data(json.dumps({"choices": [], "usage": {
            "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 16}}}), 2.6)
        t.on_data("[DONE]", 2.7)
        times, finish, reason, cached = t.close()
        self.assertEqual(times, [1.0, 2.0, 2.0])
        self.assertEqual((finish, reason, cached), (2.5, "length", 16))

    def test_token_ids_and_usage_count_tokens(self):
        t = load.Tally()
        t.on_data(chunk("ab", ids=[1, 2]), 1.0)
        t.on_data(chunk("c", usage={"completion_tokens": 4}), 2.0)
        t.on_data("[DONE]", 3.0)
        times, finish, _, cached = t.close()
        self.assertEqual(times, [1.0, 1.0, 2.0, 2.0])
        self.assertEqual((finish, cached), (3.0, None))

    def test_a_stream_without_done_or_with_an_error_fails(self):
        t = load.Tally()
        t.on_data(chunk("a"), 1.0)
        with self.assertRaisesRegex(RuntimeError, "before data: \\[DONE\\] after 1 tokens"):
            t.close()
        with self.assertRaisesRegex(RuntimeError, "boom"):
            load.Tally().on_data(json.dumps({"error": {"message": "boom"}}), 0.0)

    def test_events_survive_any_split_of_the_bytes(self):
        text = b'data: {"a":1}\n\n: ping\n\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n'
        whole = ['{"a":1}', "x\ny", "[DONE]"]
        for cut in range(len(text) + 1):
            events = load.SseEvents()
            got = events.push(text[:cut]) + events.push(text[cut:]) + events.finish()
            self.assertEqual(got, whole, "cut at %d" % cut)
        events = load.SseEvents()
        self.assertEqual(events.push(b"data: tail"), [])
        self.assertEqual(events.finish(), ["tail"])

    def test_a_chunk_of_several_tokens_is_one_gap_as_vllm_counts_it(self):
        # Deliveries at 1.0, 1.5 (three tokens in one chunk) and 2.25 s.
        r = load.Record(0, "x", 0.5, [1.0, 1.5, 1.5, 1.5, 2.25], 2.25, 0, 5)
        self.assertEqual(r.ttft_ms(), 500.0)
        self.assertEqual(r.itls_ms(), [500.0, 750.0])

    def test_sse_framing_joins_data_lines_and_skips_comments(self):
        lines = [b"data: {\"a\":1}\n", b"\n", b": comment\n", b"data: x\r\n", b"data: y\n",
                 b"\n", b"data: [DONE]"]
        self.assertEqual(list(load.sse_data(lines)), ['{"a":1}', "x\ny", "[DONE]"])


def rec(rid, tag, arrival, times):
    return load.Record(rid, tag, arrival, times, times[-1], 0, len(times))


class Summaries(unittest.TestCase):
    def test_closed_rows_are_medians_over_measured_batches(self):
        records = [rec(0, "warmup", 0.0, [0.1]), rec(1, "batch0", 0.2, [0.3, 0.4])]
        # Batch 1: 6 tokens over 1.0 s; batch 2: 6 tokens over 2.0 s.
        records += [rec(2, "batch1", 1.0, [1.5, 1.6, 1.7]), rec(3, "batch1", 1.2, [1.4, 1.6, 2.0])]
        records += [rec(4, "batch2", 3.0, [3.5, 4.0, 5.0]), rec(5, "batch2", 3.0, [3.2, 3.3, 3.4])]
        row = load.summarize_closed(records, batches=3, concurrency=1, max_num_seqs=256)
        self.assertAlmostEqual(row["throughput_tok_s"], (6.0 + 3.0) / 2)
        self.assertAlmostEqual(row["throughput_spread_pct"], 3.0 / 4.5 * 100)
        self.assertEqual(row["measured_batches"], 2)
        self.assertAlmostEqual(row["ttft_median_ms"], (350.0 + 350.0) / 2)
        text = load.csv_text(load.CLOSED_COLUMNS, [row])
        self.assertTrue(text.startswith(",".join(load.CLOSED_COLUMNS) + "\n256,1,4.5,"))
        with self.assertRaisesRegex(RuntimeError, "batch 1 finished 2 of 4"):
            load.summarize_closed(records, batches=3, concurrency=2, max_num_seqs=256)

    def test_poisson_rows_leave_out_skipped_requests(self):
        records = [rec(0, "skip", 0.0, [5.0]), rec(1, "mix", 1.0, [1.1, 1.2]),
                   rec(2, "mix", 1.5, [1.6, 2.0])]
        row = load.summarize_poisson(records, 3.0)
        self.assertAlmostEqual(row["throughput_tok_s"], 4 / 1.0)
        self.assertEqual(row["measured_requests"], 2)
        self.assertAlmostEqual(row["e2e_median_ms"], 350.0)


class Arguments(unittest.TestCase):
    def test_impossible_loads_are_refused(self):
        for argv in (["--batches", "1"], ["--concurrency", "0"], ["--rate", "0"],
                     ["--requests", "5", "--skip", "5"], ["--cache-salt", "a", "--no-cache-salt"],
                     ["--processes", "0"], ["--processes", "3", "--max-num-seqs", "2"],
                     ["--processes", "5", "--concurrency", "4"]):
            with self.assertRaises(SystemExit), open(os.devnull, "w") as null:
                stderr, sys.stderr = sys.stderr, null
                try:
                    load.parse_args(["--url", "http://x"] + argv)
                finally:
                    sys.stderr = stderr


class Processes(unittest.TestCase):
    def test_shares_are_even_and_cover_the_whole(self):
        self.assertEqual(load.split(7, 3), [3, 2, 2])
        self.assertEqual(load.split(256, 4), [64, 64, 64, 64])
        self.assertEqual(sum(load.split(5, 5)), 5)

    def test_the_default_gives_a_process_at_most_16_streams_in_flight(self):
        self.assertEqual(load.default_processes(16, 256), 1)
        self.assertEqual(load.default_processes(64, 256), 4)
        self.assertEqual(load.default_processes(17, 256), 2)
        self.assertEqual(load.default_processes(64, 1), 1)
        args = load.parse_args(["--url", "http://x", "--concurrency", "64"])
        self.assertEqual(args.processes, 4)

    def test_records_merge_numbered_by_arrival(self):
        def rec(rid, arrival):
            return load.Record(rid, "batch1", arrival, [arrival + 0.1], arrival + 0.2, 0, 1)
        merged = load.merge([[rec(0, 0.5), rec(1, 0.1)], [rec(0, 0.3)]])
        self.assertEqual([r.arrival for r in merged], [0.1, 0.3, 0.5])
        self.assertEqual([r.id for r in merged], [0, 1, 2])

    def test_poisson_arrivals_are_dealt_round_robin(self):
        args = load.parse_args(["--url", "http://x", "--pattern", "poisson", "--requests", "6",
                                "--skip", "2", "--processes", "2"])
        shares = load.parts(args, "m", None, 0.0)
        self.assertEqual([len(p["gaps"]) for p in shares], [3, 3])
        self.assertEqual([tag for tag, _ in shares[0]["gaps"]], ["skip", "mix", "mix"])


def write(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    f.write(text)
    f.close()
    return f.name


class Compare(unittest.TestCase):
    def test_matched_conditions_give_signed_percent_errors(self):
        ref = write("max_num_seqs,concurrency,throughput_tok_s,itl_median_ms,note\n"
                    "1,1,100,2.0,x\n256,16,1000,0\n")
        other = write("max_num_seqs,concurrency,throughput_tok_s,itl_median_ms\n"
                      "256,16,900,1.5\n")
        rows = compare_summaries.compare(compare_summaries.read(ref),
                                         compare_summaries.read(other), 2)
        self.assertEqual(rows[0][:2], ("max_num_seqs=256 concurrency=16", "throughput_tok_s"))
        self.assertAlmostEqual(rows[0][4], -10.0)
        self.assertIsNone(rows[1][4], "a zero reference has no relative error")
        text = compare_summaries.to_csv(rows, ["a", "b"])
        self.assertTrue(text.startswith("condition,metric,a,b,error_pct\n"))
        renamed = write("caching,round,throughput_tok_s\non,1,5\n")
        with self.assertRaisesRegex(SystemExit, "key columns differ"):
            compare_summaries.compare(compare_summaries.read(ref),
                                      compare_summaries.read(renamed), 2)
        os.unlink(renamed)
        with self.assertRaisesRegex(SystemExit, "e2e_median_ms"):
            compare_summaries.compare(compare_summaries.read(ref),
                                      compare_summaries.read(other), 2, ["e2e_median_ms"])
        for path in (ref, other):
            os.unlink(path)


class StubServer(http.server.BaseHTTPRequestHandler):
    """Streams max_tokens one-token chunks 2 ms apart and records the bodies."""
    bodies = []
    in_flight = 0
    peak = 0
    lock = threading.Lock()
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "stub"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        cls = type(self)
        with cls.lock:
            cls.bodies.append(body)
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for i in range(body["max_tokens"]):
            time.sleep(0.002)
            last = i == body["max_tokens"] - 1
            self.wfile.write(("data: %s\n\n" % chunk("t", "length" if last else None)).encode())
            self.wfile.flush()
        usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": body["max_tokens"],
                 "prompt_tokens_details": {"cached_tokens": 0}}
        self.wfile.write(("data: %s\n\ndata: [DONE]\n\n" % json.dumps(
            {"choices": [], "usage": usage})).encode())
        with cls.lock:
            cls.in_flight -= 1
        self.close_connection = True


@unittest.skipUnless(HAS_AIOHTTP, "aiohttp is not installed: the load itself is not run")
class LoadOverHttp(unittest.TestCase):
    def test_a_closed_loop_sends_cb_sweep_s_requests_under_the_cap(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubServer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d" % server.server_address[1]
        try:
            args = load.parse_args(["--url", url, "--concurrency", "3", "--batches", "3",
                                    "--max-num-seqs", "2", "--prompt-tokens", "7",
                                    "--output-tokens", "5", "--vocab", "50"])
            columns, row, records = load.run_load(args)
        finally:
            server.shutdown()
            server.server_close()
        bodies = StubServer.bodies
        self.assertEqual(len(bodies), 1 + 3 * 2 * 3)
        self.assertEqual(len(records), len(bodies))
        first, rest = bodies[0], bodies[1:]
        self.assertEqual((len(first["prompt"]), first["max_tokens"]), (32, 4))
        for b in rest:
            self.assertEqual((len(b["prompt"]), b["max_tokens"], b["model"]), (7, 5, "stub"))
            self.assertTrue(all(isinstance(t, int) and 0 <= t < 50 for t in b["prompt"]))
            self.assertTrue(b["ignore_eos"] and b["stream"])
            self.assertEqual(b["stream_options"], {"include_usage": True})
            self.assertEqual(b["cache_salt"], first["cache_salt"])
        self.assertLessEqual(StubServer.peak, 2, "--max-num-seqs caps requests in flight")
        self.assertEqual(columns, load.CLOSED_COLUMNS)
        self.assertEqual((row["max_num_seqs"], row["concurrency"], row["measured_batches"]),
                         (2, 3, 2))
        self.assertTrue(all(len(r.token_times) == r.max_tokens for r in records))
        for r in records:
            # The clock starts at the POST (after the due time), or at the due time of a
            # request that waited for a place; the stub waits 2 ms before a token.
            self.assertGreaterEqual(r.arrival, r.due)
            self.assertGreater(r.ttft_ms(), 1.5)
        self.assertTrue(any(r.arrival == r.due for r in records), "3 clients under a cap of 2")
        self.assertGreater(row["itl_median_ms"], 1.0)
        self.assertFalse(math.isnan(row["throughput_tok_s"]))

    def test_processes_share_the_clients_and_the_cap_and_start_batches_together(self):
        StubServer.bodies, StubServer.peak = [], 0
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubServer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d" % server.server_address[1]
        try:
            args = load.parse_args(["--url", url, "--concurrency", "4", "--batches", "3",
                                    "--max-num-seqs", "3", "--prompt-tokens", "7",
                                    "--output-tokens", "5", "--vocab", "50",
                                    "--processes", "2"])
            columns, row, records = load.run_load(args)
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(len(StubServer.bodies), 1 + 4 * 2 * 3)
        self.assertEqual(len({b["cache_salt"] for b in StubServer.bodies}), 1)
        self.assertLessEqual(StubServer.peak, 3, "the shares of --max-num-seqs add up to it")
        self.assertEqual(sorted(r.id for r in records), list(range(len(records))))
        self.assertEqual(sum(r.tag == "warmup" for r in records), 1)
        for b in range(3):
            batch = [r for r in records if r.tag == "batch%d" % b]
            self.assertEqual(len(batch), 8)
            if b:
                previous = [r for r in records if r.tag == "batch%d" % (b - 1)]
                self.assertGreaterEqual(min(r.arrival for r in batch),
                                        max(r.finish for r in previous) - 1e-9,
                                        "a batch starts once all of the last one finished")
        self.assertEqual((row["concurrency"], row["measured_batches"]), (4, 2))
        self.assertTrue(all(len(r.token_times) == r.max_tokens for r in records))


if __name__ == "__main__":
    unittest.main()
