#!/usr/bin/python3
"""CPU tests of the Python capture (traces/capture/sparsering_capture), run by ctest (label cpu):

    capture_test.py --cli BUILD/cli/sparsering --source REPO

1. The chunked estimator equals a float64 brute force over the full N x N attention matrix
   (causal softmax of every row, then column sums and diagonal sums of the last last_q rows), for
   fresh random Q/K, GQA ratios 1, 2 and 4, last_q from 1 to N, chunks smaller than and larger
   than N.
2. Candidate selection equals a brute-force sort (mass descending, position ascending, zeros
   left out, shares over the whole vector) on random masses with planted ties and zeros.
3. A minimal torch decoder that calls CaptureSession.record(layer, q, k) from its attention is
   captured into a trace; the file loads with the numpy reader and with `sparsering trace info`
   (which runs the C++ validation), and its candidates equal the brute force on the decoder's own
   Q/K. The Q/K dump of the same run, captured again with --qk, gives the same file contents.
4. If transformers is importable: a tiny randomly initialised Qwen2 and Llama model, captured by
   the command line with --random-tokens and --dump-qk, checked against the brute force on the
   dumped Q/K (bf16 model, so the dump holds exactly what the estimator saw).
5. Bad input: existing output without --force, missing layers, a broken dump: exit code 2 or a
   ValueError, and no output file.
Random inputs are fresh each run; every test prints its seed and SPARSERING_TEST_SEED=N repeats
it (tests/common/test_seed.py). Exits 77 (ctest: skipped) when torch is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from test_seed import numpy_rng, seed_for  # noqa: E402

try:
    import torch
except ImportError:
    print("torch is not importable: capture tests skipped")
    sys.exit(77)

ARGS = None


def brute_force_masses(q, k, last_q, scale):
    """float64 vertical and slash masses from the full causal attention matrix.
    q (Hq, N, D), k (Hkv, N, D) numpy; returns (vertical (Hq, N), slash (Hq, N))."""
    hq, n, _ = q.shape
    group = hq // k.shape[0]
    vertical = np.zeros((hq, n))
    slash = np.zeros((hq, n))
    causal = np.tril(np.ones((n, n), dtype=bool))
    for h in range(hq):
        scores = scale * (q[h].astype(np.float64) @ k[h // group].astype(np.float64).T)  # (N, N)
        scores = np.where(causal, scores, -np.inf)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        rows = p[n - last_q:]
        vertical[h] = rows.sum(axis=0)
        for t in range(last_q):
            query = n - last_q + t
            for key in range(query + 1):
                slash[h, query - key] += rows[t, key]
    return vertical, slash


def brute_force_candidates(mass, slots):
    """Reference selection on one (N,) float32 vector."""
    mass = np.asarray(mass, dtype=np.float32)
    total = float(np.sum(mass.astype(np.float64)))
    order = sorted((i for i in range(mass.size) if mass[i] > 0), key=lambda i: (-float(mass[i]), i))[:slots]
    positions = np.full(slots, -1, dtype=np.int32)
    shares = np.zeros(slots, dtype=np.float32)
    for n, i in enumerate(order):
        positions[n] = i
        shares[n] = np.float32(float(mass[i]) / total)
    return positions, shares


def rotary(x, base=10000.0):
    """Rotary position embedding of x (H, N, D), rotate-half convention."""
    _, n, d = x.shape
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = torch.arange(n, dtype=torch.float32).view(n, 1) * inv.view(1, -1)
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
    half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    return x * cos + half * sin


class MinimalDecoder(torch.nn.Module):
    """Embedding + layers of (RoPE attention with GQA, residual); calls the capture hook with the
    post-RoPE Q and K of every layer, rounded to bf16 like a bf16 model's would be."""

    def __init__(self, layers=3, hidden=48, q_heads=4, kv_heads=2, head_dim=16, vocab=97, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.q_heads, self.kv_heads, self.head_dim = q_heads, kv_heads, head_dim
        self.embed = torch.nn.Parameter(torch.randn(vocab, hidden, generator=g))
        self.wq = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(hidden, q_heads * head_dim, generator=g) * 0.4)
                                          for _ in range(layers)])
        self.wk = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(hidden, kv_heads * head_dim, generator=g) * 0.4)
                                          for _ in range(layers)])
        self.wv = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(hidden, kv_heads * head_dim, generator=g) * 0.2)
                                          for _ in range(layers)])
        self.wo = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(q_heads * head_dim, hidden, generator=g) * 0.1)
                                          for _ in range(layers)])
        self.seen = []  # (q, k) per layer as passed to the hook

    @torch.no_grad()
    def forward(self, ids, hook):
        x = self.embed[ids]  # (N, hidden)
        n = x.shape[0]
        group = self.q_heads // self.kv_heads
        for layer in range(len(self.wq)):
            q = rotary((x @ self.wq[layer]).view(n, self.q_heads, self.head_dim).transpose(0, 1))
            k = rotary((x @ self.wk[layer]).view(n, self.kv_heads, self.head_dim).transpose(0, 1))
            q, k = q.bfloat16().float(), k.bfloat16().float()
            v = (x @ self.wv[layer]).view(n, self.kv_heads, self.head_dim).transpose(0, 1)
            self.seen.append((q.clone(), k.clone()))
            hook(layer, q, k)
            scores = (q @ k.repeat_interleave(group, 0).transpose(1, 2)) * self.head_dim ** -0.5
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            out = torch.softmax(scores, dim=-1) @ v.repeat_interleave(group, 0)  # (Hq, N, D)
            x = x + out.transpose(0, 1).reshape(n, -1) @ self.wo[layer]
        return x


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ARGS.source, "traces", "capture"))
    return subprocess.run([sys.executable, "-m", "sparsering_capture", *args], capture_output=True, text=True, env=env)


