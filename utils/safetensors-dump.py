#!/usr/bin/env python3
"""Prints a safetensors file: metadata, then one line per tensor with its
dtype, shape and, for tensors of at most --max-values elements, its values.

Usage: safetensors-dump.py [--max-values N] FILE
Uses only the standard library, so it runs with any python3.
"""
import argparse
import json
import struct
import sys

FORMATS = {"F64": "d", "F32": "f", "F16": "e", "I64": "q", "I32": "i",
           "I16": "h", "I8": "b", "U8": "B", "BOOL": "?"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-values", type=int, default=16)
    parser.add_argument("file")
    args = parser.parse_args()
    with open(args.file, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", None)
    if meta:
        for key in sorted(meta):
            print(f"metadata {key} = {meta[key]}")
    for name, info in header.items():
        begin, end = info["data_offsets"]
        shape = "x".join(str(d) for d in info["shape"]) or "scalar"
        line = f"{name} {info['dtype']} {shape} bytes={end - begin}"
        fmt = FORMATS.get(info["dtype"])
        count = 1
        for d in info["shape"]:
            count *= d
        if fmt and count <= args.max_values:
            values = struct.unpack(f"<{count}{fmt}", data[begin:end])
            line += " [" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                     for v in values) + "]"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
