#!/usr/bin/env python3
"""Checks that pippy-opt reads and writes Torch-MLIR text faithfully.

For every chunk (cut at `// -----`) of each given file whose IR uses only the
torch, func, arith and tensor dialects (and builtin), it checks that:
  1. the chunk parses and verifies;
  2. the printed form is a fixed point (print, parse, print again: identical);
  3. every torch op prints in Torch-MLIR's custom syntax, not the generic form
     (except `torch.constant.number`, which Torch-MLIR prints generically);
  4. the generic form (--mlir-print-op-generic) reads back to the same IR;
  5. bytecode (--emit-bytecode) reads back to the same IR.
Prints one line per failing chunk and a summary; exits non-zero on failure.

Usage: torch-roundtrip.py [--pippy-opt PATH] [--allow DIALECT]... FILE.mlir...
"""
import argparse
import re
import subprocess
import sys
import tempfile

ALLOWED_DIALECTS = {"torch", "func", "arith", "tensor", "builtin"}
# An op name at the start of a statement: `%x = dialect.op`, `dialect.op`, or
# the generic `"dialect.op"(`.
OP_NAME = re.compile(
    r'^\s*(?:%[^=]*=\s*)?"?([a-z_][a-z0-9_]*)\.[A-Za-z_][\w.]*', re.M)
# Op names written without a dialect prefix inside func bodies.
FUNC_DEFAULT_OPS = {"return", "call", "call_indirect", "constant"}


def split_chunks(text):
    return re.split(r"^// -----\s*$", text, flags=re.M)


def strip_comments(chunk):
    return "\n".join(l for l in chunk.splitlines() if not l.lstrip().startswith("//"))


def dialects_of(chunk):
    body = strip_comments(chunk)
    # Drop resource blobs, strings and attribute dictionaries' dotted keys
    # (`torch.onnx_meta.ir_version = ...`) so they are not taken for ops.
    body = re.sub(r"\{-#.*?#-\}", "", body, flags=re.S)
    names = set()
    for m in OP_NAME.finditer(body):
        line = body[m.start():body.find("\n", m.start())]
        if re.match(r"^\s*(func\.func|module)\b", line):
            names.add(m.group(1))
            continue
        names.add(m.group(1))
    return names


def run(opt, args, data, binary=False):
    proc = subprocess.run([opt] + args, input=data, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace").strip())
    return proc.stdout if binary else proc.stdout.decode()


GENERIC_TORCH = re.compile(r'^\s*(?:%[^=]*=\s*)?"(torch\.[\w.]+)"', re.M)


def check_chunk(opt, chunk):
    source = chunk.encode()
    printed = run(opt, [], source)
    again = run(opt, [], printed.encode())
    if again != printed:
        return "printed form is not a fixed point"
    generic_ops = [n for n in GENERIC_TORCH.findall(printed)
                   if n != "torch.constant.number"]
    if generic_ops:
        return "printed in generic form: " + ", ".join(sorted(set(generic_ops)))
    generic = run(opt, ["--mlir-print-op-generic"], source)
    if run(opt, [], generic.encode()) != printed:
        return "generic form does not read back to the same IR"
    with tempfile.NamedTemporaryFile(suffix=".mlirbc") as bc:
        bc.write(run(opt, ["--emit-bytecode"], source, binary=True))
        bc.flush()
        if run(opt, [bc.name], b"") != printed:
            return "bytecode does not read back to the same IR"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pippy-opt", default="pippy-opt")
    parser.add_argument("--allow", action="append", default=[],
                        metavar="DIALECT",
                        help="also check chunks that use this dialect")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()

    checked = skipped = failed = 0
    for path in args.files:
        with open(path) as f:
            chunks = split_chunks(f.read())
        for i, chunk in enumerate(chunks):
            if not strip_comments(chunk).strip():
                continue
            others = dialects_of(chunk) - ALLOWED_DIALECTS - set(args.allow)
            if others:
                skipped += 1
                continue
            checked += 1
            try:
                problem = check_chunk(args.pippy_opt, chunk)
            except RuntimeError as e:
                problem = "pippy-opt failed: " + str(e).splitlines()[0]
            if problem:
                failed += 1
                print(f"{path}: chunk {i}: {problem}")
    print(f"{checked - failed} passed, {failed} failed, {skipped} skipped "
          f"(other dialects)")
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
