"""Captures sparsering traces (docs/formats.md section 1) from real PyTorch models.

The estimator of docs/algorithm.md section 2 runs on the post-RoPE queries and keys of every layer: the
last `last_q` queries score all keys (causal softmax, computed in float64), and each key column's and each
diagonal offset's summed probability becomes a candidate with its share of the mass. Layers are
streamed to the trace file as they are captured, so memory stays bounded at 128K+ tokens.

    from sparsering_capture import CaptureSession, StreamingTraceWriter
    writer = StreamingTraceWriter("t.safetensors", samples=1, layers=L, heads=H,
                                  vertical_slots=8192, slash_slots=8192, model="my-model")
    session = CaptureSession(writer, sample=0, seq_len=N, last_q=64, softmax_scale=D ** -0.5)
    session.record(layer, q, k)   # from any attention module: q (B, Hq, N, D), k (B, Hkv, N, D)
    writer.set_seq_len(0, N); writer.close()

The command line is `python3 -m sparsering_capture --help`; Hugging Face models are hooked by
sparsering_capture.hf_hooks. Documentation: docs/capture.md. Tests: tests/capture/.
"""
from .candidates import select_candidates
from .estimator import estimate_masses
from .qk_dump import QkDumpReader, QkDumpWriter
from .session import CaptureSession
from .trace_writer import StreamingTraceWriter

__all__ = ["CaptureSession", "QkDumpReader", "QkDumpWriter", "StreamingTraceWriter", "estimate_masses",
           "select_candidates"]
