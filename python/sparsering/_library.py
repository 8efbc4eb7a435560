"""Finds and loads libsparsering_kernels.so: the path in SPARSERING_KERNELS_LIB, else the newest
build of the source tree this package sits in (build*/kernels/cuda/ or build*/*/kernels/cuda/). Covered by
tests/python/op_cpu_test.py (error message) and tests/python/gpu_test.py.
"""
from __future__ import annotations

import glob
import os

ENV_VAR = "SPARSERING_KERNELS_LIB"
_loaded = {}


class KernelsLibraryMissing(RuntimeError):
    """CUDA tensors were given but libsparsering_kernels.so cannot be found or loaded."""


def source_root() -> str | None:
    """The repository root when the package runs from the source tree (python/sparsering), else None."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.isfile(os.path.join(root, "kernels", "cuda", "capi", "sparsering_kernels.h")) else None


def kernels_library_path() -> str:
    """Path of the library; raises KernelsLibraryMissing saying where it looked."""
    path = os.environ.get(ENV_VAR)
    if path:
        if not os.path.isfile(path):
            raise KernelsLibraryMissing(f"{ENV_VAR}={path} does not name a file")
        return path
    root = source_root()
    found = [path for pattern in ("build*/kernels/cuda/libsparsering_kernels.so",
                                  "build*/*/kernels/cuda/libsparsering_kernels.so")
             for path in glob.glob(os.path.join(root, pattern))] if root else []
    if not found:
        where = f"{root}/build*/[*/]kernels/cuda/" if root else "(no source tree around the installed package)"
        raise KernelsLibraryMissing(
            f"libsparsering_kernels.so not found: set {ENV_VAR} or build the target sparsering_kernels_capi "
            f"(cmake -DSPARSERING_CUDA=ON; looked in {where}); CUDA tensors need it, CPU tensors run the torch path")
    return max(found, key=os.path.getmtime)


def load_kernels():
    """The loaded SparseringKernels binding (one per process)."""
    path = kernels_library_path()
    if path not in _loaded:
        from .capi import SparseringKernels
        try:
            _loaded[path] = SparseringKernels(path)
        except OSError as error:
            raise KernelsLibraryMissing(f"cannot load {path}: {error}") from error
    return _loaded[path]
