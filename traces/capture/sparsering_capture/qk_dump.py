"""The Q/K dump: the post-RoPE last queries and all keys of every layer, the input of the C++
capture path (`sparsering trace capture --qk DIR`, cli/gpu/trace_capture_command.cpp).

DIR/qk_dump.json (the manifest):
    {"format": "sparsering-qk-dump", "version": 1, "model": str, "layers": L, "q_heads": Hq,
     "kv_heads": Hkv, "head_dim": D, "last_q": T, "softmax_scale": float,
     "samples": [{"seq_len": N, "files": ["s0000_l0000.safetensors", ...one per layer]}, ...]}
DIR/sNNNN_lNNNN.safetensors: tensors "q_last" BF16 (Hq, T, D) and "k" BF16 (Hkv, N, D), the bf16
the CUDA estimator reads. The manifest is written last, so a dump without one is incomplete.
Tested by tests/capture/capture_test.py (round trip) and tests/capture/agreement_test.py.
"""
import json
import math
import os

import numpy as np
import torch

from .safetensors_io import read_header, read_tensor, write_file

MANIFEST = "qk_dump.json"


def _bf16_bits(tensor):
    """bf16 bit patterns (uint16 numpy) of a float tensor, rounded to nearest even like torch."""
    return tensor.detach().to(torch.bfloat16).contiguous().cpu().view(torch.int16).numpy().view(np.uint16)


class QkDumpWriter:
    """Writes one file per (sample, layer) and the manifest on close()."""

    def __init__(self, directory, model, layers, q_heads, kv_heads, head_dim, last_q, softmax_scale, overwrite=False):
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        manifest = os.path.join(self.directory, MANIFEST)
        if os.path.exists(manifest) and not overwrite:
            raise FileExistsError(f"{manifest} already exists; pass --force to overwrite it")
        self.manifest = {"format": "sparsering-qk-dump", "version": 1, "model": model, "layers": int(layers),
                         "q_heads": int(q_heads), "kv_heads": int(kv_heads), "head_dim": int(head_dim),
                         "last_q": int(last_q), "softmax_scale": float(softmax_scale), "samples": []}

    def write_layer(self, sample, layer, q_last, k):
        """q_last (Hq, T, D), k (Hkv, N, D) float tensors of one (sample, layer)."""
        m = self.manifest
        while len(m["samples"]) <= sample:
            m["samples"].append({"seq_len": None, "files": [None] * m["layers"]})
        expected_q = (m["q_heads"], m["last_q"], m["head_dim"])
        if tuple(q_last.shape) != expected_q or k.dim() != 3 or tuple(k.shape[::2]) != (m["kv_heads"], m["head_dim"]):
            raise ValueError(f"layer {layer}: q_last {tuple(q_last.shape)} / k {tuple(k.shape)} do not match the dump's "
                             f"(Hq, T, D) = {expected_q} and Hkv = {m['kv_heads']}")
        name = f"s{sample:04d}_l{layer:04d}.safetensors"
        write_file(os.path.join(self.directory, name), [("q_last", "BF16", _bf16_bits(q_last)), ("k", "BF16", _bf16_bits(k))],
                   {"sample": sample, "layer": layer})
        m["samples"][sample]["files"][layer] = name
        m["samples"][sample]["seq_len"] = int(k.shape[1])

    def close(self):
        """Writes the manifest (atomically) once every (sample, layer) has its file."""
        for s, sample in enumerate(self.manifest["samples"]):
            if None in sample["files"]:
                raise ValueError(f"Q/K dump: sample {s} layer {sample['files'].index(None)} was never recorded")
        path = os.path.join(self.directory, MANIFEST)
        with open(path + ".tmp", "w") as f:
            json.dump(self.manifest, f, indent=1)
        os.replace(path + ".tmp", path)


class QkDumpReader:
    """Reads a dump written by QkDumpWriter; layer() returns float32 torch tensors."""

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        path = os.path.join(self.directory, MANIFEST)
        try:
            with open(path) as f:
                self.manifest = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: cannot read the Q/K dump manifest: {e}") from e
        m = self.manifest
        if not isinstance(m, dict) or m.get("format") != "sparsering-qk-dump" or m.get("version") != 1:
            raise ValueError(f"{path}: format/version must be sparsering-qk-dump/1")
        for key in ("layers", "q_heads", "kv_heads", "head_dim", "last_q"):
            if type(m.get(key)) is not int or m[key] < 1:
                raise ValueError(f"{path}: '{key}' must be a positive integer, got {m.get(key)!r}")
        scale = m.get("softmax_scale")
        if type(scale) not in (int, float) or not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"{path}: 'softmax_scale' must be a positive number, got {scale!r}")
        if not isinstance(m.get("samples"), list) or not m["samples"]:
            raise ValueError(f"{path}: 'samples' must be a non-empty list")

    def layer(self, sample, layer):
        """(q_last (Hq, T, D), k (Hkv, N, D)) of one (sample, layer) as float32 tensors."""
        m = self.manifest
        try:
            name = m["samples"][sample]["files"][layer]
            seq_len = m["samples"][sample]["seq_len"]
        except (IndexError, KeyError, TypeError) as e:
            raise ValueError(f"{self.directory}/{MANIFEST}: no file for sample {sample} layer {layer}") from e
        if not isinstance(name, str) or os.path.basename(name) != name or type(seq_len) is not int or seq_len < 1:
            raise ValueError(f"{self.directory}/{MANIFEST}: sample {sample} layer {layer}: bad file name {name!r} "
                             f"or seq_len {seq_len!r}")
        path = os.path.join(self.directory, name)
        try:
            _, entries = read_header(path)
        except OSError as e:
            raise ValueError(f"{path}: cannot read: {e}") from e
        out = []
        for tensor, shape in (("q_last", (m["q_heads"], m["last_q"], m["head_dim"])),
                              ("k", (m["kv_heads"], seq_len, m["head_dim"]))):
            if tensor not in entries or entries[tensor][0] != "BF16" or tuple(entries[tensor][1]) != shape:
                raise ValueError(f"{path}: tensor '{tensor}' must be BF16 of shape {list(shape)}")
            bits = read_tensor(path, entries, tensor).astype(np.int32) << 16
            out.append(torch.from_numpy(bits.view(np.float32).copy()))
        return out[0], out[1]
