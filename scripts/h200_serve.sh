#!/usr/bin/env bash
# The served real engine against the in-process one, in one run on a GPU
# machine (no Rust, no network): docs/endpoint.md, "Measuring the served
# engine".
#
#   OUT=/path/to/out scripts/h200_serve.sh [EXP_BINARY]
#
# EXP_BINARY (or env EXP, default ./target/release/exp-cuda) is an `exp`
# built with --features cuda. Environment (defaults for the H200 run):
#   BACKEND=cuda MODEL=qwen3-0.6b GPU=h200-sxm PYTHON=python3
#   VOCAB       prompt vocabulary of openai_load.py (512 for tiny, else 151643)
#   LOAD_CONDITIONS  cb_sweep conditions openai_load.py reproduces, as
#               "max_num_seqs:concurrency ..." (default "256:16 256:64")
#   BUDGET_S    wall-clock budget of the whole run (default 530); each step's
#               timeout is its own cap or what is left of the budget
#   CALIBRATE_TIMEOUT_S  cap of `exp calibrate --endpoint` (default 240: 121
#               probes took 21 s of decode probes and ~20 s of prefill
#               probes beside a pace stream on the H200, and there are 133
#               now; the CPU stand-in needs more)
#   CB_SETS     extra `--set k=v` arguments for every cb_sweep run (default
#               none: the catalogue's conditions)
# A CPU stand-in runs every step the same way:
#   BACKEND=cpu MODEL=tiny OUT=/tmp/out scripts/h200_serve.sh target/release/exp
#
# Steps: (a) cb_sweep and prefix_cache in-process (--mode real); (b) exp
# serve --mode real on port 0, its address from its stdout line, /health
# waited for; (c) the same two experiments against it (--endpoint); (d)
# openai_load.py reproducing cb_sweep conditions; (e) exp calibrate
# --endpoint; (f) SIGINT to the server, which must exit 0; (g) both
# experiments in sim on the endpoint profile (and on the shipped profile);
# (h) comparisons (compare_summaries.py): (c) vs (a), (d) vs (c), (g) vs (a).
# Everything goes to a work folder, tarred into $OUT/serve.tar.gz at the end
# (also after a failure), and a short $OUT/summary.txt: two files in $OUT.
# A failed step is recorded and the steps that do not need it still run;
# the exit status is 1 if any step failed.
set -euo pipefail

EXP=${1:-${EXP:-./target/release/exp-cuda}}
OUT=${OUT:?set OUT to the folder the results go to}
BACKEND=${BACKEND:-cuda}
MODEL=${MODEL:-qwen3-0.6b}
GPU=${GPU:-h200-sxm}
PYTHON=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-530}
LOAD_CONDITIONS=${LOAD_CONDITIONS:-"256:16 256:64"}
read -r -a CB_SETS <<<"${CB_SETS:-}"
if [[ -z ${VOCAB:-} ]]; then
    if [[ $MODEL == tiny ]]; then VOCAB=512; else VOCAB=151643; fi
fi
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXP=$(cd "$(dirname "$EXP")" && pwd)/$(basename "$EXP")
[[ -x $EXP ]] || { echo "no executable exp at $EXP" >&2; exit 2; }
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

mkdir -p "$OUT"
SCRATCH=$(mktemp -d)
W=$SCRATCH/serve
mkdir -p "$W"
LOG=$W/log.txt
STEPS=$W/steps.csv
echo "step,status,seconds" >"$STEPS"
FAILED=0
SERVER_PID=
URL=
RUNNER=(--backend "$BACKEND" --model "$MODEL")

# log, allowed, step and skip.
source "$SCRIPTS/h200_steps.sh"

stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    local rc=0 t0=$SECONDS
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        log "start stop_server: SIGINT to $SERVER_PID"
        kill -INT "$SERVER_PID"
        local waited=0
        while kill -0 "$SERVER_PID" 2>/dev/null && ((waited < 60)); do
            sleep 0.5
            waited=$((waited + 1))
        done
        if kill -0 "$SERVER_PID" 2>/dev/null; then
            log "server still running 30 s after SIGINT: SIGKILL"
            kill -KILL "$SERVER_PID" || true
        fi
    fi
    wait "$SERVER_PID" || rc=$?
    SERVER_PID=
    local status=ok
    ((rc == 0)) || { status="exit status $rc"; FAILED=1; }
    log "end   stop_server: $status, $((SECONDS - t0))s"
    echo "stop_server,$status,$((SECONDS - t0))" >>"$STEPS"
}

