#!/usr/bin/python3
"""Runs one zoo model over the rank matrix of matrix.txt and compares every
cell with PyTorch (compare.py's checks).

Usage: matrix.py MODEL WORK_DIR BIN_DIR
       matrix.py --list          (the models of matrix.txt, one per line)

Generates the model into WORK_DIR (with MODEL.py, or SOURCE_zoo.py for the
sources `torchvision`, `torchtext` and `torchaudio`), imports it once, then
splits and runs each cell in its own folder,
WORK_DIR/<ranks>-<schedule>-<options> (`1-unsplit` for the graph IR on one
rank, in the `full` matrix). Prints
compare.py's lines under a header per cell and a last line counting the
cells that matched; exits non-zero if any did not (a failed command counts
as a mismatch, and the other cells still run).
"""
import collections
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "matrix.txt")
SOURCES = ("pt", "torch-mlir", "torchvision", "torchtext", "torchaudio")
KINDS = ("standard", "wide", "full")
RELAYED = "skips=relay tied=transmit"

Row = collections.namedtuple("Row", "source kind seeded points schedules")
# `schedules`: 4 stages on 2 ranks with each kind that places several stages
# on a rank, and zero-bubble H1 on 4.
MULTI_STAGE = [(2, kind, "stages=4") for kind in
               ("interleaved-1f1b", "looped-bfs", "zb1p", "zbv")] + [
    (4, "zb-h1", "stages=4")]


def parse_row(words):
    """A row's words after the model's name, as a Row; None if malformed.
    `seeded` is False, True, or the learning rate of `seeded=LR`."""
    if len(words) < 2 or words[0] not in SOURCES or words[1] not in KINDS:
        return None
    seeded, points, schedules = False, None, False
    for extra in words[2:]:
        if extra == "schedules" and not schedules:
            schedules = True
        elif extra == "seeded" and not seeded:
            seeded = True
        elif extra.startswith("seeded=") and not seeded:
            try:
                seeded = float(extra[len("seeded="):])
            except ValueError:
                return None
        elif extra.startswith("points=") and points is None:
            points = extra[len("points="):]
        else:
            return None
    return Row(words[0], words[1], seeded, points, schedules)


def read_table(path=TABLE):
    """matrix.txt as {model: Row}; '#' starts a comment."""
    table = {}
    for number, line in enumerate(open(path), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        row = parse_row(words[1:])
        if row is None or words[0] in table:
            sys.exit(f"{path}:{number}: expected 'MODEL {'|'.join(SOURCES)} "
                     f"{'|'.join(KINDS)} [seeded[=LR]] [points=A,B] [schedules]' "
                     f"once per "
                     f"model, got {line.strip()!r}")
        table[words[0]] = row
    return table


def generate(name, source, work, flags=()):
    """Runs the model's generator into work."""
    script = (f"{name}.py" if source in ("pt", "torch-mlir")
              else f"{source}_zoo.py")
    generator = [os.path.join(HERE, script)] + (
        [name] if source not in ("pt", "torch-mlir") else [])
    os.makedirs(work, exist_ok=True)
    subprocess.run([sys.executable] + generator + [work] + list(flags),
                   check=True, stdout=subprocess.DEVNULL)


def cells(row):
    """(ranks, schedule, split options) of one model's matrix: `full` adds
    the unsplit graph on one rank, `points=` a split at those modules on as
    many ranks as it makes stages, with 1F1B, `schedules` the kinds that
    hold several stages per rank and zb-h1."""
    out = [(1, "1f1b", None)] if row.kind == "full" else []
    for n in (2, 4):
        pairs = [("gpipe", RELAYED), ("1f1b", "")]
        if row.kind == "wide":
            pairs += [("gpipe", ""), ("1f1b", RELAYED)]
        out += [(n, schedule, f"stages={n}" + (" " + extra if extra else ""))
                for schedule, extra in pairs]
    if row.points:
        out.append((row.points.count(",") + 2, "1f1b", row.points))
    if row.schedules:
        out += MULTI_STAGE
    return out


def run_cell(compare, m, graph, ranks, schedule, points):
    if points is None:
        print("== 1 rank, unsplit", flush=True)
        m.work = os.path.join(m.zoo, "1-unsplit")
    else:
        print(f"== {ranks} ranks, {schedule}, {points}", flush=True)
        m.work = os.path.join(m.zoo, f"{ranks}-{schedule}-" +
                              points.replace(" ", "-").replace("=", "")
                              .replace(",", "-").replace(":", ""))
    os.makedirs(m.work, exist_ok=True)
    try:
        pipe = graph if points is None else compare.split(m, graph, points)
        return compare.check_run(m, pipe, ranks, schedule, [])
    except SystemExit:  # compare.run printed the failed command
        return False


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(read_table()))
        return 0
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    name, work, bindir = sys.argv[1:]
    table = read_table()
    if name not in table:
        sys.exit(f"matrix.py: {name!r} is not in {TABLE}")
    row = table[name]
    generate(name, row.source, work)
    sys.path.insert(0, HERE)
    import compare  # noqa: E402 (imports torch: after the generator ran)
    m = compare.Model(name, work, work, bindir, row.source == "torch-mlir")
    graph = compare.import_graph(m)
    results = [run_cell(compare, m, graph, *cell) for cell in cells(row)]
    print(f"matrix   {name}: {sum(results)} of {len(results)} cells match "
          f"PyTorch")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
