"""The capture hook: `CaptureSession.record(layer, q, k)` takes one layer's post-RoPE queries and
keys from any attention module, runs the estimator on them, and streams the layer's candidates to
the trace writer (and, when asked, its Q/K to a dump for the C++ path). Models that do not use
the Hugging Face attention interface call record() from their own attention forward. Tested by
tests/capture/capture_test.py (a minimal decoder that calls the hook).
"""
import torch

from .candidates import select_candidates
from .estimator import estimate_masses


class CaptureSession:
    """Capture of one sample: `writer` is a StreamingTraceWriter (or None), `dump` a QkDumpWriter
    (or None). `softmax_scale` is the model's logit scale; `chunk_keys` bounds the estimator's
    working set."""

    def __init__(self, writer, sample, seq_len, last_q, softmax_scale, dump=None, chunk_keys=8192):
        self.writer, self.dump = writer, dump
        self.sample, self.seq_len, self.last_q = int(sample), int(seq_len), int(last_q)
        self.softmax_scale = float(softmax_scale)
        self.chunk_keys = int(chunk_keys)
        self.recorded = set()

    @torch.no_grad()
    def record(self, layer, q, k):
        """Records one layer. q: (B, Hq, Nq, D) or (Hq, Nq, D) post-RoPE queries, the sequence's
        last Nq >= last_q ones (usually all N; only the last last_q rows are read); k: (B, Hkv, N, D) or (Hkv, N, D) post-RoPE keys, before
        any GQA repeat. B must be 1. A layer recorded twice is an error."""
        layer = int(layer)
        if layer in self.recorded:
            raise ValueError(f"layer {layer} recorded twice in sample {self.sample}")
        if q.dim() == 4:
            if q.shape[0] != 1 or k.dim() != 4 or k.shape[0] != 1:
                raise ValueError(f"capture needs batch 1, got q {tuple(q.shape)}, k {tuple(k.shape)}")
            q, k = q[0], k[0]
        if q.shape[1] < self.last_q or q.shape[1] > self.seq_len or k.shape[1] != self.seq_len:
            raise ValueError(f"layer {layer}: k {tuple(k.shape)} must hold the {self.seq_len} tokens of the sample "
                             f"and q {tuple(q.shape)} at least its last {self.last_q}")
        q_last = q[:, -self.last_q:, :]
        if self.dump is not None:
            self.dump.write_layer(self.sample, layer, q_last, k)
        if self.writer is not None:
            vertical, slash = estimate_masses(q_last, k, self.softmax_scale, self.chunk_keys)
            v_index, v_mass = select_candidates(vertical, self.writer.slots["vertical"])
            s_offset, s_mass = select_candidates(slash, self.writer.slots["slash"])
            self.writer.write_layer(self.sample, layer, v_index, v_mass, s_offset, s_mass)
        self.recorded.add(layer)

    def finish(self, layers):
        """Checks that all `layers` were recorded and sets the sample's length in the writer."""
        missing = sorted(set(range(layers)) - self.recorded)
        if missing:
            raise ValueError(f"sample {self.sample}: layers {missing[:8]} were never recorded; does the model's "
                             f"attention reach the hook?")
        if self.writer is not None:
            self.writer.set_seq_len(self.sample, self.seq_len)
