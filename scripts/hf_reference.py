#!/usr/bin/env python3
"""Reference outputs from Hugging Face transformers for the engine's CPU runner.

Builds a small random Qwen3ForCausalLM, saves it with save_pretrained
(config.json + model.safetensors), then runs greedy generation (no sampling,
KV cache on) for seeded random prompts and writes reference.json into the same
directory:

    {"dtype", "torch_version", "transformers_version", "config",
     "prompts": [[ids]], "generated": [[ids]],
     "logits": [[[vocab floats] per step] per prompt]}

where logits[p][s] is the distribution generated[p][s] was taken from (float32
even for a bfloat16 model). Weights are rounded to bfloat16 values (the
engine's storage) even when the model runs in float32. Compare with:

    cargo run --release -p engine --example hf_compare -- DIR

Needs torch, transformers (5.x or a 4.x with Qwen3) and safetensors:
    pip install torch transformers safetensors
"""

import argparse
import copy
import inspect
import json
import os

import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="directory to write the checkpoint and reference.json into")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--rope-theta", type=float, default=1_000_000.0)
    p.add_argument("--untied", action="store_true", help="separate lm_head.weight")
    p.add_argument(
        "--init-std",
        type=float,
        default=0.05,
        help="std of linear/embedding weights (larger than HF's 0.02 so that "
        "a small model's logits have a clear argmax)",
    )
    p.add_argument("--norm-noise", type=float, default=0.1, help="std of noise added to RMSNorm weights of 1")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="compute dtype")
    p.add_argument(
        "--save-bf16",
        action="store_true",
        help="store the checkpoint in bfloat16 (lossless: the weights are bf16 values) to halve its size",
    )
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--min-len", type=int, default=5)
    p.add_argument("--max-len", type=int, default=60)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def build_model(args):
    config = Qwen3Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        rope_theta=args.rope_theta,
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        tie_word_embeddings=not args.untied,
        initializer_range=args.init_std,
        use_sliding_window=False,
        attn_implementation="eager",
    )
    torch.manual_seed(args.seed)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        # HF initialises norms to exactly 1; noise makes a wrongly applied
        # norm weight visible in the comparison.
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(torch.randn_like(param) * args.norm_noise)
            # The engine keeps weights in bf16; rounding them here keeps the
            # float32 comparison about compute, not about weight storage.
            param.copy_(param.to(torch.bfloat16).to(param.dtype))
    return model.to(getattr(torch, args.dtype)).eval()


@torch.no_grad()
def greedy(model, prompt, steps):
    """Greedy decoding with the KV cache; returns tokens and float32 logits per step."""
    # transformers 5.x renamed past_key_values to cache; accept both.
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, use_cache=True)
    tokens, logits = [], []
    for step in range(steps):
        last = out.logits[0, -1].float()
        token = int(torch.argmax(last))
        tokens.append(token)
        # 8 significant digits: float32 logits to about 1e-8, half the JSON.
        logits.append([float(f"{x:.8g}") for x in last.tolist()])
        if step + 1 < steps:
            cache = getattr(out, cache_arg)
            out = model(input_ids=torch.tensor([[token]]), use_cache=True, **{cache_arg: cache})
    return tokens, logits


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    model = build_model(args)
    if args.save_bf16:
        # A copy: casting the model itself would also round RoPE's inv_freq buffer.
        copy.deepcopy(model).to(torch.bfloat16).save_pretrained(args.out)
    else:
        model.save_pretrained(args.out)
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompts = []
    for _ in range(args.prompts):
        length = int(torch.randint(args.min_len, args.max_len + 1, (1,), generator=gen))
        prompts.append(torch.randint(0, args.vocab, (length,), generator=gen).tolist())
    generated, logits = [], []
    for prompt in prompts:
        toks, lg = greedy(model, prompt, args.steps)
        generated.append(toks)
        logits.append(lg)
    reference = {
        "dtype": args.dtype,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "config": model.config.to_dict(),
        "prompts": prompts,
        "generated": generated,
        "logits": logits,
    }
    path = os.path.join(args.out, "reference.json")
    with open(path, "w") as f:
        json.dump(reference, f)
    print(f"wrote {args.out}/ (checkpoint) and {path}: {len(prompts)} prompts x {args.steps} steps")


if __name__ == "__main__":
    main()
