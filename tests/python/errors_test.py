#!/usr/bin/python3
"""Bad input to the sparsering package raises a ValueError that names the problem before any
kernel runs (ctest labels torch, cpu): dtypes, devices, shapes, strides, GQA ratios, settings,
layouts, and the kernels library's location message.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import Checks, import_torch  # noqa: E402

torch = import_torch()

import sparsering  # noqa: E402
from sparsering import TokenLayout, vs_sparse_attention  # noqa: E402
from sparsering._library import ENV_VAR, KernelsLibraryMissing, kernels_library_path  # noqa: E402


def expect(checks, what, pieces, fn, error=ValueError):
    try:
        fn()
    except error as caught:
        message = str(caught)
        missing = [p for p in pieces if p not in message]
        checks.true(f"{what} -> {error.__name__}: {message}", not missing, f"message lacks {missing}")
        return
    except Exception as caught:  # pylint: disable=broad-except
        checks.true(what, False, f"raised {type(caught).__name__}: {caught}")
        return
    checks.true(what, False, "accepted")


def main():
    checks = Checks("errors_test")
    q = torch.randn(1, 4, 128, 64)
    k = torch.randn(1, 2, 128, 64)
    v = torch.randn(1, 2, 128, 64)
    expect(checks, "float16 on the CPU", ["float16"], lambda: vs_sparse_attention(q.half(), k.half(), v.half()))
    expect(checks, "mixed dtypes", ["share a dtype"], lambda: vs_sparse_attention(q, k.double(), v))
    expect(checks, "3-D q", ["4-D"], lambda: vs_sparse_attention(q[0], k, v))
    expect(checks, "not a tensor", ["torch.Tensor"], lambda: vs_sparse_attention(q.numpy(), k, v))
    expect(checks, "GQA ratio", ["multiple of key/value heads"],
           lambda: vs_sparse_attention(torch.randn(1, 3, 128, 64), k, v))
    expect(checks, "token mismatch", ["does not match"], lambda: vs_sparse_attention(q, k[:, :, :64], v[:, :, :64]))
    expect(checks, "k / v shapes", ["one shape"], lambda: vs_sparse_attention(q, k, v[:, :1]))
    expect(checks, "strided q", ["contiguous", "strides"],
           lambda: vs_sparse_attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v))
    expect(checks, "recall 0", ["recall"], lambda: vs_sparse_attention(q, k, v, recall=0.0))
    expect(checks, "recall 1.5", ["recall"], lambda: vs_sparse_attention(q, k, v, recall=1.5))
    expect(checks, "block_q 48", ["block_q", "multiple of 64"], lambda: vs_sparse_attention(q, k, v, block_q=48))
    expect(checks, "last_q 0", ["last_q"], lambda: vs_sparse_attention(q, k, v, last_q=0))
    expect(checks, "capacity 0", ["capacity"], lambda: vs_sparse_attention(q, k, v, capacity=0))
    expect(checks, "softmax_scale -1", ["softmax_scale"], lambda: vs_sparse_attention(q, k, v, softmax_scale=-1.0))
    expect(checks, "zigzag not divisible", ["zigzag", "2 x ranks"], lambda: TokenLayout("zigzag", 100, 4))
    expect(checks, "striped not divisible", ["granularity x ranks"], lambda: TokenLayout("striped", 96, 4, 16))
    expect(checks, "unknown layout", ["not one of"], lambda: TokenLayout("diagonal", 64, 1))
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = "/nonexistent/libsparsering_kernels.so"
    expect(checks, "kernels library missing", [ENV_VAR, "does not name a file"], kernels_library_path,
           KernelsLibraryMissing)
    if old is None:
        del os.environ[ENV_VAR]
    else:
        os.environ[ENV_VAR] = old
    checks.true("package version", bool(sparsering.__version__))
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
