#!/usr/bin/env python3
"""An independent load client for OpenAI-compatible servers (vLLM, `exp serve`).

Sends token-id prompts to POST /v1/completions, streamed (`stream: true`,
`stream_options: {include_usage: true}`, `ignore_eos: true`, optional
`cache_salt`), times every request on this client from the arrival of its
SSE chunks, and prints (and with --out writes) a one-row CSV whose metric
columns carry the names of `exp`'s summary.csv. It shares no code with
`exp`: a second opinion on what `exp run NAME --endpoint URL` measures.
Python 3 standard library plus aiohttp, nothing else.

Load patterns

  closed (cb_sweep's load, experiments/src/catalogue/load.rs): one warm-up
    request (32 prompt tokens, 4 outputs) at t=0; then --batches batches one
    after another, each of --concurrency clients sending 2 requests one after
    the other (the next due when the previous one's finish chunk arrived);
    a batch starts when every request of the previous one finished. Batch 0
    is a warm-up. --max-num-seqs caps the requests in flight on the client
    (FIFO), as `exp run --endpoint` reproduces the engine's max_num_seqs;
    a request's TTFT counts its wait for a place. Columns: max_num_seqs,
    concurrency, throughput_tok_s, ttft_median_ms, ttft_p99_ms, itl_median_ms,
    itl_p99_ms, throughput_spread_pct, measured_batches. Per measured batch:
    throughput = output tokens / (last finish - first arrival), TTFT median
    and p99, ITL median and p99 over every gap of its requests; the row holds
    the median over measured batches of each, and the throughput spread
    (max - min) / median in percent (cb_sweep's columns, plus ttft_p99_ms).

  poisson: --requests requests with exponential gaps at --rate requests/s
    (after the warm-up request finished); the first --skip are left out.
    Columns: rate_rps, throughput_tok_s, ttft_median_ms, ttft_p99_ms,
    itl_median_ms, itl_p99_ms, e2e_median_ms, cached_tokens,
    measured_requests (poisson_mix's names; throughput = output tokens /
    (last finish - first arrival) of the measured requests).

What is measured (as vLLM's benchmark_serving, and as `exp run --endpoint`;
docs/endpoint.md)

  A request's clock starts right before its POST is issued (its body was
  encoded ahead of time); a request that had to wait for a place under
  --max-num-seqs counts from when it was due instead, since that wait
  stands for the engine's queue. Each SSE event is stamped when the client
  reads it. TTFT ends at the first chunk that carries a token; the
  inter-token gaps are the times between later chunks that carry tokens,
  one gap per chunk: a chunk of k tokens stamps all k at its time and
  makes one gap (vLLM appends one ITL per chunk). Chunks without tokens
  (a closing chunk with only finish_reason, the usage chunk) are no
  tokens. A chunk's tokens are the length of its `token_ids` if the
  server sends them, else the rise of `usage.completion_tokens` if the
  chunk has usage, else one for a chunk with text; the final usage chunk's
  completion_tokens then corrects the count (missing tokens at the last
  chunk with text, surplus dropped). A request finishes at the chunk with
  finish_reason; a closed loop's next request is due then. Percentiles
  interpolate linearly between closest ranks (NumPy's default, the method
  `exp` uses). --requests-out writes each request's due_ms (when the
  release rule made it due) beside arrival_ms (where its clock started).

Reproducing one condition of `exp run cb_sweep --endpoint URL`

  cb_sweep's defaults are prompt_tokens=256, output_tokens=128, batches=4,
  max_num_seqs in {1, 256} x concurrency in {1, 4, 16, 64}. Condition
  "max_num_seqs=M concurrency=C" is

    python3 scripts/openai_load.py --url URL --pattern closed \\
        --concurrency C --max-num-seqs M --batches 4 \\
        --prompt-tokens 256 --output-tokens 128 --vocab V

  with V the prompt vocabulary (151643 for Qwen3, the regular tokens; 512
  for the tiny test model): the same request count (1 + 4 x 2C), prompt and
  output lengths, release rule and in-flight cap. The token values differ
  (another random generator), which changes no timing: random prompts share
  no cached prefix either way. The row's key columns (max_num_seqs,
  concurrency) match the condition's row of cb_sweep's summary.csv, so
  scripts/compare_summaries.py compares the two.
"""

