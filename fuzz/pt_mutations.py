"""Feeds mutated TorchScript archives to pippy-import and sorts what happens.

Usage: pt_mutations.py PIPPY_IMPORT COUNT OUT_DIR SEED ARCHIVE=SHAPES...

Each mutant starts from one ARCHIVE (round robin; SHAPES is its
--input-shapes) and is one of:
  bytes    random bytes of the archive flipped, zeroed or set to 0xff
  cut      the archive truncated at a random offset
  member   one member of the zip (code, pickle, constants, tensor data)
           mutated as above, the archive rewritten with correct CRCs so
           that the damage reaches libtorch's unpickler and compiler and
           pippy-import's own code instead of the zip checksum
pippy-import (built with AddressSanitizer and UBSan) imports each. Outcomes: imported (exit 0), refused (exit 1 and
one "pippy-import: error:" line), and findings: a sanitizer report, a
signal, another exit status, no error line, or no exit within 60 s.
Findings are kept in OUT_DIR/findings with their stderr. Prints the counts
and the time taken; exits 1 when there is a finding.
"""
import io
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile


def damage(data, rng):
    data = bytearray(data)
    if not data:
        return bytes(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        kind = rng.randrange(4)
        if kind == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[i] = 0
        elif kind == 2:
            data[i] = 0xFF
        else:
            n = min(len(data) - i, rng.randint(1, 16))
            data[i:i + n] = bytes(rng.randrange(256) for _ in range(n))
    return bytes(data)


def mutate_member(data, rng):
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        infos = src.infolist()
        victim = rng.choice(infos).filename
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in infos:
                body = src.read(info.filename)
                if info.filename == victim:
                    body = (body[:rng.randrange(len(body) + 1)]
                            if rng.random() < 0.2 else damage(body, rng))
                dst.writestr(info.filename, body)
    return out.getvalue(), victim


def mutant(data, rng):
    kind = rng.choice(["bytes", "cut", "member", "member"])
    if kind == "bytes":
        return damage(data, rng), kind
    if kind == "cut":
        return data[:rng.randrange(len(data))], kind
    body, victim = mutate_member(data, rng)
    return body, f"member {victim}"


def run(tool, path, shapes, out):
    env = dict(os.environ, ASAN_OPTIONS="allow_user_poisoning=0:"
               "detect_leaks=0:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1")
    try:
        proc = subprocess.run(
            [tool, path, "--input-shapes", shapes, "-o",
             f"{out}/m.mlir", "--weights", f"{out}/m.safetensors"],
            capture_output=True, text=True, errors="replace", env=env,
            timeout=60)
    except subprocess.TimeoutExpired:
        return "no exit within 60 s", ""
    err = proc.stderr
    if "Sanitizer" in err or "runtime error" in err:
        return "sanitizer report", err
    if proc.returncode < 0:
        return f"signal {-proc.returncode}", err
    if proc.returncode == 0:
        return "imported", err
    if proc.returncode != 1:
        return f"exit status {proc.returncode}", err
    errors = [line for line in err.splitlines()
              if line.startswith("pippy-import: error:")]
    return ("refused", err) if len(errors) == 1 else ("no error line", err)


def main():
    tool, count, out, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        int(sys.argv[4])
    seeds = [arg.rsplit("=", 1) for arg in sys.argv[5:]]
    archives = [open(p, "rb").read() for p, _ in seeds]
    names = [os.path.basename(p) for p, _ in seeds]
    findings = f"{out}/findings"
    shutil.rmtree(findings, ignore_errors=True)
    os.makedirs(findings)
    rng = random.Random(seed)
    counts = {}
    started = time.monotonic()
    for n in range(count):
        body, kind = mutant(archives[n % len(archives)], rng)
        path = f"{out}/mutant.pt"
        with open(path, "wb") as f:
            f.write(body)
        outcome, err = run(tool, path, seeds[n % len(seeds)][1], out)
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome not in ("imported", "refused"):
            keep = f"{findings}/{n}-{names[n % len(names)]}"
            shutil.copy(path, keep)
            with open(keep + ".stderr", "w") as f:
                f.write(f"{kind}: {outcome}\n{err}")
            print(f"mutant {n} ({kind}): {outcome}; kept as {keep}")
        if (n + 1) % 50 == 0:
            print(f"{n + 1}/{count} mutants, "
                  f"{time.monotonic() - started:.0f} s", flush=True)
    elapsed = time.monotonic() - started
    print(f"{count} mutants of {', '.join(names)} (seed {seed}) in "
          f"{elapsed:.0f} s: " + ", ".join(
              f"{k} {v}" for k, v in sorted(counts.items())))
    bad = count - counts.get("imported", 0) - counts.get("refused", 0)
    print(f"findings: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
