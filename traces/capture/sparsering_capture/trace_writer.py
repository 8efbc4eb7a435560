"""Streams a sparsering trace (format: traces/safetensors_trace.hpp) to disk layer by layer.

The header is computed up front from the shape (S, L, H, Kv / Ks), so each (sample, layer) slab of
the four candidate tensors is written at its final offset as soon as it is captured, and memory
holds one layer at a time. The file is written under a temporary name beside the target and
renamed on close() once every slab is present; an existing target is refused unless
`overwrite`. Tested by tests/capture/capture_test.py (the C++ reader and the numpy reader load
what it writes).
"""
import os

import numpy as np

from .safetensors_io import plan_layout

_TENSORS = ("vertical.index", "vertical.mass", "slash.offset", "slash.mass")


class StreamingTraceWriter:
    """Writes a trace of `samples` x `layers` x `heads` with the given candidate slots."""

    def __init__(self, path, samples, layers, heads, vertical_slots, slash_slots, model, last_q=64, block_q=64,
                 block_k=64, provenance=None, overwrite=False):
        for name, value in (("samples", samples), ("layers", layers), ("heads", heads)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        for name, value in (("vertical_slots", vertical_slots), ("slash_slots", slash_slots)):
            if int(value) < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        self.path = os.fspath(path)
        if os.path.exists(self.path) and not overwrite:
            raise FileExistsError(f"{self.path} already exists; pass --force to overwrite it")
        self.overwrite = overwrite
        self.samples, self.layers, self.heads = int(samples), int(layers), int(heads)
        self.slots = {"vertical": int(vertical_slots), "slash": int(slash_slots)}
        metadata = {"format": "sparsering-trace", "version": "1", "model": model, "source": "captured",
                    "last_q": int(last_q), "block_q": int(block_q), "block_k": int(block_k)}
        for key, value in (provenance or {}).items():
            metadata[f"provenance.{key}"] = value
        shape = lambda kind: (self.samples, self.layers, self.heads, self.slots[kind])  # noqa: E731
        tensors = [("sample.seq_len", "I64", (self.samples,)),
                   ("vertical.index", "I32", shape("vertical")), ("vertical.mass", "F32", shape("vertical")),
                   ("slash.offset", "I32", shape("slash")), ("slash.mass", "F32", shape("slash"))]
        header, self._offsets = plan_layout(tensors, metadata)
        self._seq_len = [None] * self.samples
        self._written = np.zeros((self.samples, self.layers), dtype=bool)
        directory = os.path.dirname(os.path.abspath(self.path))
        self._temp = os.path.join(directory, f".{os.path.basename(self.path)}.{os.getpid()}.tmp")
        self._file = open(self._temp, "wb")
        self._file.write(header)
        self._file.truncate(self._offsets["slash.mass"][1])

    def write_layer(self, sample, layer, vertical_index, vertical_mass, slash_offset, slash_mass):
        """Writes the candidates of all heads of one (sample, layer): arrays of shape (H, Kv) for
        the vertical pair and (H, Ks) for the slash pair (int32 positions, float32 shares)."""
        if not (0 <= sample < self.samples and 0 <= layer < self.layers):
            raise ValueError(f"(sample {sample}, layer {layer}) is outside ({self.samples}, {self.layers})")
        if self._written[sample, layer]:
            raise ValueError(f"(sample {sample}, layer {layer}) was already written")
        arrays = {"vertical.index": (vertical_index, np.int32, "vertical"),
                  "vertical.mass": (vertical_mass, np.float32, "vertical"),
                  "slash.offset": (slash_offset, np.int32, "slash"), "slash.mass": (slash_mass, np.float32, "slash")}
        for name in _TENSORS:
            values, dtype, kind = arrays[name]
            values = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
            expected = (self.heads, self.slots[kind])
            if values.shape != expected:
                raise ValueError(f"{name}: layer {layer} has shape {values.shape}, expected {expected}")
            element = values.itemsize
            begin = self._offsets[name][0] + (sample * self.layers + layer) * self.heads * self.slots[kind] * element
            self._file.seek(begin)
            self._file.write(values.tobytes())
        self._written[sample, layer] = True

    def set_seq_len(self, sample, seq_len_tokens):
        """Records the token count of `sample`."""
        if not 0 <= sample < self.samples:
            raise ValueError(f"sample {sample} is outside [0, {self.samples})")
        self._seq_len[sample] = int(seq_len_tokens)

    def close(self):
        """Checks that every slab and sequence length was written, then renames into place."""
        missing = np.argwhere(~self._written)
        if len(missing):
            s, l = missing[0]
            self.abort()
            raise ValueError(f"{self.path}: {len(missing)} (sample, layer) slabs were never captured, "
                             f"the first is (sample {s}, layer {l}); nothing was written")
        if any(n is None for n in self._seq_len):
            self.abort()
            raise ValueError(f"{self.path}: a sample has no sequence length; nothing was written")
        self._file.seek(self._offsets["sample.seq_len"][0])
        self._file.write(np.asarray(self._seq_len, dtype="<i8").tobytes())
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        if os.path.exists(self.path) and not self.overwrite:
            os.unlink(self._temp)
            raise FileExistsError(f"{self.path} appeared while capturing; pass --force to overwrite it")
        os.replace(self._temp, self.path)

    def abort(self):
        """Drops the temporary file; the target is left untouched."""
        if not self._file.closed:
            self._file.close()
        if os.path.exists(self._temp):
            os.unlink(self._temp)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()
        return False
