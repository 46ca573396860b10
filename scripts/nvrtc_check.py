#!/usr/bin/env python3
"""Compile the CUDA runner's kernels with NVRTC for sm_90, no GPU needed.

Assembles the source exactly as engine/src/runner/cuda/kernels.rs does (the
shape #defines, then the .cu files in the order of its format! string), for
every model shape the runner is tested with, and compiles synthetic.cu (its
own module, no defines); prints NVRTC's log with ptxas's registers, shared
memory and spills per kernel (--verbose). Exits non-zero when any source
fails to compile. The sources compile in parallel, one process per core
(NVRTC takes about 5 s a source; twelve of them serially were a minute of CI).

NVRTC and the CUDA headers come from NVIDIA's pip wheels (CI pins 13.0, the
H200 machine's CUDA):
    python3 -m pip install "nvidia-cuda-nvrtc==13.0.*" "nvidia-cuda-runtime==13.0.*"
    python3 scripts/nvrtc_check.py [--verbose]
"""

import argparse
import concurrent.futures
import ctypes
import glob
import os
import re
import site
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "engine", "src", "runner", "cuda")
# (head_dim, query heads, KV heads, hidden size): the Qwen3 dense family
# (groups 2, 4, 5 and 8; hidden up to 5120), the group-3 self-test shape, the
# other self-tests' shapes, a head_dim that is not a power of two and a wide
# GQA group.
SHAPES = [
    (128, 16, 8, 1024),
    (128, 16, 8, 2048),
    (128, 32, 8, 4096),
    (128, 40, 8, 5120),
    (128, 64, 8, 5120),
    (128, 64, 8, 8192),
    (128, 24, 8, 3072),
    (32, 4, 2, 128),
    (64, 8, 8, 512),
    (96, 8, 8, 768),
    (256, 8, 1, 2048),
]


def norm_chunks(hidden):
    """NORM_CHUNKS as kernels.rs computes it (KernelShape::norm_chunks)."""
    return max(4, -(-hidden // (4 * 256)))


def find(pattern):
    roots = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages()]
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, pattern)))
        if hits:
            return hits[-1]
    sys.exit(f"not found: {pattern} (python3 -m pip install \"nvidia-cuda-nvrtc==13.0.*\" \"nvidia-cuda-runtime==13.0.*\")")


def kernel_source_body():
    rs = open(os.path.join(SRC, "kernels.rs")).read()
    files = dict(re.findall(r'const (\w+): &str = include_str!\("([\w.]+)"\);', rs))
    order = re.findall(r"\{(\w+_CU)\}", re.search(r'"#define HEAD_DIM[^"]*"', rs).group(0))
    return "\n".join(open(os.path.join(SRC, files[name])).read() for name in order)


def load_nvrtc():
    """NVRTC and the include directory of the CUDA headers."""
    # NVRTC opens its builtins library by soname at compile time; load it first
    # so that the loader finds it without LD_LIBRARY_PATH.
    ctypes.CDLL(find("nvidia/cu*/lib/libnvrtc-builtins.so.*[0-9]"), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(find("nvidia/cu*/lib/libnvrtc.so.*[0-9]"))
    include = os.path.dirname(find("nvidia/cu*/include/cuda_bf16.h"))
    return lib, include


NVRTC = None  # (library, include directory) in a worker process, set by load_worker


def load_worker():
    """Loads NVRTC once in each worker process."""
    global NVRTC
    NVRTC = load_nvrtc()


def compile_source(job):
    """Compiles one source for sm_90 in a worker; returns (success, the verdict and log to print)."""
    src, name, verbose = job
    lib, include = NVRTC
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"kernels.cu", 0, None, None)
    opts = [b"--gpu-architecture=sm_90", b"--std=c++17", f"-I{include}".encode()]
    if verbose:
        opts.append(b"--ptxas-options=-v")
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    report = f"{name}: {'ok' if rc == 0 else f'FAILED (nvrtc {rc})'}"
    text = log.value.decode(errors="replace").strip()
    if text and (rc != 0 or verbose):
        report += "\n" + text
    return rc == 0, report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--verbose", action="store_true", help="print ptxas resource usage per kernel")
    args = ap.parse_args()
    load_nvrtc()  # fails here, once, when the wheels are missing
    body = kernel_source_body()
    jobs = []
    for hd, nq, nkv, hidden in SHAPES:
        src = (
            f"#define HEAD_DIM {hd}\n#define NUM_Q_HEADS {nq}\n#define NUM_KV_HEADS {nkv}\n"
            f"#define NORM_CHUNKS {norm_chunks(hidden)}\n{body}"
        )
        name = f"head_dim {hd}, {nq} q heads, {nkv} kv heads, hidden {hidden}"
        jobs.append((src, name, args.verbose))
    synthetic = open(os.path.join(SRC, "synthetic.cu")).read()
    jobs.append((synthetic, "synthetic.cu", args.verbose))
    ok = True
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count(), initializer=load_worker) as pool:
        for passed, report in pool.map(compile_source, jobs):
            print(report, flush=True)
            ok &= passed
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