import argparse
import asyncio
import csv
import io
import json
import math
import multiprocessing
import os
import queue
import random
import sys
import time

JSON_HEADERS = {"Content-Type": "application/json"}
WARMUP_PROMPT = 32
WARMUP_OUTPUTS = 4
REQUESTS_PER_CLIENT = 2
# Streams one process's event loop drives at most by default: at ~600 tokens/s
# a stream, 64 streams in one loop give ~40k SSE chunks/s, which one Python
# process cannot parse without delaying them (ITL and TTFT read high).
STREAMS_PER_PROCESS = 16

CLOSED_COLUMNS = [
    "max_num_seqs", "concurrency", "throughput_tok_s", "ttft_median_ms", "ttft_p99_ms",
    "itl_median_ms", "itl_p99_ms", "throughput_spread_pct", "measured_batches",
]
POISSON_COLUMNS = [
    "rate_rps", "throughput_tok_s", "ttft_median_ms", "ttft_p99_ms", "itl_median_ms",
    "itl_p99_ms", "e2e_median_ms", "cached_tokens", "measured_requests",
]
REQUEST_COLUMNS = [
    "id", "tag", "due_ms", "arrival_ms", "ttft_ms", "finish_ms", "output_tokens", "cached_tokens",
]


# ---- statistics (the project's methods) ----