finish() {
    local rc=$?
    trap - EXIT INT TERM
    set +e
    stop_server
    ((rc != 0)) && FAILED=1
    {
        echo "h200_serve.sh: $MODEL on $BACKEND, $(date -u +%Y-%m-%dT%H:%M:%SZ), ${SECONDS}s wall"
        echo "exp: $EXP"
        [[ -s $W/device.txt ]] && cat "$W/device.txt"
        echo
        echo "steps (status, seconds):"
        column -s, -t <"$STEPS" 2>/dev/null || cat "$STEPS"
        [[ -s $W/tables.txt ]] && { echo; cat "$W/tables.txt"; }
        echo
        echo "everything: serve.tar.gz (serve/: run folders, logs, compare/*.csv)"
    } >"$W/summary.txt"
    cp "$W/summary.txt" "$OUT/summary.txt"
    tar -C "$SCRATCH" -czf "$OUT/serve.tar.gz" serve
    rm -rf "$SCRATCH"
    cat "$OUT/summary.txt"
    exit $((FAILED ? 1 : 0))
}
trap finish EXIT
trap 'log "interrupted"; exit 130' INT TERM

log "exp $EXP, backend $BACKEND, model $MODEL, budget ${BUDGET_S}s, out $OUT"
if [[ $BACKEND == cuda ]] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
        >"$W/nvidia-smi.txt" 2>&1 || true
fi

# (a) the engine in this process.
step a_cb_sweep 200 "$EXP" run cb_sweep --mode real "${RUNNER[@]}" "${CB_SETS[@]}" \
    --out "$W/inprocess" --quiet || true
step a_prefix_cache 60 "$EXP" run prefix_cache --mode real "${RUNNER[@]}" \
    --out "$W/inprocess" --quiet || true

# (b) the server, on a free port.
start_server() {
    local t0=$SECONDS limit
    limit=$(allowed 180)
    log "start b_serve (ready within ${limit}s): exp serve --mode real ${RUNNER[*]} --port 0"
    "$EXP" serve --mode real "${RUNNER[@]}" --port 0 >"$W/serve.out" 2>"$W/serve.err" &
    SERVER_PID=$!
    while ((SECONDS - t0 < limit)); do
        URL=$(grep -o 'http://[^ ]*' "$W/serve.out" 2>/dev/null | head -n 1 || true)
        [[ -n $URL ]] && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.5
    done
    if [[ -z $URL ]] || ! "$PYTHON" - "$URL/health" <<'EOF'; then
import sys, time, urllib.request
for _ in range(100):
    try:
        if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(1)
EOF
        URL=
        FAILED=1
        tail -n 5 "$W/serve.err" | sed 's/^/    /' | tee -a "$LOG" >&2
        log "end   b_serve: failed (no address or no /health), $((SECONDS - t0))s"
        echo "b_serve,failed,$((SECONDS - t0))" >>"$STEPS"
        return 1
    fi
    head -n 1 "$W/serve.out" >"$W/device.txt"
    log "end   b_serve: $(cat "$W/device.txt"), $((SECONDS - t0))s"
    echo "b_serve,ok,$((SECONDS - t0))" >>"$STEPS"
}
start_server || true

