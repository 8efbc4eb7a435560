"""sparsering for PyTorch: dynamic vertical-slash sparse attention on one device
(vs_sparse_attention), the distributed layer that runs a plan exported with
`sparsering export --to torch` (sparse_ring_attention), a Hugging Face attention drop-in
(sparsering.hf) and the planner's CLI from Python (sparsering.plan). Guide: docs/python.md.
"""
from ._library import KernelsLibraryMissing, kernels_library_path, load_kernels  # noqa: F401
from .kept_sets import KeptSets  # noqa: F401
from .layout import TokenLayout  # noqa: F401
from .vs_attention import vs_sparse_attention  # noqa: F401

__version__ = "0.1.0"
