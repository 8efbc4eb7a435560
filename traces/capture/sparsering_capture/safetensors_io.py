"""The safetensors container, read and written with the standard library and numpy only.

Layout: 8-byte little-endian header length n, n bytes of JSON (padded with spaces to a multiple of
8), then the raw little-endian tensor bytes in data_offsets order. Used by the trace writer
(trace_writer.py) and the Q/K dump (qk_dump.py). Tested through tests/capture/capture_test.py.
"""
import json
import math
import struct

import numpy as np

# safetensors dtype name -> (numpy dtype used to hold the bytes, bytes per element)
DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4), "F64": (np.float64, 8),
          "I32": (np.int32, 4), "I64": (np.int64, 8), "U8": (np.uint8, 1)}
MAX_HEADER_BYTES = 100 << 20


def plan_layout(tensors, metadata):
    """Header bytes and each tensor's absolute file offset for `tensors`: a list of
    (name, dtype, shape) in data order. Returns (header: bytes, offsets: {name: (begin, end)}),
    begin/end counted from the start of the file."""
    header, position = {}, 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * DTYPES[dtype][1]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [position, position + size]}
        position += size
    header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    base = 8 + len(text)
    offsets = {name: (base + info["data_offsets"][0], base + info["data_offsets"][1])
               for name, info in header.items() if name != "__metadata__"}
    return struct.pack("<Q", len(text)) + text, offsets


def read_header(path):
    """Parses a safetensors file's header without reading tensor data. Returns (metadata: dict,
    entries: {name: (dtype, shape, begin, end)}) with begin/end absolute file offsets. Raises
    ValueError naming the file and the field on anything malformed or out of bounds."""
    def fail(message):
        raise ValueError(f"{path}: {message}")

    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(0)
        if size < 8:
            fail(f"file is {size} bytes, too short for the 8-byte header length")
        (n,) = struct.unpack("<Q", f.read(8))
        if n == 0 or n > MAX_HEADER_BYTES or n > size - 8:
            fail(f"header length {n} is 0, over {MAX_HEADER_BYTES} bytes or past the end of the file")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            fail(f"JSON header does not parse: {e}")
    if not isinstance(header, dict):
        fail("JSON header must be an object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict):
        fail("__metadata__ must be a map")
    entries, base = {}, 8 + n
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            fail(f"tensor '{name}': entry must hold exactly dtype, shape, data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            fail(f"tensor '{name}': unsupported dtype {dtype!r}")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            fail(f"tensor '{name}': bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(v) is int and v >= 0 for v in offsets)
                or offsets[1] < offsets[0] or base + offsets[1] > size):
            fail(f"tensor '{name}': data_offsets {offsets!r} are malformed or past the end of the file")
        if offsets[1] - offsets[0] != math.prod(shape) * DTYPES[dtype][1]:
            fail(f"tensor '{name}': {offsets[1] - offsets[0]} bytes do not match dtype {dtype} and shape {shape}")
        entries[name] = (dtype, shape, base + offsets[0], base + offsets[1])
    return metadata, entries


def read_tensor(path, entries, name):
    """Reads one tensor found by read_header as a numpy array (BF16 as raw uint16 bits)."""
    dtype, shape, begin, end = entries[name]
    with open(path, "rb") as f:
        f.seek(begin)
        data = f.read(end - begin)
    return np.frombuffer(data, dtype=np.dtype(DTYPES[dtype][0]).newbyteorder("<")).reshape(shape)


def write_file(path, tensors, metadata):
    """Writes a whole safetensors file: `tensors` is a list of (name, dtype, numpy array) in data
    order (arrays already hold the dtype's bytes, BF16 as uint16)."""
    header, _ = plan_layout([(name, dtype, array.shape) for name, dtype, array in tensors], metadata)
    with open(path, "wb") as f:
        f.write(header)
        for _, dtype, array in tensors:
            f.write(np.ascontiguousarray(array, dtype=np.dtype(DTYPES[dtype][0]).newbyteorder("<")).tobytes())
