#!/usr/bin/env python3
"""Trains a Qwen2.5-shaped decoder (random weights, reduced depth, no download) on a synthetic
long-context key-value task with sparsering's dynamic sparse attention, in bf16 with activation
checkpointing and AdamW, and prints tokens/s, peak memory and per-layer attention time beside what
`sparsering simulate` predicts for the same plan on this GPU (docs/python.md).

One GPU (vs_sparse_attention):
    python3 examples/train_long_context.py --seq-len 65536 --minutes 2
Several GPUs, a plan's ring (sparse_ring_attention; export with `sparsering export PLAN --to torch`):
    torchrun --nproc-per-node 4 examples/train_long_context.py --plan-export DIR
The CPU runs it too (tiny sizes, gloo under torchrun), e.g. --device cpu --seq-len 2048 --layers 2
--hidden 256 --heads 4 --kv-heads 2 --ffn 512.

Task: the sequence is pairs (key, value). Half of the keys map to values by a fixed table (learned
quickly, so the loss falls); the other half get a fresh random value per sequence, and the last
quarter of the sequence repeats keys from anywhere earlier: predicting their value needs retrieval
over the whole context (`retrieval loss`). Loss on value tokens only.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import sparsering  # noqa: E402
from sparsering import plan as sr_plan  # noqa: E402
from sparsering.ring_attention import sparse_ring_attention  # noqa: E402
from sparsering.ring_context import RingContext  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ATTENTION_MS = {}      # layer -> list of (kind, start event, end event)
STATE = {"in_backward": False}


class _Mark(torch.autograd.Function):
    """Identity that records a CUDA event in forward and backward (attention timing)."""

    @staticmethod
    def forward(ctx, x, layer, edge):
        ctx.meta = (layer, edge)
        _record(layer, "recompute" if STATE["in_backward"] else "fwd", edge)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        layer, edge = ctx.meta
        _record(layer, "bwd", "end" if edge == "start" else "start")
        return grad, None, None


def _record(layer, kind, edge):
    if not torch.cuda.is_available() or not STATE.get("timing"):
        return
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    ATTENTION_MS.setdefault(layer, []).append((kind, edge, event))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)


def rope(x, positions, theta):
    """Rotary embedding (Qwen2: rotate halves) of x (B, H, T, D) at global `positions` (T,)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angles = positions.float().view(-1, 1) * inv.view(1, -1)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return (x.float() * cos + torch.cat([-x2, x1], -1).float() * sin).to(x.dtype)


class Block(nn.Module):
    def __init__(self, cfg, layer, attend):
        super().__init__()
        h, hd = cfg.hidden, cfg.hidden // cfg.heads
        self.cfg, self.layer, self.attend, self.head_dim = cfg, layer, attend, hd
        self.capture = None  # a CaptureSession while the run's own patterns are recorded
        self.q = nn.Linear(h, cfg.heads * hd, bias=True)
        self.k = nn.Linear(h, cfg.kv_heads * hd, bias=True)
        self.v = nn.Linear(h, cfg.kv_heads * hd, bias=True)
        self.o = nn.Linear(cfg.heads * hd, h, bias=False)
        self.gate, self.up = nn.Linear(h, cfg.ffn, bias=False), nn.Linear(h, cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, h, bias=False)
        self.norm1, self.norm2 = RMSNorm(h), RMSNorm(h)

    def forward(self, x, positions):
        b, t, _ = x.shape
        y = self.norm1(x)
        split = lambda z, n: z.view(b, t, n, self.head_dim).transpose(1, 2)  # noqa: E731
        q = rope(split(self.q(y), self.cfg.heads), positions, self.cfg.rope_theta).contiguous()
        k = rope(split(self.k(y), self.cfg.kv_heads), positions, self.cfg.rope_theta).contiguous()
        v = split(self.v(y), self.cfg.kv_heads).contiguous()
        if self.capture is not None:
            self.capture.record(self.layer, q, k)
        q = _Mark.apply(q, self.layer, "start")
        a = self.attend(q, k, v)
        a = _Mark.apply(a, self.layer, "end")
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Decoder(nn.Module):
    """Qwen2.5-shaped: RMSNorm, RoPE, GQA attention with q/k/v bias, SwiGLU, tied embeddings."""

    def __init__(self, cfg, attend):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.blocks = nn.ModuleList([Block(cfg, i, attend) for i in range(cfg.layers)])
        self.norm = RMSNorm(cfg.hidden)
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, ids, positions):
        x = self.embed(ids)
        for block in self.blocks:
            x = checkpoint(block, x, positions, use_reentrant=False)
        return F.linear(self.norm(x), self.embed.weight)


