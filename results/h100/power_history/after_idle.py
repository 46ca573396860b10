# Does a heavy GEMM burst run slower after heavy work than after idle? (power/clock history)
import torch, time, json, os, subprocess
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
# qwen3-8b's MLP up/gate product at 2048 tokens: 2048 x 4096 x 24576, bf16.
x = torch.randn(2048, 4096, device=dev, dtype=torch.bfloat16)
w = torch.randn(24576, 4096, device=dev, dtype=torch.bfloat16)
def burst(n):
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        y = x @ w.t()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e)
flops = 2 * 2048 * 4096 * 24576
for _ in range(5): burst(1)
one = burst(1); n = max(1, int(50 / one))  # a ~50 ms step
out = {"gemm_ms": one, "per_burst": n}
res = {}
for gap_ms in [1000, 200, 50, 20, 7, 0]:
    times = []
    for rep in range(8):
        time.sleep(gap_ms / 1000)
        times.append(burst(n))
    res[str(gap_ms)] = times
out["burst_ms_by_gap"] = res
# sustained: 30 bursts back to back, each timed
time.sleep(1.0)
out["back_to_back"] = [burst(n) for _ in range(30)]
out["tflops_first"] = flops * n / (out["back_to_back"][0] * 1e-3) / 1e12
out["tflops_last"] = flops * n / (out["back_to_back"][-1] * 1e-3) / 1e12
print(json.dumps(out, indent=1))
json.dump(out, open(os.environ["OUT"] + "/power.json", "w"), indent=1)
