"""ctypes binding of libsparsering_kernels.so (kernels/cuda/capi/sparsering_kernels.h) for torch tensors.

The library takes raw device pointers and a cudaStream_t; this module passes torch tensors'
data_ptr() and the current torch stream, after checking dtypes, devices, shapes and contiguity,
so a wrong call raises ValueError here instead of reading the wrong memory there.

    lib = SparseringKernels("build/kernels/cuda/libsparsering_kernels.so")
    index = DeviceIndex.from_numpy(block_q=128, block_k=128, q_blocks=..., tile_offsets=..., ...)
    lib.sparse_attn_fwd(q, k, v, index, out, lse)             # out, lse: running fp32 state

`copy_index` turns an index built on the GPU into torch tensors (a SparseIndex), which autograd
can save and the backward can reuse. Tested by kernels/bench/check_capi.py (against a dense torch
reference on the GPU) and tests/python/gpu_test.py.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import torch

from .index import SparseIndex

SR_OK, SR_CUDA_ERROR, SR_INPUT_ERROR = 0, 1, 2
LAYOUTS = {"contiguous": 0, "zigzag": 1, "striped": 2}


class _Problem(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int32), ("q_heads", ctypes.c_int32), ("kv_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32), ("q_len", ctypes.c_int64), ("kv_len", ctypes.c_int64),
        ("layout_kind", ctypes.c_int32), ("ring_ranks", ctypes.c_int32), ("seq_len_tokens", ctypes.c_int64),
        ("granularity_tokens", ctypes.c_int64), ("q_rank", ctypes.c_int32), ("kv_rank", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float), ("block_q", ctypes.c_int32), ("block_k", ctypes.c_int32),
        ("q_blocks", ctypes.c_int32), ("tile_offsets", ctypes.c_void_p), ("tile_block", ctypes.c_void_p),
        ("tile_masked", ctypes.c_void_p), ("column_offsets", ctypes.c_void_p), ("column_index", ctypes.c_void_p),
        ("max_tiles", ctypes.c_int64),
    ]


class SparseringError(RuntimeError):
    """A call into the library failed; `code` is SR_INPUT_ERROR or SR_CUDA_ERROR."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class DeviceIndex(SparseIndex):
    """A sparse index (kernels/sparse_index.hpp) held in CUDA int32 / uint8 tensors."""

    @staticmethod
    def from_numpy(block_q, block_k, q_blocks, tile_offsets, tile_block, tile_masked, column_offsets, column_index,
                   device="cuda") -> "DeviceIndex":
        def put(array, dtype):
            tensor = torch.as_tensor(array).to(dtype)
            if tensor.numel() == 0:  # keep every pointer valid
                tensor = torch.zeros(1, dtype=dtype)
            return tensor.to(device).contiguous()
        return DeviceIndex(block_q, block_k, q_blocks, put(tile_offsets, torch.int32), put(tile_block, torch.int32),
                           put(tile_masked, torch.uint8), put(column_offsets, torch.int32),
                           put(column_index, torch.int32))

    def column_chunks(self, chunk: int = 64) -> int:
        counts = (self.column_offsets[1:] - self.column_offsets[:-1]).to(torch.int64)
        return int(((counts + chunk - 1) // chunk).sum().item())


class _CudaArray:
    """A device array given by a raw pointer, exposed through __cuda_array_interface__ so torch can
    view it without a copy."""

    def __init__(self, pointer: int, count: int, typestr: str):
        # torch refuses read-only CUDA arrays; the view is only ever copied from, never written.
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": typestr, "data": (int(pointer), False),
                                         "strides": None, "version": 2}


class GpuIndex:
    """An index on the GPU (sr_build_index, or sr_index_allocate for builds into it); freed with
    the object. tiles() and columns() are -1 after a build into it until read_counts()."""

    def __init__(self, lib, handle: ctypes.c_void_p, rows: int):
        self._lib, self._handle, self.rows = lib, handle, rows

    def tiles(self) -> int:
        return int(self._lib.sr_index_tiles(self._handle))

    def columns(self) -> int:
        return int(self._lib.sr_index_columns(self._handle))

    def read_counts(self) -> None:
        """Waits for the current stream and reads the last build's counts (raises when they
        exceeded the capacity)."""
        code = self._lib.sr_index_read_counts(self._handle, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if code != SR_OK:
            raise SparseringError(code, self._lib.sr_last_error().decode())

    def fill(self, problem) -> int:
        return self._lib.sr_index_fill_problem(self._handle, ctypes.byref(problem))

    def copy(self, device: torch.device) -> SparseIndex:
        """The index's arrays copied into torch tensors on `device` (queued on the current stream)."""
        problem = _Problem()
        if self.fill(problem) != SR_OK:
            raise SparseringError(SR_INPUT_ERROR, self._lib.sr_last_error().decode())
        lists = self.rows * problem.q_blocks + 1
        tiles, columns = self.tiles(), self.columns()

        def take(pointer, count, typestr, dtype):
            out = torch.empty(max(count, 1), dtype=dtype, device=device)  # never a null pointer
            if count:
                view = torch.as_tensor(_CudaArray(pointer, count, typestr), device=device)
                out[:count].copy_(view)
            return out

        return SparseIndex(problem.block_q, problem.block_k, problem.q_blocks,
                           take(problem.tile_offsets, lists, "<i4", torch.int32),
                           take(problem.tile_block, tiles, "<i4", torch.int32),
                           take(problem.tile_masked, tiles, "|u1", torch.uint8),
                           take(problem.column_offsets, lists, "<i4", torch.int32),
                           take(problem.column_index, columns, "<i4", torch.int32))

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.sr_index_free(self._handle)
            self._handle = None


@dataclass
class RingPosition:
    """Token layout and ring ranks (core/token_layout.hpp); the default is one rank holding all."""

    layout: str = "contiguous"
    ranks: int = 1
    seq_len_tokens: int = 0      # 0: the query length
    granularity_tokens: int = 0
    q_rank: int = 0
    kv_rank: int = 0


class SparseringKernels:
    """The kernels of one libsparsering_kernels.so. Calls run on torch's current CUDA stream."""

    def __init__(self, path: str):
        self._lib = ctypes.CDLL(path)
        lib = self._lib
        lib.sr_last_error.restype = ctypes.c_char_p
        lib.sr_version.restype = ctypes.c_char_p
        vp = ctypes.c_void_p
        lib.sr_sparse_attn_fwd.argtypes = [ctypes.POINTER(_Problem), vp, vp, vp, vp, vp, vp]
        lib.sr_attn_bwd_delta.argtypes = [ctypes.c_int64, ctypes.c_int32, vp, vp, vp, vp]
        lib.sr_sparse_attn_bwd.argtypes = [ctypes.POINTER(_Problem)] + [vp] * 10
        lib.sr_estimate_select.argtypes = [ctypes.c_int32] * 4 + [ctypes.c_int64, ctypes.c_int32, ctypes.c_float, vp, vp,
                                                                  ctypes.c_double, ctypes.c_int32, vp, vp, vp, vp, vp]
        lib.sr_build_index.argtypes = [ctypes.c_int32, ctypes.c_int32, vp, vp, vp, vp, ctypes.c_int32, ctypes.c_int32,
                                       ctypes.c_int64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                                       ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), vp]
        lib.sr_index_allocate.argtypes = [ctypes.c_int32] * 4 + [ctypes.c_int64, ctypes.c_int64] + \
            [ctypes.c_int32] * 4 + [ctypes.POINTER(ctypes.c_void_p)]
        lib.sr_build_index_into.argtypes = [ctypes.c_int32, ctypes.c_int32, vp, vp, vp, vp, ctypes.c_int32,
                                            ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32,
                                            ctypes.c_int32, vp, vp]
        lib.sr_index_read_counts.argtypes = [vp, vp]
        lib.sr_index_fill_problem.argtypes = [vp, ctypes.POINTER(_Problem)]
        lib.sr_index_tiles.argtypes = [vp]
        lib.sr_index_columns.argtypes = [vp]
        lib.sr_index_tiles.restype = ctypes.c_int64
        lib.sr_index_columns.restype = ctypes.c_int64
        lib.sr_index_free.argtypes = [vp]
        lib.sr_index_free.restype = None
        for name in ("sr_sparse_attn_fwd", "sr_attn_bwd_delta", "sr_sparse_attn_bwd", "sr_estimate_select",
                     "sr_build_index", "sr_index_allocate", "sr_build_index_into", "sr_index_read_counts",
                     "sr_index_fill_problem"):
            getattr(lib, name).restype = ctypes.c_int

    def version(self) -> str:
        return self._lib.sr_version().decode()

    def _check(self, code: int) -> None:
        if code != SR_OK:
            raise SparseringError(code, self._lib.sr_last_error().decode())

    @staticmethod
    def _stream() -> ctypes.c_void_p:
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    @staticmethod
    def _tensor(t: torch.Tensor, name: str, dtype: torch.dtype, shape: tuple) -> int:
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor")
        if t.dtype != dtype:
            raise ValueError(f"{name} must be {dtype}, got {t.dtype}")
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
        return t.data_ptr()

    def estimate_select(self, q_last, k, recall: float = 0.95, capacity: int = 4096,
                        softmax_scale: float | None = None, out: tuple | None = None) -> tuple:
        """Pattern estimation + recall selection on the GPU for one rank holding all keys.
        Returns (vertical_count, vertical_keys, slash_count, slash_offsets) int32 CUDA tensors,
        (rows,) and (rows, capacity), kept entries ascending and -1 past each row's count. The
        kernels write every element, so `out` (four such tensors on q_last's device, e.g. a
        previous call's) is filled in place: a training step allocates its kept sets once. The
        four tensors a call allocates are views of one buffer."""
        b, hq, last_q, d = q_last.shape
        _, hkv, n, _ = k.shape
        self._tensor(q_last, "q_last", torch.bfloat16, q_last.shape)
        self._tensor(k, "k", torch.bfloat16, k.shape)
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
        rows = b * hq
        if out is None:
            # One allocation, no fill: the kernels write counts, kept entries and the -1 padding.
            buffer = torch.empty(2 * rows * (capacity + 1), device=q_last.device, dtype=torch.int32)
            counts, keys = buffer[:2 * rows], buffer[2 * rows:].view(2, rows, capacity)
            out = (counts[:rows], keys[0], counts[rows:], keys[1])
        else:
            if len(out) != 4:
                raise ValueError(f"out must hold 4 tensors (counts and kept entries of both kinds), got {len(out)}")
            for name, t, shape in (("vertical_count", out[0], (rows,)), ("vertical_keys", out[1], (rows, capacity)),
                                   ("slash_count", out[2], (rows,)), ("slash_offsets", out[3], (rows, capacity))):
                self._tensor(t, f"out {name}", torch.int32, shape)
                if t.device != q_last.device:
                    raise ValueError(f"out {name} is on {t.device}, q_last on {q_last.device}")
        self._check(self._lib.sr_estimate_select(b, hq, hkv, d, n, last_q, scale, q_last.data_ptr(), k.data_ptr(), recall,
                                                 capacity, *(t.data_ptr() for t in out), self._stream()))
        return tuple(out)

    @staticmethod
    def _position_args(position: RingPosition) -> tuple:
        """The C API's layout and ring-position arguments, the layout name checked."""
        if position.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {position.layout!r}")
        return (LAYOUTS[position.layout], position.ranks, position.seq_len_tokens, position.granularity_tokens,
                position.q_rank, position.kv_rank)

    def _build_args(self, kept: tuple, position: RingPosition) -> tuple:
        """The arguments the C API's builds share, after checking them: rows, capacity, the four
        kept-set pointers and the layout and ring position."""
        vc, vk, sc, so = kept
        rows, capacity = vk.shape
        for name, t, shape in (("vertical_count", vc, (rows,)), ("vertical_keys", vk, (rows, capacity)),
                               ("slash_count", sc, (rows,)), ("slash_offsets", so, (rows, capacity))):
            self._tensor(t, name, torch.int32, shape)
        return (rows, capacity, vc.data_ptr(), vk.data_ptr(), sc.data_ptr(), so.data_ptr(),
                *self._position_args(position))

    def build_index(self, kept: tuple, position: RingPosition, block_q: int, block_k: int) -> GpuIndex:
        """Index build on the GPU from kept sets (vertical_count, vertical_keys, slash_count,
        slash_offsets) as estimate_select returns them (global positions, ascending, unique)."""
        args = self._build_args(kept, position)
        handle = ctypes.c_void_p()
        self._check(self._lib.sr_build_index(*args, block_q, block_k, ctypes.byref(handle), self._stream()))
        return GpuIndex(self._lib, handle, args[0])

    def allocate_index(self, rows: int, capacity: int, position: RingPosition, block_q: int,
                       block_k: int) -> GpuIndex:
        """An index of the capacity bound for kept sets of `rows` x `capacity` at this ring step,
        to build into (build_index_into) as often as needed."""
        handle = ctypes.c_void_p()
        self._check(self._lib.sr_index_allocate(rows, capacity, *self._position_args(position), block_q, block_k,
                                                ctypes.byref(handle)))
        return GpuIndex(self._lib, handle, rows)

    def build_index_into(self, kept: tuple, position: RingPosition, index: GpuIndex) -> None:
        """build_index into an index from allocate_index, with no host synchronization; its counts
        are read by index.read_counts()."""
        self._check(self._lib.sr_build_index_into(*self._build_args(kept, position), index._handle, self._stream()))

    def _problem(self, q, k, index, position: RingPosition | None, softmax_scale) -> _Problem:
        if q.dim() != 4 or k.dim() != 4:
            raise ValueError("q and k must be (B, H, S, D)")
        b, hq, sq, d = q.shape
        _, hkv, skv, _ = k.shape
        position = position or RingPosition()
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
        p = _Problem()
        p.batch, p.q_heads, p.kv_heads, p.head_dim, p.q_len, p.kv_len = b, hq, hkv, d, sq, skv
        if position.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {position.layout!r}; expected one of {sorted(LAYOUTS)}")
        p.layout_kind = LAYOUTS[position.layout]
        p.ring_ranks = position.ranks
        p.seq_len_tokens = position.seq_len_tokens or sq * position.ranks
        p.granularity_tokens = position.granularity_tokens
        p.q_rank, p.kv_rank = position.q_rank, position.kv_rank
        p.softmax_scale = scale
        if index.rows != b * hq:
            raise ValueError(f"index has {index.rows} rows, the problem batch x q_heads = {b * hq}")
        if isinstance(index, GpuIndex):
            self._check(index.fill(p))
            return p
        p.block_q, p.block_k, p.q_blocks = index.block_q, index.block_k, index.q_blocks
        for name in ("tile_offsets", "tile_block", "column_offsets", "column_index"):
            self._tensor(getattr(index, name), "index." + name, torch.int32, tuple(getattr(index, name).shape))
        self._tensor(index.tile_masked, "index.tile_masked", torch.uint8, tuple(index.tile_masked.shape))
        p.tile_offsets, p.tile_block = index.tile_offsets.data_ptr(), index.tile_block.data_ptr()
        p.tile_masked = index.tile_masked.data_ptr()
        p.column_offsets, p.column_index = index.column_offsets.data_ptr(), index.column_index.data_ptr()
        p.max_tiles = max(1, index.tile_block.numel())  # the backward then never waits for the GPU
        return p

    def sparse_attn_fwd(self, q, k, v, index: DeviceIndex, out, lse, position: RingPosition | None = None,
                        softmax_scale: float | None = None) -> None:
        """One ring step of the forward, merged into the running (out, lse) (fp32; start 0 / -inf)."""
        p = self._problem(q, k, index, position, softmax_scale)
        bf = torch.bfloat16
        args = [self._tensor(q, "q", bf, q.shape), self._tensor(k, "k", bf, k.shape),
                self._tensor(v, "v", bf, k.shape), self._tensor(out, "out", torch.float32, q.shape),
                self._tensor(lse, "lse", torch.float32, q.shape[:3])]
        self._check(self._lib.sr_sparse_attn_fwd(ctypes.byref(p), *args, self._stream()))

    def attn_bwd_delta(self, dout, out, delta) -> None:
        """delta = rowsum(dout * out) over the last dimension."""
        tokens = dout.numel() // dout.shape[-1]
        args = [self._tensor(dout, "dout", torch.bfloat16, dout.shape), self._tensor(out, "out", torch.float32, dout.shape),
                self._tensor(delta, "delta", torch.float32, dout.shape[:-1])]
        self._check(self._lib.sr_attn_bwd_delta(tokens, dout.shape[-1], *args, self._stream()))

    def sparse_attn_bwd(self, q, k, v, dout, lse, delta, index: DeviceIndex, dq, dk, dv,
                        position: RingPosition | None = None, softmax_scale: float | None = None) -> None:
        """One ring step of the backward: dq, dk, dv += (fp32)."""
        p = self._problem(q, k, index, position, softmax_scale)
        bf, f32 = torch.bfloat16, torch.float32
        args = [self._tensor(q, "q", bf, q.shape), self._tensor(k, "k", bf, k.shape), self._tensor(v, "v", bf, k.shape),
                self._tensor(dout, "dout", bf, q.shape), self._tensor(lse, "lse", f32, q.shape[:3]),
                self._tensor(delta, "delta", f32, q.shape[:3]), self._tensor(dq, "dq", f32, q.shape),
                self._tensor(dk, "dk", f32, k.shape), self._tensor(dv, "dv", f32, k.shape)]
        self._check(self._lib.sr_sparse_attn_bwd(ctypes.byref(p), *args, self._stream()))