def percentile(values, p):
    """The p-th percentile (0..100), linear between closest ranks; None if empty."""
    xs = sorted(v for v in values if not math.isnan(v))
    if not xs:
        return None
    rank = p / 100.0 * (len(xs) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def median(values):
    return percentile(values, 50.0)


def spread_pct(values):
    xs = [v for v in values if not math.isnan(v)]
    m = median(xs)
    if m is None:
        return None
    return 0.0 if m == 0 else (max(xs) - min(xs)) / m * 100.0


# ---- one stream's chunks ----

class Tally:
    """The tokens, finish and usage of one streamed completion, chunk by chunk."""

    def __init__(self):
        self.token_times = []
        self.last_text = None
        self.finish = None
        self.finish_reason = None
        self.done = None
        self.reported = None
        self.cached_tokens = None

    def on_data(self, data, now):
        if data.strip() == "[DONE]":
            self.done = now
            return
        if self.done is not None:
            raise ValueError("data after [DONE]: " + data[:200])
        chunk = json.loads(data)
        if "error" in chunk:
            error = chunk["error"]
            raise RuntimeError("error in stream: %s" % (error.get("message", error)
                                                       if isinstance(error, dict) else error))
        choices = chunk.get("choices") or []
        usage = chunk.get("usage") if isinstance(chunk.get("usage"), dict) else None
        usage_tokens = usage.get("completion_tokens") if usage else None
        if choices:
            choice = choices[0]
            text = choice.get("text")
            if text is None:
                text = (choice.get("delta") or {}).get("content") or ""
            ids = choice.get("token_ids")
            if isinstance(ids, list):
                new = len(ids)
            elif usage_tokens is not None:
                new = max(usage_tokens - len(self.token_times), 0)
            else:
                new = 1 if text else 0
            if new > 0 or text:
                self.last_text = now
            self.token_times.extend([now] * new)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                self.finish = now
        if usage:
            if usage_tokens is not None:
                self.reported = usage_tokens
            details = usage.get("prompt_tokens_details") or {}
            if details.get("cached_tokens") is not None:
                self.cached_tokens = details["cached_tokens"]

    def close(self):
        """(token times, finish time, finish reason, cached tokens) once [DONE] came."""
        if self.done is None:
            raise RuntimeError("the stream ended before data: [DONE] after %d tokens"
                               % len(self.token_times))
        if self.reported is not None:
            at = self.last_text if self.last_text is not None else (
                self.finish if self.finish is not None else self.done)
            missing = self.reported - len(self.token_times)
            self.token_times.extend([at] * max(missing, 0))
            del self.token_times[self.reported:]
        finish = self.finish if self.finish is not None else self.done
        return self.token_times, finish, self.finish_reason or "unknown", self.cached_tokens


class SseEvents:
    """Splits response bytes, arriving in pieces cut anywhere, into each event's `data`."""

    def __init__(self):
        self.pending = b""
        self.lines = []

    def push(self, data):
        """The data of every event that `data` completes."""
        *complete, self.pending = (self.pending + data).split(b"\n")
        events = []
        for line in complete:
            if line.rstrip(b"\r"):
                self.lines.append(line)
            else:
                events.extend(sse_data(self.lines))
                self.lines = []
        return events

    def finish(self):
        """The data of an event the stream ended without a blank line after."""
        lines = self.lines + ([self.pending] if self.pending else [])
        self.lines, self.pending = [], b""
        return list(sse_data(lines))


def sse_data(lines):
    """The `data` of each server-sent event in `lines` (bytes or str, no line ends needed)."""
    data = []
    for raw in lines:
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


# ---- records and summaries ----

class Record:
    """One request: `arrival` is where its TTFT clock starts (right before its POST, or
    its due time if it waited for a place under --max-num-seqs)."""

    def __init__(self, rid, tag, arrival, token_times, finish, cached_tokens, max_tokens,
                 due=None):
        self.id = rid
        self.tag = tag
        self.due = arrival if due is None else due
        self.arrival = arrival
        self.token_times = token_times
        self.finish = finish
        self.cached_tokens = cached_tokens or 0
        self.max_tokens = max_tokens

    def ttft_ms(self):
        return (self.token_times[0] - self.arrival) * 1e3 if self.token_times else None

    def itls_ms(self):
        """One gap per delivery after the first: the tokens of one chunk share its time
        and make one gap (vLLM's benchmark_serving appends one ITL per chunk)."""
        t = self.token_times
        return [(b - a) * 1e3 for a, b in zip(t, t[1:]) if b != a]


def window_stats(records):
    """Throughput, TTFT and ITL percentiles of `records`, as one batch of cb_sweep."""
    first = min(r.arrival for r in records)
    last = max(r.finish for r in records)
    tokens = sum(len(r.token_times) for r in records)
    ttfts = [r.ttft_ms() for r in records if r.token_times]
    itls = [g for r in records for g in r.itls_ms()]
    nan = float("nan")
    span = last - first
    return {
        "throughput_tok_s": tokens / span if span > 0 else nan,
        "ttft_median_ms": _or_nan(median(ttfts)),
        "ttft_p99_ms": _or_nan(percentile(ttfts, 99.0)),
        "itl_median_ms": _or_nan(median(itls)),
        "itl_p99_ms": _or_nan(percentile(itls, 99.0)),
    }


def _or_nan(x):
    return float("nan") if x is None else x


def summarize_closed(records, batches, concurrency, max_num_seqs):
    """cb_sweep's row: medians over batches 1..batches-1 of each batch's metrics."""
    per_batch = []
    for b in range(1, batches):
        reqs = [r for r in records if r.tag == "batch%d" % b]
        expected = REQUESTS_PER_CLIENT * concurrency
        if len(reqs) != expected:
            raise RuntimeError("batch %d finished %d of %d requests" % (b, len(reqs), expected))
        per_batch.append(window_stats(reqs))
    row = {"max_num_seqs": max_num_seqs, "concurrency": concurrency}
    for key in ["throughput_tok_s", "ttft_median_ms", "ttft_p99_ms", "itl_median_ms",
                "itl_p99_ms"]:
        row[key] = _or_nan(median([s[key] for s in per_batch]))
    row["throughput_spread_pct"] = _or_nan(spread_pct([s["throughput_tok_s"] for s in per_batch]))
    row["measured_batches"] = len(per_batch)
    return row


def summarize_poisson(records, rate):
    reqs = [r for r in records if r.tag == "mix"]
    if not reqs:
        raise RuntimeError("no measured request (all skipped?)")
    row = {"rate_rps": rate}
    row.update(window_stats(reqs))
    row["e2e_median_ms"] = _or_nan(median([(r.finish - r.arrival) * 1e3 for r in reqs]))
    row["cached_tokens"] = sum(r.cached_tokens for r in reqs)
    row["measured_requests"] = len(reqs)
    return row


def fmt(value):
    if isinstance(value, float):
        return "" if math.isnan(value) else "%.6g" % value
    return str(value)


def csv_text(columns, rows):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([fmt(row[c]) for c in columns])
    return out.getvalue()


def requests_rows(records):
    rows = []
    for r in sorted(records, key=lambda r: r.id):
        rows.append({"id": r.id, "tag": r.tag, "due_ms": r.due * 1e3,
                     "arrival_ms": r.arrival * 1e3,
                     "ttft_ms": _or_nan(r.ttft_ms()), "finish_ms": r.finish * 1e3,
                     "output_tokens": len(r.token_times), "cached_tokens": r.cached_tokens})
    return rows


def poisson_arrivals(n, rate, rng):
    """Due times (seconds after the warm-up finished) of n Poisson arrivals at `rate`/s."""
    t, out = 0.0, []
    for _ in range(n):
        t += -math.log(1.0 - rng.random()) / rate
        out.append(t)
    return out


# ---- the load on the network ----

class Client:
    """Sends requests and keeps their records; times are seconds since `start`."""

    def __init__(self, session, url, model, salt, max_in_flight, vocab, rng, start):
        self.session = session
        self.url = url.rstrip("/")
        if self.url.endswith("/v1"):
            self.url = self.url[:-3]
        self.model = model
        self.salt = salt
        self.gate = asyncio.Semaphore(max_in_flight)
        self.vocab = vocab
        self.rng = rng
        self.records = []
        self.next_id = 0
        self.start = start

    def now(self):
        return time.perf_counter() - self.start

    def body(self, prompt_tokens, max_tokens):
        """A request's body, encoded ahead of its due time so that sending it is quick."""
        prompt = [self.rng.randrange(self.vocab) for _ in range(prompt_tokens)]
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens,
                "ignore_eos": True, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}}
        if self.salt is not None:
            body["cache_salt"] = self.salt
        return (json.dumps(body).encode(), max_tokens)

    async def request(self, tag, body, due):
        """Sends `body` (from body()) due at `due`, waiting for it and for a place; its record."""
        data, max_tokens = body
        rid = self.next_id
        self.next_id += 1
        delay = due - self.now()
        if delay > 0:
            await asyncio.sleep(delay)
        waited = self.gate.locked()
        async with self.gate:
            tally = Tally()
            events = SseEvents()
            # vLLM's benchmark_serving starts the clock here, right before the POST.
            sent = self.now()
            async with self.session.post(self.url + "/v1/completions", data=data,
                                         headers=JSON_HEADERS) as resp:
                if resp.status != 200:
                    raise RuntimeError("request %d (%s): HTTP %d: %s" % (
                        rid, tag, resp.status, (await resp.text())[:300]))
                async for piece in resp.content.iter_any():
                    # Each event is stamped when it is read, as vLLM's client stamps lines.
                    for event in events.push(piece):
                        tally.on_data(event, self.now())
                for event in events.finish():
                    tally.on_data(event, self.now())
            times, finish, _reason, cached = tally.close()
        # A wait for a place stands for the engine's queue, which an engine's TTFT counts.
        record = Record(rid, tag, due if waited else sent, times, finish, cached, max_tokens,
                        due)
        self.records.append(record)
        return record