def trace_info(path):
    result = subprocess.run([ARGS.cli, "trace", "info", path, "--format", "json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class EstimatorTest(unittest.TestCase):
    def test_equals_brute_force(self):
        from sparsering_capture import estimate_masses
        rng = numpy_rng(self.id())
        cases = [(1, 1, 8, 1, 1, 4), (4, 4, 16, 37, 5, 7), (4, 2, 16, 130, 64, 32), (8, 2, 32, 97, 97, 1000),
                 (4, 1, 8, 70, 13, 70)]
        for hq, hkv, d, n, last_q, chunk in cases:
            with self.subTest(hq=hq, hkv=hkv, n=n, last_q=last_q, chunk=chunk):
                q = rng.normal(size=(hq, n, d)).astype(np.float32) * 1.5
                k = rng.normal(size=(hkv, n, d)).astype(np.float32) * 1.5
                k[:, 0] *= 4  # a sink-like key column
                scale = d ** -0.5
                vertical, slash = estimate_masses(torch.from_numpy(q[:, n - last_q:]), torch.from_numpy(k), scale, chunk)
                v_ref, s_ref = brute_force_masses(q, k, last_q, scale)
                np.testing.assert_allclose(vertical.numpy(), v_ref, rtol=2e-5, atol=2e-6)
                np.testing.assert_allclose(slash.numpy(), s_ref, rtol=2e-5, atol=2e-6)
                np.testing.assert_allclose(vertical.numpy().sum(axis=1), last_q, rtol=1e-5)

    def test_rejects_bad_shapes(self):
        from sparsering_capture import estimate_masses
        with self.assertRaises(ValueError):
            estimate_masses(torch.zeros(3, 4, 8), torch.zeros(2, 10, 8), 1.0)  # 3 heads over 2 KV heads
        with self.assertRaises(ValueError):
            estimate_masses(torch.zeros(2, 11, 8), torch.zeros(2, 10, 8), 1.0)  # last_q > N


class CandidatesTest(unittest.TestCase):
    def test_equals_brute_force(self):
        from sparsering_capture import select_candidates
        rng = numpy_rng(self.id())
        for n, slots in ((1, 1), (50, 10), (200, 300), (1000, 64), (64, 0)):
            with self.subTest(n=n, slots=slots):
                mass = rng.integers(0, 6, size=(3, n)).astype(np.float32) / 4  # many ties and zeros
                mass[1] = rng.random(n).astype(np.float32)
                mass[2] = 0
                positions, shares = select_candidates(torch.from_numpy(mass), slots)
                for h in range(3):
                    ref_positions, ref_shares = brute_force_candidates(mass[h], slots)
                    np.testing.assert_array_equal(positions[h], ref_positions)
                    np.testing.assert_array_equal(shares[h], ref_shares)


class CaptureFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def capture_decoder(self, out, dump=None, n=300, last_q=24, slots=(40, 60), samples=2):
        from sparsering_capture import CaptureSession, QkDumpWriter, StreamingTraceWriter
        seed = seed_for(self.id())
        model = MinimalDecoder(seed=seed)
        scale = model.head_dim ** -0.5
        layers = len(model.wq)
        writer = StreamingTraceWriter(out, samples, layers, model.q_heads, slots[0], slots[1], "minimal-decoder",
                                      last_q=last_q, provenance={"test": "capture_test.py"})
        dumper = None
        if dump:
            dumper = QkDumpWriter(dump, "minimal-decoder", layers, model.q_heads, model.kv_heads, model.head_dim,
                                  last_q, scale)
        rng = np.random.default_rng(seed)
        lengths = []
        with writer:
            for s in range(samples):
                length = n - 37 * s
                lengths.append(length)
                session = CaptureSession(writer, s, length, last_q, scale, dump=dumper, chunk_keys=64)
                model(torch.from_numpy(rng.integers(0, 97, size=length)), session.record)
                session.finish(layers)
        if dumper:
            dumper.close()
        return model, lengths, scale

    def test_decoder_capture_loads_and_matches_brute_force(self):
        sys.path.insert(0, os.path.join(ARGS.source, "traces", "python"))
        from sparsering_trace import read_trace
        out = os.path.join(self.dir.name, "t.safetensors")
        dump = os.path.join(self.dir.name, "dump")
        last_q, slots = 24, (40, 60)
        model, lengths, scale = self.capture_decoder(out, dump, last_q=last_q, slots=slots)
        trace = read_trace(out)
        self.assertEqual(trace.metadata["source"], "captured")
        self.assertEqual(trace.metadata["last_q"], str(last_q))
        self.assertEqual(trace.tensors["vertical.index"].shape, (2, 3, 4, slots[0]))
        self.assertEqual(trace.tensors["slash.mass"].shape, (2, 3, 4, slots[1]))
        self.assertEqual(trace.tensors["sample.seq_len"].tolist(), lengths)
        for index, (q, k) in enumerate(model.seen):
            s, layer = divmod(index, 3)
            v_ref, s_ref = brute_force_masses(q.numpy(), k.numpy(), last_q, scale)
            for h in range(4):
                positions = trace.tensors["vertical.index"][s, layer, h]
                offsets = trace.tensors["slash.offset"][s, layer, h]
                # Same candidates as the brute force where masses are not within rounding of a tie.
                for got, masses, ref, slot_count in ((positions, trace.tensors["vertical.mass"][s, layer, h], v_ref[h], slots[0]),
                                                     (offsets, trace.tensors["slash.mass"][s, layer, h], s_ref[h], slots[1])):
                    ref_order = np.lexsort((np.arange(ref.size), -ref))[:slot_count]
                    kept = got >= 0
                    np.testing.assert_allclose(masses[kept], ref[got[kept]] / ref.sum(), rtol=1e-4, atol=1e-7)
                    np.testing.assert_allclose(np.sort(masses[kept])[::-1], ref[ref_order[:kept.sum()]] / ref.sum(),
                                               rtol=1e-4, atol=1e-7)
        info = trace_info(out)
        self.assertEqual(info["trace"]["samples"], 2)
        self.assertEqual(info["trace"]["layers"], 3)
        self.assertEqual(info["trace"]["seq_len_tokens"], lengths)

        # The dump, captured again through the command line with another chunk size, gives identical
        # tensors: the estimator's result does not depend on the chunking (estimator.py).
        again = os.path.join(self.dir.name, "again.safetensors")
        result = run_cli("--qk", dump, "--out", again, "--vertical-slots", str(slots[0]), "--slash-slots", str(slots[1]),
                         "--device", "cpu", "--chunk-keys", "50")
        self.assertEqual(result.returncode, 0, result.stderr)
        second = read_trace(again)
        for name in ("vertical.index", "slash.offset", "sample.seq_len"):
            np.testing.assert_array_equal(second.tensors[name], trace.tensors[name])
        for name in ("vertical.mass", "slash.mass"):
            np.testing.assert_allclose(second.tensors[name], trace.tensors[name], rtol=1e-5, atol=1e-8)

    def test_missing_layer_writes_nothing(self):
        from sparsering_capture import CaptureSession, StreamingTraceWriter
        out = os.path.join(self.dir.name, "partial.safetensors")
        writer = StreamingTraceWriter(out, 1, 2, 2, 4, 4, "m")
        session = CaptureSession(writer, 0, 16, 4, 0.5)
        session.record(0, torch.randn(2, 16, 8), torch.randn(1, 16, 8))
        with self.assertRaises(ValueError):
            session.record(0, torch.randn(2, 16, 8), torch.randn(1, 16, 8))  # twice
        with self.assertRaises(ValueError):
            session.finish(2)
        with self.assertRaises(ValueError):
            writer.close()
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_cli_bad_input(self):
        out = os.path.join(self.dir.name, "exists.safetensors")
        open(out, "w").close()
        result = run_cli("--qk", self.dir.name, "--out", out, "--device", "cpu")
        self.assertEqual(result.returncode, 2)
        self.assertIn("already exists", result.stderr)
        fresh = os.path.join(self.dir.name, "fresh.safetensors")
        result = run_cli("--qk", self.dir.name, "--out", fresh, "--device", "cpu")  # no manifest
        self.assertEqual(result.returncode, 2)
        self.assertIn("qk_dump.json", result.stderr)
        with open(os.path.join(self.dir.name, "qk_dump.json"), "w") as f:
            json.dump({"format": "sparsering-qk-dump", "version": 1, "layers": 1, "q_heads": 2, "kv_heads": 1,
                       "head_dim": 8, "last_q": 4, "softmax_scale": 0.3,
                       "samples": [{"seq_len": 16, "files": ["missing.safetensors"]}]}, f)
        result = run_cli("--qk", self.dir.name, "--out", fresh, "--device", "cpu")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertFalse(os.path.exists(fresh))
        result = run_cli("--out", fresh, "--device", "cpu")
        self.assertEqual(result.returncode, 2)
        self.assertFalse(os.path.exists(fresh))


@unittest.skipUnless(__import__("importlib").util.find_spec("transformers"), "transformers is not importable")
class HuggingFaceTest(unittest.TestCase):
    def test_tiny_models(self):
        from transformers import LlamaConfig, Qwen2Config
        from sparsering_capture import QkDumpReader
        sys.path.insert(0, os.path.join(ARGS.source, "traces", "python"))
        from sparsering_trace import read_trace
        configs = {"qwen2": Qwen2Config(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512),
                   "llama": LlamaConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=512)}
        for name, config in configs.items():
            with self.subTest(model=name), tempfile.TemporaryDirectory() as work:
                model_dir = os.path.join(work, name)
                config.save_pretrained(model_dir)
                out, dump = os.path.join(work, "t.safetensors"), os.path.join(work, "dump")
                result = run_cli("--model", model_dir, "--random-tokens", "--seq-len", "200", "--out", out,
                                 "--dump-qk", dump, "--last-q", "16", "--slots", "32", "--device", "cpu", "--dtype", "bf16")
                self.assertEqual(result.returncode, 0, result.stderr)
                trace = read_trace(out)
                reader = QkDumpReader(dump)
                for layer in range(2):
                    q_last, k = reader.layer(0, layer)
                    q_full = torch.zeros(q_last.shape[0], 200, q_last.shape[2])
                    q_full[:, -16:] = q_last
                    v_ref, _ = brute_force_masses(q_full.numpy(), k.numpy(), 16, (64 // 4) ** -0.5)
                    got = trace.tensors["vertical.index"][0, layer]
                    masses = trace.tensors["vertical.mass"][0, layer]
                    for h in range(4):
                        kept = got[h] >= 0
                        np.testing.assert_allclose(masses[h][kept], v_ref[h][got[h][kept]] / 16, rtol=1e-4, atol=1e-7)
                self.assertEqual(trace_info(out)["trace"]["layers"], 2)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--source", required=True)
    ARGS, rest = parser.parse_known_args()
    sys.path.insert(0, os.path.join(ARGS.source, "traces", "capture"))
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
