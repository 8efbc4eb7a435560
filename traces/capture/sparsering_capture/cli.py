"""Command line of the capture (docs/capture.md):

    python3 -m sparsering_capture --model DIR (--text FILE | --tokens FILE | --random-tokens)
        --seq-len N --out T.safetensors [--samples S] [--last-q 64] [--slots K | --vertical-slots K
        --slash-slots K] [--dtype bf16] [--device cuda] [--dump-qk DIR] [--report R.json] [--force]
    python3 -m sparsering_capture --qk DIR --out T.safetensors [--slots K ...]

The first form runs the model (local weights, or a random initialisation of a config-only
folder) on S consecutive windows of N tokens and captures every layer; the second estimates from
a Q/K dump (the same input `sparsering trace capture --qk DIR` reads). Exit codes: 0, 2 for bad
input (the message names the flag or file), 1 for anything else. Tested by
tests/capture/capture_test.py.
"""
import argparse
import datetime
import json
import os
import re
import sys
import time

import numpy as np
import torch

from .qk_dump import QkDumpReader, QkDumpWriter
from .session import CaptureSession
from .trace_writer import StreamingTraceWriter

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class InputError(Exception):
    """Bad flags or input files: exit code 2."""


def parse_tokens(text):
    """'131072', '128K', '1M' -> tokens (K = 1024)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)\s*", str(text))
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a token count like 131072 or 128K")
    return int(match.group(1)) * {"": 1, "k": 1024, "m": 1 << 20}[match.group(2).lower()]


def build_parser():
    p = argparse.ArgumentParser(prog="python3 -m sparsering_capture",
                                description="Capture a sparsering trace (vertical/slash candidates with their mass) "
                                            "from a model's post-RoPE attention.")
    p.add_argument("--model", help="local model folder (config.json, with or without weights)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--text", help="UTF-8 text file, tokenized with the model folder's tokenizer")
    source.add_argument("--tokens", help="token ids: .npy, or a text file of whitespace-separated integers")
    source.add_argument("--random-tokens", action="store_true", help="seeded uniform random token ids")
    source.add_argument("--qk", metavar="DIR", help="estimate from a Q/K dump instead of running a model")
    p.add_argument("--seq-len", type=parse_tokens, help="tokens per sample (e.g. 131072 or 128K)")
    p.add_argument("--samples", type=int, default=1, help="consecutive windows of --seq-len tokens (default 1)")
    p.add_argument("--out", help="trace file to write (.safetensors)")
    p.add_argument("--last-q", type=int, default=64, help="queries the estimator scores (default 64)")
    p.add_argument("--slots", type=int, help="candidate slots per head for both verticals and slashes")
    p.add_argument("--vertical-slots", type=int, help="vertical candidate slots per head (default 8192)")
    p.add_argument("--slash-slots", type=int, help="slash candidate slots per head (default 8192)")
    p.add_argument("--dtype", choices=sorted(_DTYPES), default="bf16", help="model dtype (default bf16)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dump-qk", metavar="DIR", help="also write every layer's post-RoPE Q (last rows) and K")
    p.add_argument("--chunk-keys", type=int, default=8192, help="keys per estimator chunk (memory bound)")
    p.add_argument("--seed", type=int, default=0, help="seed of random weights and random tokens")
    p.add_argument("--model-name", help="model name stored in the trace (default: the folder name)")
    p.add_argument("--report", help="write wall time, peak GPU memory and shapes as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite existing outputs")
    return p


def _slots(args):
    vertical = args.vertical_slots if args.vertical_slots is not None else (args.slots if args.slots is not None else 8192)
    slash = args.slash_slots if args.slash_slots is not None else (args.slots if args.slots is not None else 8192)
    if vertical < 0 or slash < 0:
        raise InputError(f"slot counts must be >= 0, got --vertical-slots {vertical}, --slash-slots {slash}")
    return vertical, slash


def _load_tokens(args, config_dir):
    needed = args.seq_len * args.samples
    if args.random_tokens:
        from transformers import AutoConfig
        vocab = AutoConfig.from_pretrained(config_dir).vocab_size
        return np.random.default_rng(args.seed).integers(0, vocab, size=needed, dtype=np.int64)
    if args.tokens:
        try:
            ids = np.load(args.tokens) if args.tokens.endswith(".npy") else np.loadtxt(args.tokens, dtype=np.int64, ndmin=1)
        except (OSError, ValueError) as e:
            raise InputError(f"--tokens {args.tokens}: cannot read token ids: {e}") from e
        ids = np.asarray(ids).reshape(-1)
        if not np.issubdtype(ids.dtype, np.integer) or (ids.size and ids.min() < 0):
            raise InputError(f"--tokens {args.tokens}: token ids must be non-negative integers")
    elif args.text:
        from transformers import AutoTokenizer
        try:
            with open(args.text, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--text {args.text}: {e}") from e
        ids = np.asarray(AutoTokenizer.from_pretrained(config_dir)(text)["input_ids"], dtype=np.int64)
    else:
        raise InputError("give one of --text FILE, --tokens FILE, --random-tokens or --qk DIR")
    if ids.size < needed:
        raise InputError(f"the input has {ids.size} tokens, fewer than --seq-len {args.seq_len} x --samples {args.samples}")
    return ids[:needed].astype(np.int64)


def _provenance(args, extra):
    provenance = {"capture": "sparsering_capture (traces/capture)", "command": " ".join(sys.argv),
                  "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "torch": torch.__version__, "seed": str(args.seed)}
    provenance.update({k: str(v) for k, v in extra.items()})
    return provenance


def _capture_from_dump(args, vertical_slots, slash_slots):
    reader = QkDumpReader(args.qk)
    m = reader.manifest
    samples = m["samples"]
    provenance = _provenance(args, {"input": f"Q/K dump {args.qk}", "softmax_scale": m.get("softmax_scale")})
    writer = StreamingTraceWriter(args.out, len(samples), m["layers"], m["q_heads"], vertical_slots, slash_slots,
                                  m.get("model", "unknown"), last_q=m["last_q"], provenance=provenance,
                                  overwrite=args.force)
    with writer:
        for s, sample in enumerate(samples):
            session = CaptureSession(writer, s, sample["seq_len"], m["last_q"], m["softmax_scale"],
                                     chunk_keys=args.chunk_keys)
            for layer in range(m["layers"]):
                q_last, k = reader.layer(s, layer)
                session.record(layer, q_last.to(args.device), k.to(args.device))
            session.finish(m["layers"])
    return {"layers": m["layers"], "heads": m["q_heads"], "samples": len(samples)}


def _capture_from_model(args, vertical_slots, slash_slots):
    from .hf_hooks import attention_shape, capture_attention, load_model
    if not args.model:
        raise InputError("--model DIR is required (or --qk DIR)")
    if not args.seq_len or args.seq_len < args.last_q:
        raise InputError(f"--seq-len must be given and >= --last-q {args.last_q}")
    if args.samples < 1:
        raise InputError(f"--samples must be >= 1, got {args.samples}")
    tokens = _load_tokens(args, args.model)
    model, config = load_model(args.model, _DTYPES[args.dtype], args.device, args.seed)
    layers, q_heads, kv_heads, head_dim = attention_shape(config)
    scale = head_dim ** -0.5
    name = args.model_name or os.path.basename(os.path.normpath(args.model))
    extra = {"input": args.text or args.tokens or f"random tokens (seed {args.seed})", "dtype": args.dtype,
             "architecture": type(model).__name__, "kv_heads": kv_heads, "softmax_scale": scale}
    if args.device.startswith("cuda"):
        extra["gpu"] = torch.cuda.get_device_name(torch.device(args.device))
    try:
        import transformers
        extra["transformers"] = transformers.__version__
    except ImportError:
        pass
    writer = None
    if args.out:
        writer = StreamingTraceWriter(args.out, args.samples, layers, q_heads, vertical_slots, slash_slots, name,
                                      last_q=args.last_q, provenance=_provenance(args, extra), overwrite=args.force)
    dump = None
    if args.dump_qk:
        dump = QkDumpWriter(args.dump_qk, name, layers, q_heads, kv_heads, head_dim, args.last_q, scale,
                            overwrite=args.force)
    session_ref = [None]
    try:
        with torch.no_grad(), capture_attention(model, session_ref):
            for s in range(args.samples):
                ids = torch.from_numpy(tokens[s * args.seq_len:(s + 1) * args.seq_len]).to(args.device).view(1, -1)
                session_ref[0] = CaptureSession(writer, s, args.seq_len, args.last_q, scale, dump=dump,
                                                chunk_keys=args.chunk_keys)
                model(input_ids=ids, use_cache=False)
                session_ref[0].finish(layers)
        if writer is not None:
            writer.close()
        if dump is not None:
            dump.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return {"layers": layers, "heads": q_heads, "kv_heads": kv_heads, "head_dim": head_dim, "samples": args.samples}


def main(argv=None):
    args = build_parser().parse_args(argv)
    start = time.time()
    try:
        if not args.out and not args.dump_qk:
            raise InputError("nothing to write: give --out T.safetensors and/or --dump-qk DIR")
        if args.qk and not args.out:
            raise InputError("--qk DIR needs --out T.safetensors")
        if args.last_q < 1:
            raise InputError(f"--last-q must be >= 1, got {args.last_q}")
        if args.out and os.path.exists(args.out) and not args.force:
            raise InputError(f"{args.out} already exists; pass --force to overwrite it")
        vertical_slots, slash_slots = _slots(args)
        if args.device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32 matmuls in the model
            torch.cuda.reset_peak_memory_stats()
        shape = (_capture_from_dump if args.qk else _capture_from_model)(args, vertical_slots, slash_slots)
    except (InputError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # malformed files and shapes are input errors too
        print(f"error: {e}", file=sys.stderr)
        return 2
    wall_s = time.time() - start
    report = dict(shape, out=args.out, dump_qk=args.dump_qk, seq_len=args.seq_len, wall_s=round(wall_s, 3),
                  device=args.device)
    if args.device.startswith("cuda"):
        report["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
        report["gpu"] = torch.cuda.get_device_name()
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    print(f"captured {shape['samples']} sample(s) x {shape['layers']} layers x {shape['heads']} heads in {wall_s:.1f} s"
          + (f", peak GPU memory {report['peak_gpu_bytes'] / 2**30:.2f} GiB" if "peak_gpu_bytes" in report else "")
          + (f" -> {args.out}" if args.out else "") + (f", Q/K dump {args.dump_qk}" if args.dump_qk else ""))
    return 0
