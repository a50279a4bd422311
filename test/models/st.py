"""Tiny pure-python safetensors reader/writer (no `safetensors` package needed).

File layout:
  8 bytes   little-endian u64 N = length of the JSON header
  N bytes   JSON header: {name: {"dtype", "shape", "data_offsets": [begin, end]},
                          ..., "__metadata__": {str: str}}   (metadata optional)
            padded with spaces so the data section starts 8-byte aligned
  rest      raw little-endian tensor bytes, contiguous, in header order;
            data_offsets are relative to the start of the data section.
"""
import json
import struct
import sys

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, numpy dtype used for the byte view, itemsize)
_DTYPES = {
    "BOOL": (torch.bool, np.dtype("|b1"), 1),
    "U8": (torch.uint8, np.dtype("|u1"), 1),
    "I8": (torch.int8, np.dtype("|i1"), 1),
    "I16": (torch.int16, np.dtype("<i2"), 2),
    "I32": (torch.int32, np.dtype("<i4"), 4),
    "I64": (torch.int64, np.dtype("<i8"), 8),
    "F16": (torch.float16, np.dtype("<f2"), 2),
    # numpy has no bfloat16: carry the raw bits as little-endian int16.
    "BF16": (torch.bfloat16, np.dtype("<i2"), 2),
    "F32": (torch.float32, np.dtype("<f4"), 4),
    "F64": (torch.float64, np.dtype("<f8"), 8),
}
_BY_TORCH = {v[0]: k for k, v in _DTYPES.items()}


def _to_bytes(t):
    t = t.detach().to("cpu").contiguous()
    if t.dtype not in _BY_TORCH:
        raise TypeError("unsupported dtype %s" % t.dtype)
    name = _BY_TORCH[t.dtype]
    if t.dtype == torch.bfloat16:
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    arr = arr.astype(_DTYPES[name][1], copy=False)  # force little-endian
    return name, arr.tobytes(order="C")


def save(path, tensors, metadata=None):
    """Write dict name -> torch.Tensor (and optional {str: str} metadata)."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError("%s is not a tensor" % name)
        dt, raw = _to_bytes(t)
        header[name] = {"dtype": dt, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("metadata must map str -> str")
        header["__metadata__"] = dict(metadata)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-(8 + len(hb))) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for raw in blobs:
            f.write(raw)


def load(path):
    """Return (dict name -> torch.Tensor, metadata dict or {})."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: truncated file" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("%s: header length %d past end of file" % (path, n))
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    metadata = header.pop("__metadata__", None) or {}
    out = {}
    for name, info in header.items():
        tdtype, npdtype, size = _DTYPES[info["dtype"]]
        shape = [int(s) for s in info["shape"]]
        b, e = info["data_offsets"]
        count = 1
        for s in shape:
            count *= s
        if e - b != count * size or base + e > len(data):
            raise ValueError("%s: bad data_offsets for %s" % (path, name))
        arr = np.frombuffer(data, dtype=npdtype, count=count, offset=base + b)
        arr = arr.astype(npdtype.newbyteorder("="), copy=True).reshape(shape)
        t = torch.from_numpy(arr)
        if tdtype == torch.bfloat16:
            t = t.view(torch.bfloat16)
        out[name] = t
    return out, metadata


if __name__ == "__main__":
    # `python3 st.py FILE...` prints the contents summary of each file.
    for p in sys.argv[1:]:
        ts, md = load(p)
        print(p)
        for k, v in ts.items():
            print("  %-40s %-14s %s" % (k, v.dtype, list(v.shape)))
        for k, v in md.items():
            print("  __metadata__[%s] = %s" % (k, v))