def make_batch(cfg, seq_len, gen, device):
    """(ids (1, N), targets (1, N) with -100 where no loss, retrieval mask (1, N))."""
    pairs = seq_len // 2
    n_keys = cfg.vocab // 2 - 2
    keys = torch.randint(0, n_keys, (pairs,), generator=gen)
    fixed = keys % 2 == 0
    values = torch.where(fixed, cfg.table[keys], torch.randint(0, cfg.vocab // 2, (pairs,), generator=gen))
    tail = pairs * 3 // 4
    source = torch.randint(0, tail, (pairs - tail,), generator=gen)
    keys[tail:], values[tail:] = keys[source], values[source]
    # a repeated random key must return the value of its latest earlier occurrence
    seen = {}
    for i in range(pairs):
        key = int(keys[i])
        if i >= tail and key in seen and key % 2:
            values[i] = seen[key]
        seen[key] = int(values[i])
    ids = torch.stack([keys + cfg.vocab // 2, values], 1).reshape(-1)
    targets = torch.full_like(ids, -100)
    targets[0::2] = values  # the token after a key is its value
    retrieval = torch.zeros_like(ids, dtype=torch.bool)
    retrieval[0::2][tail:] = (keys[tail:] % 2 == 1)
    return ids.view(1, -1).to(device), targets.view(1, -1).to(device), retrieval.view(1, -1).to(device)


def capture_trace(model, cfg, args, device, gen, path):
    """Records the run's own sparsity: one no-grad forward of a fresh batch with the trained
    weights, every layer's post-RoPE q and k through the capture hook (docs/capture.md), written
    as a trace of this model's layers and heads."""
    sys.path.insert(0, os.path.join(REPO, "traces", "capture"))
    from sparsering_capture import CaptureSession, StreamingTraceWriter
    writer = StreamingTraceWriter(path, samples=1, layers=cfg.layers, heads=cfg.heads, vertical_slots=8192,
                                  slash_slots=8192, model="train-long-context-example", last_q=args.last_q)
    session = CaptureSession(writer, sample=0, seq_len=args.seq_len, last_q=args.last_q,
                             softmax_scale=(cfg.hidden // cfg.heads) ** -0.5)
    ids, _, _ = make_batch(cfg, args.seq_len, gen, device)
    for block in model.blocks:
        block.capture = session
    try:
        with torch.no_grad(), torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            model(ids, torch.arange(args.seq_len, device=device))
    finally:
        for block in model.blocks:
            block.capture = None
    session.finish(cfg.layers)
    writer.close()


def example_model_yaml(cfg, path):
    """Qwen2.5-3B's config with this run's shape (layers, width, heads, FFN, vocabulary)."""
    with open(os.path.join(REPO, "configs/models/qwen2.5-3b.yaml")) as f:
        lines = f.read().splitlines()
    values = {"name": "train-long-context-example", "layers": cfg.layers, "hidden_size": cfg.hidden,
              "ffn_hidden_size": cfg.ffn, "q_heads": cfg.heads, "kv_heads": cfg.kv_heads,
              "head_dim": cfg.hidden // cfg.heads, "vocab_size": cfg.vocab}
    out = []
    for line in lines:
        key = line.split(":", 1)[0]
        out.append(f"{key}: {values[key]}" if key in values and not line.startswith(" ") else line)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def predicted(args, cfg, gpu_name, model, device, gen):
    """`sparsering simulate` per layer for this run: the trace captured from the trained model
    itself (--plan-yaml: that plan, on Qwen2.5-3B's synthetic trace, as before), a model config of
    the example's shape, and a one-GPU plan on this GPU's config."""
    try:
        work = tempfile.mkdtemp(prefix="sparsering-example-")
        trace = os.path.join(work, "trace.safetensors")
        if args.plan_yaml:
            sr_plan.trace_synth(os.path.join(REPO, "configs/models/qwen2.5-3b.yaml"), args.seq_len, trace, seed=1)
            plan_path, source = args.plan_yaml, "Qwen2.5-3B's synthetic trace"
        else:
            capture_trace(model, cfg, args, device, gen, trace)
            model_yaml = os.path.join(work, "model.yaml")
            example_model_yaml(cfg, model_yaml)
            gpu = "h200" if "H200" in gpu_name else "h100-sxm"
            cluster = os.path.join(work, "cluster.yaml")
            with open(cluster, "w") as f:
                f.write(f"name: one-{gpu}\nnodes: 1\ngpus_per_node: 1\ngpu: {REPO}/configs/gpus/{gpu}.yaml\n"
                        f"intra_node:\n  kind: nvlink\n  bandwidth_gbytes_per_s: 450\n  latency_us: 3.4\n")
            plan_path = os.path.join(work, "plan.yaml")
            with open(plan_path, "w") as f:
                f.write(f"name: example-1gpu\nmodel: {model_yaml}\ncluster: {cluster}\n"
                        f"seq_len_tokens: {args.seq_len}\ncontext_parallel: 1\nring:\n  levels:\n"
                        f"    - {{size: 1, link: nvlink}}\nlayout:\n  kind: contiguous\nrecompute: full\n"
                        f"sparse:\n  recall: {args.recall}\n  last_q: {args.last_q}\n")
            source = "the trace captured from this run's model"
        result = sr_plan.simulate(plan_path, trace=trace)
        layers = {int(layer["layer"]) if "layer" in layer else i: layer for i, layer in enumerate(result["layers"])}
        return {"per_layer": {i: {"fwd": layer["attention_fwd_ns"] / 1e6, "bwd": layer["attention_bwd_ns"] / 1e6}
                              for i, layer in layers.items()},
                "attention_fwd_ms": sum(v["attention_fwd_ns"] for v in layers.values()) / len(layers) / 1e6,
                "attention_bwd_ms": sum(v["attention_bwd_ns"] for v in layers.values()) / len(layers) / 1e6,
                "plan": plan_path, "trace": source, "cost_source": result.get("cost_source", "")}
    except Exception as error:  # the prediction is context; the run must not fail on it
        return {"error": str(error)[:300]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=2048)       # Qwen2.5-3B
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=11008)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--rope-theta", type=float, default=1e6)
    p.add_argument("--recall", type=float, default=0.95)
    p.add_argument("--last-q", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=2.0, help="stop after this much training time")
    p.add_argument("--plan-export", help="folder of `sparsering export --to torch`: run the plan's ring")
    p.add_argument("--plan-yaml", help="plan YAML to simulate beside the measurement (default: a one-GPU plan)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    cfg = argparse.Namespace(**vars(args))
    cfg.table = torch.randperm(args.vocab // 2, generator=torch.Generator().manual_seed(1234))[: args.vocab // 2 - 2]
    device = torch.device(args.device)
    rank, world, rc = 0, 1, None
    if args.plan_export:
        import torch.distributed as dist
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        if device.type == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            device = torch.device("cuda", torch.cuda.current_device())
        rc = RingContext.from_export(args.plan_export, recall=args.recall, last_q=args.last_q)
        args.seq_len = rc.seq_len_tokens

        def attend(q, k, v):
            return sparse_ring_attention(q, k, v, rc)
    else:
        def attend(q, k, v):
            return sparsering.vs_sparse_attention(q, k, v, recall=args.recall, last_q=args.last_q)
    say = print if rank == 0 else (lambda *a, **k: None)
    torch.manual_seed(args.seed)
    model = Decoder(cfg, attend).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed + 1)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    say(f"model: {args.layers} layers, hidden {args.hidden}, heads {args.heads}/{args.kv_heads}, {params / 1e6:.0f}M "
        f"parameters; {args.seq_len} tokens; {gpu} x {world}; recall {args.recall}")
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    history, times, tokens_done = [], [], 0
    start = time.time()
    for step in range(args.steps):
        ids, targets, retrieval = make_batch(cfg, args.seq_len, gen, device)
        positions = torch.arange(args.seq_len, device=device)
        if rc is not None:
            positions = rc.position_ids(device)
            ids, targets, retrieval = (t.index_select(1, positions) for t in (ids, targets, retrieval))
        ATTENTION_MS.clear()
        STATE["timing"] = step >= 2
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.time()
        with autocast:
            logits = model(ids, positions)
            losses = F.cross_entropy(logits.float().view(-1, args.vocab), targets.view(-1), reduction="none",
                                     ignore_index=-100).view_as(targets)
        counted = (targets != -100)
        loss = losses.sum() / counted.sum().clamp_min(1)
        STATE["in_backward"] = True
        loss.backward()
        STATE["in_backward"] = False
        if rc is not None:
            rc.sync_gradients(model.parameters())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        took = time.time() - t0
        retrieval_loss = float((losses * retrieval).sum() / retrieval.sum().clamp_min(1))
        history.append((step, float(loss), retrieval_loss))
        if step >= 2:
            times.append(took)
            tokens_done += args.seq_len
        if step % 5 == 0 or step < 3:
            say(f"step {step:4d}  loss {float(loss):.4f}  retrieval loss {retrieval_loss:.4f}  {took:.2f} s", flush=True)
        if time.time() - start > args.minutes * 60:
            break
    summary = {"gpu": gpu, "world": world, "seq_len": args.seq_len, "layers": args.layers, "steps": len(history),
               "first_loss": history[0][1], "last_loss": history[-1][1],
               "loss_fell": history[-1][1] < history[0][1] - 0.1,
               "tokens_per_s": tokens_done / sum(times) if times else float("nan")}
    if device.type == "cuda":
        summary["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2 ** 30
        per_layer = {}
        for layer, events in ATTENTION_MS.items():
            got = {}
            opened = {}
            for kind, edge, event in events:
                if edge == "start":
                    opened[kind] = event
                elif kind in opened:
                    got.setdefault(kind, []).append(opened.pop(kind).elapsed_time(event))
            per_layer[layer] = {kind: sum(v) / len(v) for kind, v in got.items()}
        summary["attention_ms_per_layer"] = per_layer
        if rank == 0:
            summary["predicted"] = predicted(args, cfg, gpu, model, device, gen)
    say(json.dumps(summary, indent=1))
    if per_layer_ok := summary.get("attention_ms_per_layer"):
        fwd = sum(v.get("fwd", 0) for v in per_layer_ok.values()) / len(per_layer_ok)
        bwd = sum(v.get("bwd", 0) for v in per_layer_ok.values()) / len(per_layer_ok)
        pred = summary.get("predicted", {})
        say(f"attention per layer: measured fwd {fwd:.1f} ms, bwd {bwd:.1f} ms (recompute excluded); "
            f"sparsering simulate predicts fwd {pred.get('attention_fwd_ms', float('nan')):.1f} ms, "
            f"bwd {pred.get('attention_bwd_ms', float('nan')):.1f} ms from {pred.get('trace', pred.get('error'))}")
        for layer, measured in sorted(per_layer_ok.items()):
            p = pred.get("per_layer", {}).get(layer)
            if p and measured.get("fwd") and measured.get("bwd"):
                say(f"  layer {layer}: fwd {measured['fwd']:.2f} / {p['fwd']:.2f} ms ({p['fwd'] / measured['fwd'] - 1:+.1%}), "
                    f"bwd {measured['bwd']:.2f} / {p['bwd']:.2f} ms ({p['bwd'] / measured['bwd'] - 1:+.1%}) measured / predicted")
    say(f"tokens/s {summary['tokens_per_s']:.0f}, peak memory {summary.get('peak_memory_gib', float('nan')):.1f} GiB, "
        f"loss {summary['first_loss']:.3f} -> {summary['last_loss']:.3f}")
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
