#!/usr/bin/env bash
# Predicts every figure of published.csv with the simulator, once with the
# operator model and once with the default cost model, and writes
# figures.csv (published vs predicted, errors, the operator model's expected
# error and what it calls off the measured ground).
#
#   EXP=path/to/exp results/published/reproduce.sh      # from the repository root
#
# Runs go to $RUNS (default /tmp/servetwin-published); each takes under a second.
set -euo pipefail

EXP=${EXP:-exp}
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-/tmp/servetwin-published}
MODELS=$HERE/models
TRACES=$HERE/traces

# vLLM's `vllm serve` defaults: on a GPU of >= 70 GiB that is not an A100,
# max_num_seqs 1024 and max_num_batched_tokens 8192; else 256 and 2048.
H100="--set max_num_seqs=1024 --set max_num_batched_tokens=8192"
SMALL="--set max_num_seqs=256 --set max_num_batched_tokens=2048"

# The exp arguments reproducing figure $1 (without --cost-model and --out).
args_of() {
  case $1 in
    h100_8b_c1_tpot | h100_8b_c1_ttft)
      echo "cb_sweep --model qwen3-8b --gpu h100-sxm $H100 --set max_model_len=40960 --set concurrency=1 --set prompt_tokens=233 --set output_tokens=221" ;;
    h100_8b_c8_tpot)
      echo "cb_sweep --model qwen3-8b --gpu h100-sxm $H100 --set max_model_len=40960 --set concurrency=8 --set prompt_tokens=233 --set output_tokens=221" ;;
    h100_14b_2k) echo "trace_replay --model qwen3-14b --gpu h100-sxm $H100 --set max_model_len=40960 --trace $TRACES/burst_500x1996_100.csv" ;;
    h100_14b_4k) echo "trace_replay --model qwen3-14b --gpu h100-sxm $H100 --set max_model_len=40960 --trace $TRACES/burst_500x3996_200.csv" ;;
    a100_14b_2k) echo "trace_replay --model qwen3-14b --gpu a100-80gb-sxm $SMALL --set max_model_len=40960 --trace $TRACES/burst_500x1996_100.csv" ;;
    a100_14b_4k) echo "trace_replay --model qwen3-14b --gpu a100-80gb-sxm $SMALL --set max_model_len=40960 --trace $TRACES/burst_500x3996_200.csv" ;;
    h100_32b_2k) echo "trace_replay --model qwen3-32b --gpu h100-sxm $H100 --set max_model_len=32768 --trace $TRACES/burst_500x1996_100.csv" ;;
    h100_32b_4k) echo "trace_replay --model qwen3-32b --gpu h100-sxm $H100 --set max_model_len=32768 --trace $TRACES/burst_500x3996_200.csv" ;;
    a100_32b_2k) echo "trace_replay --model qwen3-32b --gpu a100-80gb-sxm $SMALL --set max_model_len=32768 --trace $TRACES/burst_500x1996_100.csv" ;;
    a100_32b_4k) echo "trace_replay --model qwen3-32b --gpu a100-80gb-sxm $SMALL --set max_model_len=32768 --trace $TRACES/burst_500x3996_200.csv" ;;
    a100_40_llama8b_c1)
      echo "cb_sweep --model $MODELS/llama-3.1-8b-shape --gpu a100-40gb-pcie $SMALL --set max_model_len=131072 --set concurrency=1 --set prompt_tokens=1024 --set output_tokens=128 --set batches=11" ;;
    l4_qwen25_05b_c1_itl | l4_qwen25_05b_c1_ttft)
      echo "cb_sweep --model $MODELS/qwen2.5-0.5b-shape --gpu l4 $SMALL --set gpu_memory_utilization=0.6 --set max_model_len=8192 --set concurrency=1 --set prompt_tokens=256 --set output_tokens=128" ;;
    l4_qwen25_05b_c32_tput | l4_qwen25_05b_c32_itl)
      echo "cb_sweep --model $MODELS/qwen2.5-0.5b-shape --gpu l4 $SMALL --set gpu_memory_utilization=0.6 --set max_model_len=8192 --set concurrency=32 --set prompt_tokens=256 --set output_tokens=128" ;;
    rtx4090_4b_c1_tpot)
      echo "cb_sweep --model qwen3-4b --gpu rtx-4090 $SMALL --set max_model_len=40960 --set concurrency=1 --set prompt_tokens=128 --set output_tokens=128 --set batches=5" ;;
    a100_17b_c1_tpot)
      echo "cb_sweep --model qwen3-1.7b --gpu a100-80gb-sxm $SMALL --set max_model_len=40960 --set concurrency=1 --set prompt_tokens=128 --set output_tokens=128 --set batches=5" ;;
    *) echo "reproduce.sh: no command for figure $1" >&2; return 1 ;;
  esac
}

