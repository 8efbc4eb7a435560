#!/usr/bin/env python3
"""Tests the training example's prediction path (examples/train_long_context.py) on the CPU: the
trace captured from the example's own model holds every layer and head of its shape and the
sequence length, the model config written for `simulate` parses with the example's shape, and the
per-layer prediction comes from that trace (one entry per layer, positive times). A model whose
layers have different weights must not get identical captured candidates in every layer."""
import argparse
import os
import sys

from test_support import import_torch, test_seed

torch = import_torch()
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, os.path.join(REPO, "traces", "capture"))
import train_long_context as example  # noqa: E402
from sparsering_capture.safetensors_io import read_header, read_tensor  # noqa: E402


def dense_causal(q, k, v):
    """Reference attention for the test model (any torch: no SDPA needed)."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1).float(), v.repeat_interleave(rep, 1).float()
    s = (q.float() @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ v).to(q.dtype)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cli", required=True)
    p.add_argument("--workdir", required=True)
    opts = p.parse_args()
    os.environ["SPARSERING_CLI"] = opts.cli
    seed = test_seed("example_prediction")
    torch.manual_seed(seed)
    args = argparse.Namespace(seq_len=2048, layers=3, hidden=256, heads=4, kv_heads=2, ffn=512, vocab=1024,
                              rope_theta=1e6, recall=0.95, last_q=64, plan_yaml=None)
    cfg = argparse.Namespace(**vars(args))
    cfg.table = torch.randperm(args.vocab // 2, generator=torch.Generator().manual_seed(1234))[: args.vocab // 2 - 2]
    model = example.Decoder(cfg, dense_causal)
    gen = torch.Generator().manual_seed(seed)

    os.makedirs(opts.workdir, exist_ok=True)
    trace = os.path.join(opts.workdir, "captured.safetensors")
    if os.path.exists(trace):
        os.remove(trace)
    example.capture_trace(model, cfg, args, torch.device("cpu"), gen, trace)
    _, entries = read_header(trace)
    seq = read_tensor(trace, entries, "sample.seq_len")
    assert int(seq.reshape(-1)[0]) == args.seq_len, seq
    index = read_tensor(trace, entries, "vertical.index")
    assert tuple(index.shape)[:3] == (1, args.layers, args.heads), index.shape
    assert not all((index[0, 0] == index[0, layer]).all() for layer in range(1, args.layers)), \
        "every layer captured the same candidates: the hook did not see each layer's own q and k"
    assert all(block.capture is None for block in model.blocks), "the capture hook was left installed"

    model_yaml = os.path.join(opts.workdir, "model.yaml")
    example.example_model_yaml(cfg, model_yaml)
    text = open(model_yaml).read()
    for key, value in (("layers", 3), ("hidden_size", 256), ("q_heads", 4), ("kv_heads", 2), ("head_dim", 64)):
        assert f"\n{key}: {value}\n" in text, (key, text)

    pred = example.predicted(args, cfg, "NVIDIA H200", model, torch.device("cpu"), gen)
    assert "error" not in pred, pred
    assert sorted(pred["per_layer"]) == list(range(args.layers)), pred
    assert all(v["fwd"] > 0 and v["bwd"] > 0 for v in pred["per_layer"].values()), pred
    assert pred["trace"].startswith("the trace captured"), pred
    print("example_prediction: ok", pred["attention_fwd_ms"], pred["attention_bwd_ms"])


if __name__ == "__main__":
    main()
