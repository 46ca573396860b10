#!/usr/bin/env bash
# The operator cost model calibrated and validated on a GPU machine (no
# Rust, no network), in two parts that each fit one 10-minute device call:
#
#   OUT=/path/to/out scripts/h200_operators.sh calibrate
#   OUT=/path/to/out PROFILE=/path/to/operators.ron scripts/h200_operators.sh validate
#
# calibrate: `exp calibrate --operators` (every Qwen3 size on the whole GPU,
#   qwen3-0.6b and qwen3-8b's kernel groups and their steps on 16 and 32 SMs;
#   docs/experiments.md) on whichever datasheet GPU the machine has, its
#   wall time, then the profile and what it measured in
#   $OUT/operators_calibrate.tar.gz and $OUT/operators.ron.
# validate: `exp validate --cost-model operators --operator-profile
#   $PROFILE` for qwen3-0.6b (every single-engine experiment) and for
#   qwen3-8b (--short, the experiments of VALIDATE_8B), into
#   $OUT/operators_validate.tar.gz.
# Both write $OUT/summary_PART.txt (steps, status, seconds, the printed
# figures). Environment:
#   EXP           exp built with --features cuda (default ./target/release/exp-cuda)
#   ENGINE_BENCH  engine-bench built with --features cuda (default
#                 ./target/release/engine-bench-cuda)
#   BUDGET_S      wall-clock budget of the part (default 570)
#   GPU           validate: the datasheet GPU the sim prices (default: the
#                 profile's `gpu`; exp validate refuses one the machine is not)
#   VALIDATE_8B   experiments of the qwen3-8b run (default
#                 chunk_sweep,prefix_cache,salt_isolation,poisson_mix: cb_sweep
#                 does not finish in the budget at that size)
# A failed step is recorded and the next still runs; the exit status is 1 if
# any step failed, 2 for a usage error.
set -euo pipefail

PART=${1:-}
[[ $PART == calibrate || $PART == validate ]] || {
    echo "usage: OUT=DIR $0 calibrate|validate (validate also needs PROFILE=FILE)" >&2
    exit 2
}
OUT=${OUT:?set OUT to the folder the results go to}
EXP=${EXP:-./target/release/exp-cuda}
ENGINE_BENCH=${ENGINE_BENCH:-./target/release/engine-bench-cuda}
BUDGET_S=${BUDGET_S:-570}
VALIDATE_8B=${VALIDATE_8B:-chunk_sweep,prefix_cache,salt_isolation,poisson_mix}
[[ -x $EXP ]] || { echo "no executable exp at $EXP" >&2; exit 2; }
if [[ $PART == calibrate ]]; then
    [[ -x $ENGINE_BENCH ]] || { echo "no executable engine-bench at $ENGINE_BENCH" >&2; exit 2; }
else
    PROFILE=${PROFILE:?set PROFILE to the operator profile calibrate wrote}
    [[ -f $PROFILE ]] || { echo "no operator profile at $PROFILE" >&2; exit 2; }
    # The sim prices the GPU the profile was calibrated on unless GPU says
    # otherwise; exp validate refuses one that is not the GPU it runs on.
    GPU=${GPU:-$(sed -n 's/^ *gpu: "\([^"]*\)",$/\1/p' "$PROFILE" | head -n 1)}
    [[ -n $GPU ]] || { echo "no gpu in $PROFILE: set GPU to its datasheet key" >&2; exit 2; }
fi
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

mkdir -p "$OUT"
W=$(mktemp -d)/operators_$PART
mkdir -p "$W"
LOG=$W/log.txt
STEPS=$W/steps.csv
echo "step,status,seconds" >"$STEPS"
FAILED=0

# log, allowed, step and skip.
source "$SCRIPTS/h200_steps.sh"

finish() {
    trap - EXIT
    set +e
    {
        echo "h200_operators.sh $PART, $(date -u +%Y-%m-%dT%H:%M:%SZ), ${SECONDS}s wall"
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
        echo
        column -s, -t <"$STEPS" 2>/dev/null || cat "$STEPS"
        for f in "$W"/*.err; do
            [[ -s $f ]] || continue
            echo
            echo "== $(basename "$f" .err)"
            grep -E "held-out|measured in|median|error|steps" "$f" | tail -n 12
        done
    } >"$OUT/summary_$PART.txt"
    tar czf "$OUT/operators_$PART.tar.gz" -C "$(dirname "$W")" "$(basename "$W")"
    log "wrote $OUT/summary_$PART.txt and $OUT/operators_$PART.tar.gz"
    exit "$FAILED"
}
trap finish EXIT

if [[ $PART == calibrate ]]; then
    step calibrate "$BUDGET_S" "$EXP" calibrate --operators --engine-bench "$ENGINE_BENCH" \
        --out "$W/operators.ron" || true
    [[ -f $W/operators.ron ]] && cp "$W/operators.ron" "$OUT/operators.ron"
else
    step validate_0.6b "$BUDGET_S" "$EXP" validate --cost-model operators --operator-profile "$PROFILE" \
        --gpu "$GPU" --model qwen3-0.6b --out "$W/qwen3-0.6b" --quiet || true
    step validate_8b "$BUDGET_S" "$EXP" validate --cost-model operators --operator-profile "$PROFILE" \
        --gpu "$GPU" --model qwen3-8b --short --experiments "$VALIDATE_8B" --out "$W/qwen3-8b_short" \
        --quiet || true
fi