async def served_model(url):
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(url.rstrip("/").removesuffix("/v1") + "/v1/models") as resp:
            listed = await resp.json()
    return listed["data"][0]["id"]


def split(n, parts):
    """n split into `parts` shares as even as possible (the first ones larger)."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def default_processes(concurrency, max_num_seqs):
    """One process per STREAMS_PER_PROCESS streams that can be in flight at once."""
    return max(1, math.ceil(min(concurrency, max_num_seqs) / STREAMS_PER_PROCESS))


class LocalSync:
    """The rendezvous of a load played by one process: nothing to wait for."""
    index = 0

    async def latest(self, value):
        return value


class ProcessSync:
    """Rendezvous of the load's processes: each round every process posts a time
    (seconds since the shared start) and all continue with the latest."""

    def __init__(self, index, processes, barrier, slots):
        self.index, self.processes = index, processes
        self.barrier, self.slots = barrier, slots
        self.round = 0

    async def latest(self, value):
        base = self.round * self.processes
        self.slots[base + self.index] = value
        self.round += 1
        await asyncio.get_running_loop().run_in_executor(
            None, self.barrier.wait)
        return max(self.slots[base:base + self.processes])


async def warm_up(client, warm_body, sync):
    """One warm-up request (from the first process, once every process is
    ready); the time all processes start from, after it finished."""
    ready = await sync.latest(client.now())
    warm_finish = 0.0
    if sync.index == 0:
        warm = await client.request("warmup", warm_body, ready)
        warm_finish = warm.finish
    return await sync.latest(warm_finish)


async def closed_loop(client, args, share, sync):
    """This process's `share` of the clients; the batches start together on all."""
    warm_body = client.body(WARMUP_PROMPT, WARMUP_OUTPUTS)
    bodies = [[[client.body(args.prompt_tokens, args.output_tokens)
                for _ in range(REQUESTS_PER_CLIENT)] for _ in range(share)]
              for _ in range(args.batches)]
    due = await warm_up(client, warm_body, sync)

    async def one_client(tag, own, due):
        last = None
        for body in own:
            last = await client.request(tag, body, due)
            due = last.finish
        return last

    for b in range(args.batches):
        lasts = await asyncio.gather(*[one_client("batch%d" % b, own, due) for own in bodies[b]])
        due = await sync.latest(max((r.finish for r in lasts), default=due))


