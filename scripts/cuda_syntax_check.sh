#!/bin/sh
# Syntax-checks the CUDA runner's NVRTC sources with g++ and host stand-ins
# (scripts/cuda_stub.h) for each model shape the runner is used with.
set -e
here=$(dirname "$0")
src=$here/../engine/src/runner/cuda
for shape in "128 16 8" "32 4 2" "64 8 8"; do
  set -- $shape
  { echo "#include \"$(realpath $here/cuda_stub.h)\""
    echo "#define HEAD_DIM $1"; echo "#define NUM_Q_HEADS $2"; echo "#define NUM_KV_HEADS $3"
    grep -v '#include <cuda_bf16.h>' $src/kernels.cu; cat $src/attention.cu $src/decode_attention.cu $src/skinny_gemm.cu; } > /tmp/cuda_syntax_$1.cpp
  g++ -std=c++17 -fsyntax-only -Wall -Wno-unused-variable -Wno-unknown-pragmas /tmp/cuda_syntax_$1.cpp
  echo "ok: head_dim $1, $2 q heads, $3 kv heads"
done
