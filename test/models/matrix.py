#!/usr/bin/python3
"""Runs one zoo model over the rank matrix of matrix.txt and compares every
cell with PyTorch (compare.py's checks).

Usage: matrix.py MODEL WORK_DIR BIN_DIR
       matrix.py --list          (the models of matrix.txt, one per line)

Generates the model into WORK_DIR (with MODEL.py, or torchvision_zoo.py for
the source `torchvision`), imports it once, then splits and runs each cell
in its own folder, WORK_DIR/<ranks>-<schedule>-<options> (`1-unsplit` for
the graph IR on one rank, in the `full` matrix). Prints
compare.py's lines under a header per cell and a last line counting the
cells that matched; exits non-zero if any did not (a failed command counts
as a mismatch, and the other cells still run).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "matrix.txt")
SOURCES = ("pt", "torch-mlir", "torchvision")
KINDS = ("standard", "wide", "full")
RELAYED = "skips=relay tied=transmit"


def read_table(path=TABLE):
    """matrix.txt as {model: (source, cells)}; '#' starts a comment."""
    table = {}
    for number, line in enumerate(open(path), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if (len(words) != 3 or words[1] not in SOURCES
                or words[2] not in KINDS or words[0] in table):
            sys.exit(f"{path}:{number}: expected 'MODEL {'|'.join(SOURCES)} "
                     f"{'|'.join(KINDS)}' once per model, got {line.strip()!r}")
        table[words[0]] = (words[1], words[2])
    return table


def cells(kind):
    """(ranks, schedule, split options) of one model's matrix."""
    out = [(1, "1f1b", None)] if kind == "full" else []
    for n in (2, 4):
        pairs = [("gpipe", RELAYED), ("1f1b", "")]
        if kind == "wide":
            pairs += [("gpipe", ""), ("1f1b", RELAYED)]
        out += [(n, schedule, f"stages={n}" + (" " + extra if extra else ""))
                for schedule, extra in pairs]
    return out


def run_cell(compare, m, graph, ranks, schedule, points):
    if points is None:
        print("== 1 rank, unsplit", flush=True)
        m.work = os.path.join(m.zoo, "1-unsplit")
    else:
        print(f"== {ranks} ranks, {schedule}, {points}", flush=True)
        m.work = os.path.join(m.zoo, f"{ranks}-{schedule}-" +
                              points.replace(" ", "-").replace("=", ""))
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
    source, kind = table[name]
    os.makedirs(work, exist_ok=True)
    generator = ([os.path.join(HERE, "torchvision_zoo.py"), name]
                 if source == "torchvision"
                 else [os.path.join(HERE, name + ".py")])
    subprocess.run([sys.executable] + generator + [work], check=True,
                   stdout=subprocess.DEVNULL)
    sys.path.insert(0, HERE)
    import compare  # noqa: E402 (imports torch: after the generator ran)
    m = compare.Model(name, work, work, bindir, source == "torch-mlir")
    graph = compare.import_graph(m)
    results = [run_cell(compare, m, graph, *cell) for cell in cells(kind)]
    print(f"matrix   {name}: {sum(results)} of {len(results)} cells match "
          f"PyTorch")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