async def poisson(client, args, gaps, sync):
    """This process's arrivals `gaps` (seconds after the warm-up finished)."""
    warm_body = client.body(WARMUP_PROMPT, WARMUP_OUTPUTS)
    bodies = [client.body(args.prompt_tokens, args.output_tokens) for _ in gaps]
    start = await warm_up(client, warm_body, sync)
    await asyncio.gather(*[client.request(tag, body, start + t)
                           for (tag, t), body in zip(gaps, bodies)])


async def run_part(args, part, sync):
    """One process's part of the load; its records."""
    import aiohttp  # only the network part needs it; the rest is testable without

    timeout = aiohttp.ClientTimeout(total=None, sock_read=args.timeout_s)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        client = Client(session, args.url, part["model"], part["salt"], part["cap"], args.vocab,
                        random.Random(args.seed * 1009 + sync.index), part["start"])
        if args.pattern == "closed":
            await closed_loop(client, args, part["clients"], sync)
        else:
            await poisson(client, args, part["gaps"], sync)
    return client.records


def _worker(args, part, index, processes, barrier, slots, results):
    sync = ProcessSync(index, processes, barrier, slots)
    try:
        results.put((index, asyncio.run(run_part(args, part, sync)), None))
    except BaseException as e:  # the parent reports it; the others must not wait on us
        barrier.abort()
        results.put((index, [], "%s: %s" % (type(e).__name__, e)))


def parts(args, model, salt, start):
    """Each process's clients (closed) or arrivals (poisson) and in-flight cap."""
    n = args.processes
    caps = split(args.max_num_seqs, n)
    out = [{"model": model, "salt": salt, "start": start, "cap": cap} for cap in caps]
    if args.pattern == "closed":
        for part, clients in zip(out, split(args.concurrency, n)):
            part["clients"] = clients
    else:
        gaps = poisson_arrivals(args.requests, args.rate, random.Random(args.seed))
        tagged = [("skip" if i < args.skip else "mix", t) for i, t in enumerate(gaps)]
        for i, part in enumerate(out):
            part["gaps"] = tagged[i::n]
    return out


def merge(per_process):
    """Every process's records, numbered by arrival (ties: process, then local order)."""
    keyed = [(r.arrival, p, r.id, r) for p, records in enumerate(per_process) for r in records]
    merged = [r for *_, r in sorted(keyed, key=lambda k: k[:3])]
    for i, r in enumerate(merged):
        r.id = i
    return merged


