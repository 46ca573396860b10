# A ~50 ms GEMM burst after a gap that is idle, or busy with memory-bound copies (as decode
# steps are): does the light work restore the burst rate as idle time does?
import torch, time, json, os
dev = "cuda"
x = torch.randn(2048, 4096, device=dev, dtype=torch.bfloat16)
w = torch.randn(24576, 4096, device=dev, dtype=torch.bfloat16)
a = torch.empty(256 * 2**20, device=dev, dtype=torch.uint8); b = torch.empty_like(a)
def timed(f):
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record(); f(); e.record(); torch.cuda.synchronize(); return s.elapsed_time(e)
def burst(): 
    for _ in range(93): y = x @ w.t()
def copies(n):
    for _ in range(n): b.copy_(a)
for _ in range(3): timed(burst)
c1 = timed(lambda: copies(1)); 
out = {"copy_ms": c1}
res = {}
for gap in [7, 20, 50]:
    n = max(1, round(gap / c1))
    for kind in ["idle", "copy"]:
        times = []
        time.sleep(0.5)
        for rep in range(10):
            if kind == "idle": time.sleep(gap / 1000)
            else: timed(lambda: copies(n))
            times.append(timed(burst))
        res[f"{kind}{gap}"] = times
out["burst_ms"] = res
print(json.dumps({k: [round(t, 1) for t in v] for k, v in res.items()}), c1)
json.dump(out, open(os.environ["OUT"] + "/power2.json", "w"), indent=1)
