"""Reads sparsering trace files (.safetensors, format in traces/safetensors_trace.hpp) with numpy.

    from sparsering_trace import read_trace
    trace = read_trace("traces/samples/qwen2.5-3b-32k.safetensors")
    trace.tensors["vertical.index"]   # int32 (S, L, H, Kv), mass-descending, -1 pads
    trace.tensors["slash.mass"]       # float32 (S, L, H, Ks)
    trace.metadata["model"]           # every __metadata__ entry, as strings

Checks the container like the C++ reader does (header length, JSON, dtypes, shapes against byte
sizes, offsets tiling the data section, the required tensors and metadata) and raises ValueError
naming the file and the field. It does not repeat the C++ per-slot checks (index ranges, mass
order); run `sparsering trace info` for those. Tested by tests/traces/python_reader_test.py.
"""
import json
import math
import struct
from dataclasses import dataclass

import numpy as np

_DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
           "F16": np.float16, "I32": np.int32, "U32": np.uint32, "F32": np.float32, "I64": np.int64,
           "U64": np.uint64, "F64": np.float64,
           "BF16": np.uint16, "F8_E5M2": np.uint8, "F8_E4M3": np.uint8}  # raw bits: numpy has no such floats
_REQUIRED = {"vertical.index": ("I32", 4), "vertical.mass": ("F32", 4), "slash.offset": ("I32", 4),
             "slash.mass": ("F32", 4), "sample.seq_len": ("I64", 1)}
MAX_HEADER_BYTES = 100 << 20


@dataclass
class Trace:
    tensors: dict   # name -> numpy array (little-endian, read-only view of the file bytes)
    metadata: dict  # __metadata__: name -> string


def read_trace(path):
    with open(path, "rb") as f:
        data = f.read()
    return parse_trace(data, str(path))


def parse_trace(data, name="<bytes>"):
    def fail(message):
        raise ValueError(f"{name}: {message}")

    if len(data) < 8:
        fail(f"file is {len(data)} bytes, too short for the 8-byte header length")
    (header_bytes,) = struct.unpack("<Q", data[:8])
    if header_bytes == 0 or header_bytes > MAX_HEADER_BYTES or header_bytes > len(data) - 8:
        fail(f"header length {header_bytes} is 0, over {MAX_HEADER_BYTES} bytes or past the end of the file")
    try:
        header = json.loads(data[8:8 + header_bytes].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        fail(f"JSON header does not parse: {e}")
    if not isinstance(header, dict):
        fail("JSON header must be an object")
    body = memoryview(data)[8 + header_bytes:]
    metadata = header.pop("__metadata__", None)
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        fail("__metadata__ is missing or not a map of strings")
    if metadata.get("format") != "sparsering-trace" or metadata.get("version") != "1":
        fail(f"__metadata__ format/version must be sparsering-trace/1, got {metadata.get('format')}/{metadata.get('version')}")
    def offsets(info):  # sort key; malformed entries sort first and fail below
        o = info.get("data_offsets") if isinstance(info, dict) else None
        ok = isinstance(o, list) and len(o) == 2 and all(type(v) is int and v >= 0 for v in o)
        return tuple(o) if ok else (-1, -1)

    tensors, position = {}, 0
    for key, info in sorted(header.items(), key=lambda kv: offsets(kv[1])):
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"} or offsets(info)[0] < 0:
            fail(f"tensor '{key}': entry must hold exactly dtype, shape, data_offsets [begin, end]")
        dtype = _DTYPES.get(info["dtype"]) if isinstance(info["dtype"], str) else None
        shape, (begin, end) = info["shape"], info["data_offsets"]
        if dtype is None or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            fail(f"tensor '{key}': unknown dtype {info['dtype']!r} or bad shape {shape}")
        if begin != position or end < begin or end > len(body):
            fail(f"tensor '{key}': data_offsets [{begin}, {end}] do not follow the previous tensor (at {position})")
        if end - begin != math.prod(shape) * np.dtype(dtype).itemsize:
            fail(f"tensor '{key}': {end - begin} bytes do not match dtype {info['dtype']} and shape {shape}")
        tensors[key] = np.frombuffer(body[begin:end], dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
        position = end
    if position != len(body):
        fail(f"the data section has {len(body) - position} bytes after the last tensor")
    for key, (dtype, rank) in _REQUIRED.items():
        if key not in tensors or header[key]["dtype"] != dtype or tensors[key].ndim != rank:
            fail(f"required tensor '{key}' is missing or not {dtype} with {rank} dimensions")
    s, l, h = tensors["vertical.index"].shape[:3]
    if (tensors["vertical.mass"].shape != tensors["vertical.index"].shape or
            tensors["slash.mass"].shape != tensors["slash.offset"].shape or
            tensors["slash.offset"].shape[:3] != (s, l, h) or tensors["sample.seq_len"].shape != (s,)):
        fail("tensor shapes disagree (S, L, H must match; masses must match their indices)")
    return Trace(tensors=tensors, metadata=metadata)