# (c) the experiments over HTTP, (d) the independent client, (e) calibration.
C_CB=1 C_PC=1 E_OK=1
if [[ -n $URL ]]; then
    step c_cb_sweep 200 "$EXP" run cb_sweep --endpoint "$URL" --model "$MODEL" \
        "${CB_SETS[@]}" --out "$W/endpoint" --quiet && C_CB=0 || true
    step c_prefix_cache 60 "$EXP" run prefix_cache --endpoint "$URL" --model "$MODEL" \
        --out "$W/endpoint" --quiet && C_PC=0 || true
    # openai_load.py's default --processes: one client process per 16 streams.
    for cond in $LOAD_CONDITIONS; do
        m=${cond%%:*} c=${cond##*:}
        step "d_load_m${m}_c${c}" 60 "$PYTHON" "$SCRIPTS/openai_load.py" --url "$URL" \
            --pattern closed --max-num-seqs "$m" --concurrency "$c" --batches 4 \
            --prompt-tokens 256 --output-tokens 128 --vocab "$VOCAB" \
            --out "$W/load_m${m}_c${c}.csv" --requests-out "$W/load_m${m}_c${c}_requests.csv" ||
            true
    done
    step e_calibrate "${CALIBRATE_TIMEOUT_S:-240}" "$EXP" calibrate --endpoint "$URL" --model "$MODEL" --gpu "$GPU" \
        --out "$W/endpoint.ron" --quiet && E_OK=0 || true
else
    for s in c_cb_sweep c_prefix_cache d_load e_calibrate; do skip "$s" "no server"; done
fi

# (f) the server stops on SIGINT and exits 0.
stop_server

# (g) the simulator on the endpoint's profile, and on the profile shipped in exp.
if ((E_OK == 0)); then
    step g_cb_sweep 60 "$EXP" run cb_sweep --mode sim --model "$MODEL" \
        --profile "$W/endpoint.ron" "${CB_SETS[@]}" --out "$W/sim_endpoint_profile" --quiet || true
    step g_prefix_cache 30 "$EXP" run prefix_cache --mode sim --model "$MODEL" \
        --profile "$W/endpoint.ron" --out "$W/sim_endpoint_profile" --quiet || true
else
    skip g_sim_endpoint_profile "no endpoint profile"
fi
step g_cb_sweep_shipped 60 "$EXP" run cb_sweep --mode sim --model "$MODEL" "${CB_SETS[@]}" \
    --out "$W/sim_default_profile" --quiet || true
step g_prefix_cache_shipped 30 "$EXP" run prefix_cache --mode sim --model "$MODEL" \
    --out "$W/sim_default_profile" --quiet || true

# (h) comparisons: CSV per pair under compare/, tables in summary.txt.
mkdir -p "$W/compare"
CB_METRICS=throughput_tok_s,ttft_median_ms,itl_median_ms,itl_p99_ms
PC_METRICS=cold_ttft_ms,warm_ttft_ms,speedup
compare() { # NAME TITLE REF OTHER LABELS METRICS
    local name=$1 title=$2 ref=$3 other=$4 labels=$5 metrics=$6
    local f
    for f in "$ref" "$other"; do
        if [[ ! -s $f ]]; then
            skip "h_$name" "no ${f#"$W"/}"
            return 0
        fi
    done
    {
        echo "== $title"
        "$PYTHON" "$SCRIPTS/compare_summaries.py" "$ref" "$other" --labels "$labels" \
            --metrics "$metrics" --out "$W/compare/$name.csv" --table
    } >>"$W/tables.txt" 2>>"$LOG" || { FAILED=1; echo "h_$name,failed,0" >>"$STEPS"; }
}
compare cb_endpoint_vs_inprocess "cb_sweep: endpoint (c) vs in-process (a)" \
    "$W/inprocess/cb_sweep/real/summary.csv" "$W/endpoint/cb_sweep/real/summary.csv" \
    inprocess,endpoint throughput_tok_s,itl_median_ms
compare pc_endpoint_vs_inprocess "prefix_cache: endpoint (c) vs in-process (a)" \
    "$W/inprocess/prefix_cache/real/summary.csv" "$W/endpoint/prefix_cache/real/summary.csv" \
    inprocess,endpoint cold_ttft_ms,warm_ttft_ms
if ls "$W"/load_m*_c*.csv >/dev/null 2>&1; then
    first=1
    for f in "$W"/load_m*_c[0-9]*.csv; do
        [[ $f == *_requests.csv ]] && continue
        if ((first)); then cat "$f"; first=0; else tail -n +2 "$f"; fi
    done >"$W/load_summary.csv"
    compare load_vs_endpoint "cb_sweep: openai_load.py (d) vs exp run --endpoint (c)" \
        "$W/endpoint/cb_sweep/real/summary.csv" "$W/load_summary.csv" \
        endpoint,openai_load "$CB_METRICS"
fi
compare cb_sim_endpoint_profile_vs_inprocess "cb_sweep: sim on endpoint.ron (g) vs in-process (a)" \
    "$W/inprocess/cb_sweep/real/summary.csv" "$W/sim_endpoint_profile/cb_sweep/sim/summary.csv" \
    inprocess,sim throughput_tok_s,itl_median_ms
compare pc_sim_endpoint_profile_vs_inprocess \
    "prefix_cache: sim on endpoint.ron (g) vs in-process (a)" \
    "$W/inprocess/prefix_cache/real/summary.csv" \
    "$W/sim_endpoint_profile/prefix_cache/sim/summary.csv" inprocess,sim "$PC_METRICS"
compare cb_sim_default_profile_vs_inprocess "cb_sweep: sim on exp's default profile vs in-process (a)" \
    "$W/inprocess/cb_sweep/real/summary.csv" "$W/sim_default_profile/cb_sweep/sim/summary.csv" \
    inprocess,sim throughput_tok_s,itl_median_ms
log "done; failed steps: $FAILED"