def run_load(args):
    """Plays the load on args.processes processes; (columns, summary row, records)."""
    model = args.model or asyncio.run(served_model(args.url))
    salt = None if args.no_cache_salt else (
        args.cache_salt or "openai_load-%x-%d" % (time.time_ns(), os.getpid()))
    start = time.perf_counter()
    shares = parts(args, model, salt, start)
    if args.processes == 1:
        per_process = [asyncio.run(run_part(args, shares[0], LocalSync()))]
    else:
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(args.processes)
        slots = ctx.Array("d", args.processes * (args.batches + 2), lock=False)
        results = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(args, part, i, args.processes, barrier,
                                                   slots, results))
                 for i, part in enumerate(shares)]
        for proc in procs:
            proc.start()
        got = {}
        while len(got) < len(procs):
            try:
                i, records, error = results.get(timeout=1.0)
                got[i] = (records, error)
            except queue.Empty:
                dead = [i for i, proc in enumerate(procs) if i not in got and
                        proc.exitcode is not None]
                if dead:  # died before it could report: free the others' barrier
                    barrier.abort()
                    for i in dead:
                        got[i] = ([], "exited with status %s" % procs[i].exitcode)
        for proc in procs:
            proc.join()
        errors = ["process %d: %s" % (i, e) for i, (_, e) in sorted(got.items()) if e]
        if errors:
            raise RuntimeError("; ".join(errors))
        per_process = [got[i][0] for i in range(args.processes)]
    records = merge(per_process)
    if args.pattern == "closed":
        row = summarize_closed(records, args.batches, args.concurrency, args.max_num_seqs)
        return CLOSED_COLUMNS, row, records
    return POISSON_COLUMNS, summarize_poisson(records, args.rate), records


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="server base address, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", help="model name requests carry (default: first of /v1/models)")
    p.add_argument("--pattern", choices=["closed", "poisson"], default="closed")
    p.add_argument("--concurrency", type=int, default=16, help="closed: clients")
    p.add_argument("--batches", type=int, default=4, help="closed: batches, the first a warm-up")
    p.add_argument("--max-num-seqs", type=int, default=256,
                   help="cap on requests in flight (cb_sweep's max_num_seqs; default 256)")
    p.add_argument("--rate", type=float, default=10.0, help="poisson: requests per second")
    p.add_argument("--requests", type=int, default=200, help="poisson: requests")
    p.add_argument("--skip", type=int, default=20, help="poisson: first requests left out")
    p.add_argument("--prompt-tokens", type=int, default=256)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--vocab", type=int, default=151643,
                   help="prompt token ids are drawn below this (Qwen3's regular tokens)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-salt", help="cache_salt of every request (default: unique to the run)")
    p.add_argument("--no-cache-salt", action="store_true", help="send no cache_salt")
    p.add_argument("--processes", type=int,
                   help="client processes sharing the load (default: one per %d streams that "
                        "can be in flight, ceil(min(concurrency, max-num-seqs) / %d))"
                        % (STREAMS_PER_PROCESS, STREAMS_PER_PROCESS))
    p.add_argument("--timeout-s", type=float, default=300.0,
                   help="longest silence on a stream before it fails")
    p.add_argument("--out", help="also write the summary row here (CSV)")
    p.add_argument("--requests-out", help="write every request's times here (CSV, ms)")
    args = p.parse_args(argv)
    if args.processes is None:
        args.processes = default_processes(
            args.concurrency if args.pattern == "closed" else args.max_num_seqs,
            args.max_num_seqs)
    checks = [
        (args.concurrency >= 1, "--concurrency must be at least 1"),
        (args.batches >= 2, "--batches must be at least 2 (the first is a warm-up)"),
        (args.max_num_seqs >= 1, "--max-num-seqs must be at least 1"),
        (args.rate > 0 and math.isfinite(args.rate), "--rate must be a finite number > 0"),
        (args.requests > args.skip >= 0, "--requests must exceed --skip (>= 0)"),
        (args.prompt_tokens >= 1 and args.output_tokens >= 1,
         "--prompt-tokens and --output-tokens must be at least 1"),
        (args.vocab >= 1, "--vocab must be at least 1"),
        (1 <= args.processes <= args.max_num_seqs,
         "--processes must be at least 1 and at most --max-num-seqs (each needs a place)"),
        (args.pattern != "closed" or args.processes <= args.concurrency,
         "--processes must be at most --concurrency (each needs a client)"),
        (not (args.no_cache_salt and args.cache_salt), "--cache-salt or --no-cache-salt, not both"),
    ]
    for ok, message in checks:
        if not ok:
            p.error(message)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    columns, row, records = run_load(args)
    text = csv_text(columns, [row])
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.requests_out:
        with open(args.requests_out, "w") as f:
            f.write(csv_text(REQUEST_COLUMNS, requests_rows(records)))
    print("%d requests in %.1f s on %d processes" % (
        len(records), time.perf_counter() - started, args.processes),
          file=sys.stderr)


if __name__ == "__main__":
    main()