# The predicted value of metric $2 in the run folder $1.
value_of() {
  local dir=$1 metric=$2 summary
  summary=$(ls "$dir"/*/sim/summary.csv)
  local column
  case $metric in
    tpot_median | tpot_mean | itl_median | decode_tok_s) column=itl_median_ms ;;
    ttft_median) column=ttft_median_ms ;;
    output_throughput) column=throughput_tok_s ;;
    duration) column=duration_s ;;
    *) echo "reproduce.sh: unknown metric $metric" >&2; return 1 ;;
  esac
  awk -F, -v col="$column" -v metric="$metric" '
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    NR == 2 { v = $c; if (metric == "decode_tok_s") v = 1000 / v; printf "%.4g", v }
  ' "$summary"
}

# The operator model's expected |error| (%) for metric $2 from meta.ron in $1:
# decode for ITL and TPOT, prefill for TTFT, the larger for whole runs.
expected_of() {
  local meta metric=$2
  meta=$(ls "$1"/*/sim/meta.ron)
  local decode prefill
  decode=$(grep -m1 'decode_pct:' "$meta" | tr -dc '0-9.')
  prefill=$(grep -m1 'prefill_pct:' "$meta" | tr -dc '0-9.')
  case $metric in
    tpot_median | tpot_mean | itl_median | decode_tok_s) printf '%.1f' "$decode" ;;
    ttft_median) printf '%.1f' "$prefill" ;;
    *) awk -v a="$decode" -v b="$prefill" 'BEGIN { printf "%.1f", (a > b ? a : b) }' ;;
  esac
}

# What the operator model's meta.ron lists as off the measured ground, "; "-joined.
off_ground_of() {
  local meta
  meta=$(ls "$1"/*/sim/meta.ron)
  awk '/off_ground: \[\]/ { exit } /off_ground: \[/ { on = 1; next } on && /\]/ { exit } on { gsub(/^ *"|",? *$/, ""); print }' "$meta" |
    paste -sd ';' - | sed 's/;/; /g'
}

pct() { awk -v p="$1" -v m="$2" 'BEGIN { printf "%+.1f", (p - m) / m * 100 }'; }

mkdir -p "$RUNS"
out=$HERE/figures.csv
echo "gpu,model,engine,source_url,date,setup,metric,published,unit,predicted_operators,predicted_default,error_operators_pct,error_default_pct,operator_expected_error_pct,id,operator_off_ground" >"$out"
# published.csv: id,gpu,model,engine,source_url,date,"setup",metric,published,unit (setup quoted, may hold commas).
tail -n +2 "$HERE/published.csv" | while IFS= read -r line; do
  id=${line%%,*}
  front=${line%%,\"*}               # id,gpu,model,engine,source_url,date
  rest=${line#*\"}; setup=${rest%%\"*}
  back=${rest#*\",}                 # metric,published,unit
  metric=${back%%,*}; tail_=${back#*,}; published=${tail_%%,*}; unit=${tail_#*,}
  read -r -a a <<<"$(args_of "$id")"
  for cm in operators profile; do
    "$EXP" run "${a[@]}" --mode sim --cost-model "$cm" --out "$RUNS/$id-$cm" --quiet </dev/null
  done
  op=$(value_of "$RUNS/$id-operators" "$metric")
  def=$(value_of "$RUNS/$id-profile" "$metric")
  expected=$(expected_of "$RUNS/$id-operators" "$metric")
  off=$(off_ground_of "$RUNS/$id-operators")
  echo "${front#*,},\"$setup\",$metric,$published,$unit,$op,$def,$(pct "$op" "$published"),$(pct "$def" "$published"),$expected,$id,\"$off\"" >>"$out"
done
echo "wrote $out" >&2
