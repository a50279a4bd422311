"""Compile-time benchmark of pippy's splitting pipeline.

For each depth (number of transformer blocks, 51 ops each) it writes the graph
IR with gen_ir.py and times, as wall clock of the whole process:
  - split:  pippy-opt model.mlir --pippy-split="stages=N policy=balanced" -o /dev/null
  - parse:  pippy-opt model.mlir -o /dev/null (parse, verify, print: the baseline)
  - start:  pippy-opt on an empty module (process start-up)
best of --repeat runs, the depths interleaved so that load on the machine hits
them alike. split - parse is the split passes' own cost. One more split run
with --mlir-timing (and one with --verify-each=0) breaks a split down by pass.

For comparison it times torch.fx.symbolic_trace + torch.fx.passes.split_module
(4 partitions by node index) on an nn.Sequential MLP of Linear+ReLU with about
--fx-nodes nodes, and on the same transformer model gen_ir.py describes
(model.py), per node and per block. Each fx size is compared with the pippy
depth of about as many ops (within 10%): the default sizes match the 200- and
2000-block depths.

The peak RSS of a split is read from one more run under /usr/bin/time (when
installed): a child of this Python process would report the Python
process's own peak as a floor.

Usage: /usr/bin/python3 bench/compile/run.py --pippy-opt build/bin/pippy-opt \
           [--depths 200,500,1000,2000] [--stages 4] [--repeat 3] \
           [--fx-nodes 1000,10000,100000] [--fx-blocks 50,250,500] [--no-fx] \
           --out results.json
The fx part needs torch (/usr/bin/python3 here); without it, pass --no-fx.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_ir  # noqa: E402

OP_LINE = re.compile(r"^\s+(?:%\S+ = )?[a-z_]+\.[A-Za-z0-9_.]+[ (\"]", re.M)
TIMING_LINE = re.compile(r"^\s+([\d.]+) \(\s*[\d.]+%\)\s+(.*\S)\s*$")


def count_ops(text):
    """Ops inside functions, read back from the text: one op per line in
    pippy-import's output; module, func.func and return are not counted."""
    return sum(1 for m in OP_LINE.finditer(text)
               if not m.group(0).lstrip().startswith(("func.func", "return")))


def run_child(cmd, timeout=600):
    """Runs cmd; returns ({wall_s, cpu_s (user+sys), maxrss_mib}, stderr text).
    The child is reaped with wait4 so that its own resource usage is read."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        err = proc.stderr.read()
        proc.stderr.close()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("failed (exit %d%s): %s\n%s" % (
            proc.returncode, ", killed after %ds" % timeout if proc.returncode < 0 else "",
            " ".join(cmd), err.decode(errors="replace")))
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "maxrss_mib": ru.ru_maxrss / 1024.0}, err.decode(errors="replace")


def parse_timing(stderr):
    """{name: seconds} from --mlir-timing's report."""
    out = {}
    for line in stderr.splitlines():
        m = TIMING_LINE.match(line)
        if m:
            out[m.group(2).replace("'", "")] = float(m.group(1))
    return out


def peak_rss_mib(cmd):
    """Peak RSS of cmd from /usr/bin/time -f %M, or None without it."""
    if not os.access("/usr/bin/time", os.X_OK):
        return None
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, check=True).stderr
    return int(out.strip().splitlines()[-1]) / 1024.0


def best(samples, key="wall_s"):
    return min(s[key] for s in samples)


def bench_pippy(args, work):
    opt = args.pippy_opt
    split_opt = "--pippy-split=stages=%d policy=balanced" % args.stages
    empty = os.path.join(work, "empty.mlir")
    with open(empty, "w") as f:
        f.write("module {}\n")
    depths = []
    for blocks in args.depths:
        path = os.path.join(work, "model_%d.mlir" % blocks)
        text, _ = gen_ir.generate(blocks, args.width, 16, 2, "model.pt", "model.safetensors")
        with open(path, "w") as f:
            f.write(text)
        ops = count_ops(text)
        # Check once that it splits into the stages asked for (also warms the
        # file cache and the binary).
        pipe = os.path.join(work, "pipe_%d.mlir" % blocks)
        subprocess.run([opt, path, split_opt, "-o", pipe], check=True)
        with open(pipe) as f:
            stages = len(re.findall(r"pippy\.stage \d+", f.read()))
        os.remove(pipe)
        if stages != args.stages:
            raise SystemExit("%s split into %d stages, expected %d" % (path, stages, args.stages))
        # The same IR as MLIR bytecode, which pippy-opt reads and writes too.
        bc = os.path.join(work, "model_%d.mlirbc" % blocks)
        subprocess.run([opt, path, "--emit-bytecode", "-o", bc], check=True)
        depths.append({"blocks": blocks, "ops": ops, "bytes": len(text), "path": path,
                       "bc_path": bc, "split": [], "parse": [], "split_bc": [],
                       "timing": {}, "timing_no_verify": {}})
        print("generated %d blocks: %d ops, %.1f MB" % (blocks, ops, len(text) / 1e6), flush=True)

    start = []
    for r in range(args.repeat):
        start.append(run_child([opt, empty, "-o", os.devnull])[0])
        for d in depths:
            d["parse"].append(run_child([opt, d["path"], "-o", os.devnull])[0])
            d["split"].append(run_child([opt, d["path"], split_opt, "-o", os.devnull])[0])
            d["split_bc"].append(run_child([opt, d["bc_path"], split_opt, "--emit-bytecode",
                                            "-o", os.devnull])[0])
        print("timing round %d/%d done" % (r + 1, args.repeat), flush=True)
    for d in depths:
        _, err = run_child([opt, d["path"], split_opt, "-o", os.devnull, "--mlir-timing"])
        d["timing"] = parse_timing(err)
        _, err = run_child([opt, d["path"], split_opt, "-o", os.devnull, "--mlir-timing",
                            "--verify-each=0"])
        d["timing_no_verify"] = parse_timing(err)
    start_s = best(start)
    for d in depths:
        n = d["ops"]
        d["split_s"] = best(d["split"])
        d["parse_s"] = best(d["parse"])
        d["split_only_s"] = d["split_s"] - d["parse_s"]
        d["split_us_per_op"] = d["split_s"] / n * 1e6
        d["parse_us_per_op"] = d["parse_s"] / n * 1e6
        d["split_only_us_per_op"] = d["split_only_s"] / n * 1e6
        d["split_minus_start_us_per_op"] = (d["split_s"] - start_s) / n * 1e6
        d["split_cpu_us_per_op"] = best(d["split"], "cpu_s") / n * 1e6
        d["maxrss_mib"] = peak_rss_mib([opt, d["path"], split_opt, "-o", os.devnull])
        d["split_bc_s"] = best(d["split_bc"])
        d["split_bc_us_per_op"] = d["split_bc_s"] / n * 1e6
        del d["path"]
        del d["bc_path"]
    return {"startup_s": start_s, "startup_samples": start, "depths": depths}


def bench_fx(args):
    import torch
    import torch.fx
    import torch.nn as nn
    from torch.fx.passes.split_module import split_module

    import model as bench_model

    torch.set_num_threads(1)

    def split_time(make, parts):
        m = make()
        t0 = time.perf_counter()
        gm = torch.fx.symbolic_trace(m)
        t1 = time.perf_counter()
        nodes = list(gm.graph.nodes)
        index = {node: i for i, node in enumerate(nodes)}
        n = len(nodes)
        split_module(gm, m, lambda node: min(parts * index[node] // n, parts - 1))
        t2 = time.perf_counter()
        return n, t1 - t0, t2 - t1

    def mlp(layers):
        mods = []
        for _ in range(layers):
            mods += [nn.Linear(16, 16), nn.ReLU()]
        return nn.Sequential(*mods)

    def measure(make, label, size):
        samples = [split_time(make, args.stages) for _ in range(args.repeat)]
        n = samples[0][0]
        tr = min(s[1] for s in samples)
        sp = min(s[2] for s in samples)
        tot = min(s[1] + s[2] for s in samples)
        row = {"size": size, "nodes": n, "trace_s": tr, "split_s": sp, "total_s": tot,
               "us_per_node": tot / n * 1e6,
               "samples": [{"trace_s": s[1], "split_s": s[2]} for s in samples]}
        print("fx %s %d: %d nodes, %.3f s (%.1f us/node)" % (label, size, n, tot, tot / n * 1e6),
              flush=True)
        return row

    split_time(lambda: mlp(100), args.stages)  # warm up imports and caches
    out = {"torch": torch.__version__, "mlp": [], "transformer": []}
    for nodes in args.fx_nodes:
        layers = max(1, (nodes - 2) // 2)  # placeholder + 2 per layer + output
        out["mlp"].append(measure(lambda: mlp(layers), "mlp layers", layers))
    for blocks in args.fx_blocks:
        row = measure(lambda: bench_model.build(blocks, args.width), "transformer blocks",
                      blocks)
        row["s_per_block"] = row["total_s"] / blocks
        out["transformer"].append(row)
    return out


def summarize(res):
    p = res["pippy"]["depths"]
    small, large = p[0], p[-1]
    s = {
        "growth_split_us_per_op": large["split_us_per_op"] / small["split_us_per_op"],
        "growth_split_minus_start_us_per_op":
            large["split_minus_start_us_per_op"] / small["split_minus_start_us_per_op"],
        "growth_split_only_us_per_op":
            large["split_only_us_per_op"] / small["split_only_us_per_op"],
        "growth_parse_us_per_op": large["parse_us_per_op"] / small["parse_us_per_op"],
        "growth_split_cpu_us_per_op": large["split_cpu_us_per_op"] / small["split_cpu_us_per_op"],
        "growth_split_bc_us_per_op": large["split_bc_us_per_op"] / small["split_bc_us_per_op"],
        "growth_target": 1.3,
    }
    fx = res.get("fx")
    if fx and fx["mlp"]:
        # fx at its largest size against pippy at the depth with the closest
        # op count, and against pippy's largest depth.
        f = fx["mlp"][-1]
        near = min(p, key=lambda d: abs(d["ops"] - f["nodes"]))
        s["fx_mlp_nodes"] = f["nodes"]
        s["fx_mlp_us_per_node"] = f["us_per_node"]
        s["pippy_matched_depth_ops"] = near["ops"]
        for tag, d in (("matched", near), ("largest", large)):
            s["ratio_%s_bytecode" % tag] = f["us_per_node"] / d["split_bc_us_per_op"]
            s["ratio_%s_end_to_end" % tag] = f["us_per_node"] / d["split_us_per_op"]
            s["ratio_%s_split_only" % tag] = f["us_per_node"] / d["split_only_us_per_op"]
        s["ratio_target"] = 20.0
        # Every fx size that has a pippy depth of about as many ops.
        s["matched"] = []
        for f in fx["mlp"]:
            d = min(p, key=lambda d: abs(d["ops"] - f["nodes"]))
            if abs(d["ops"] - f["nodes"]) > 0.1 * f["nodes"]:
                continue
            s["matched"].append({
                "fx_nodes": f["nodes"], "fx_us_per_node": f["us_per_node"],
                "pippy_ops": d["ops"], "pippy_us_per_op": d["split_us_per_op"],
                "ratio_end_to_end": f["us_per_node"] / d["split_us_per_op"],
                "ratio_bytecode": f["us_per_node"] / d["split_bc_us_per_op"],
                "ratio_split_only": f["us_per_node"] / d["split_only_us_per_op"]})
    if fx and fx["transformer"]:
        f = fx["transformer"][-1]
        s["fx_transformer_s_per_block"] = f["s_per_block"]
        s["pippy_s_per_block_largest"] = large["split_s"] / large["blocks"]
        s["ratio_per_block_end_to_end"] = f["s_per_block"] / s["pippy_s_per_block_largest"]
        s["ratio_per_block_split_only"] = f["s_per_block"] / (large["split_only_s"] /
                                                              large["blocks"])
    return s


def print_report(res):
    p = res["pippy"]
    print()
    print("machine: %s; load average before %s, after %s" % (
        res["machine"]["cpu"], res["machine"]["loadavg_before"], res["machine"]["loadavg_after"]))
    print("pippy-opt start-up (empty module): %.3f s" % p["startup_s"])
    print("%7s %8s %9s %9s %11s %11s %11s %10s %10s %8s" % (
        "blocks", "ops", "split s", "parse s", "split-parse", "split us/op", "parse us/op",
        "s-p us/op", "cpu us/op", "RSS MiB"))
    for d in p["depths"]:
        print("%7d %8d %9.3f %9.3f %11.3f %11.2f %11.2f %10.2f %10.2f %8.0f" % (
            d["blocks"], d["ops"], d["split_s"], d["parse_s"], d["split_only_s"],
            d["split_us_per_op"], d["parse_us_per_op"], d["split_only_us_per_op"],
            d["split_cpu_us_per_op"], d["maxrss_mib"] or float("nan")))
    print("(split-parse: the split passes' own cost; cpu: user+sys of the split run)")
    print()
    print("bytecode in and out (--emit-bytecode):")
    for d in p["depths"]:
        print("%7d %8d %9.3f s %9.2f us/op" % (d["blocks"], d["ops"], d["split_bc_s"],
                                              d["split_bc_us_per_op"]))
    print()
    print("per-op time by phase, us/op (one --mlir-timing run; no-verify: --verify-each=0)")
    names = [("Parser", "parse"), ("PippySplitStages", "split"),
             ("PippyResolveTied", "tied"), ("PippyResolveSkips", "skips"),
             ("func.func Pipeline", "passes"), ("Output", "print")]
    print("%7s " % "blocks" + " ".join("%9s" % short for _, short in names)
          + " %16s" % "passes no-verify")
    for d in p["depths"]:
        t, tn, n = d["timing"], d["timing_no_verify"], d["ops"]
        print("%7d " % d["blocks"] + " ".join("%9.2f" % (t.get(k, 0) / n * 1e6) for k, _ in names)
              + " %16.2f" % (tn.get("func.func Pipeline", 0) / n * 1e6))
    fx = res.get("fx")
    if fx:
        print()
        print("torch.fx %s: symbolic_trace + split_module into %d partitions" % (
            fx["torch"], res["args"]["stages"]))
        print("%12s %6s %7s %9s %9s %9s %10s" % ("model", "size", "nodes", "trace s", "split s",
                                                 "total s", "us/node"))
        for kind, rows in (("mlp layers", fx["mlp"]), ("xfmr blocks", fx["transformer"])):
            for r in rows:
                print("%12s %6d %7d %9.3f %9.3f %9.3f %10.1f" % (
                    kind, r["size"], r["nodes"], r["trace_s"], r["split_s"], r["total_s"],
                    r["us_per_node"]))
    s = res["summary"]
    print()
    print("growth of per-op time, %d -> %d ops (target <= %.1fx):" % (
        p["depths"][0]["ops"], p["depths"][-1]["ops"], s["growth_target"]))
    print("  split wall %.2fx, split wall minus start-up %.2fx, split - parse %.2fx, "
          "parse %.2fx, split cpu %.2fx" % (
              s["growth_split_us_per_op"], s["growth_split_minus_start_us_per_op"],
              s["growth_split_only_us_per_op"], s["growth_parse_us_per_op"],
              s["growth_split_cpu_us_per_op"]))
    print("  bytecode in and out %.2fx" % s["growth_split_bc_us_per_op"])
    if "ratio_matched_end_to_end" in s:
        print("fx / pippy per node (target >= %.0fx):" % s["ratio_target"])
        if s["pippy_matched_depth_ops"] != p["depths"][-1]["ops"]:
            print("  fx MLP %d nodes (%.1f us/node) vs pippy's largest depth, %d ops: end to end "
                  "%.1fx (bytecode %.1fx), split passes only %.1fx" % (
                      s["fx_mlp_nodes"], s["fx_mlp_us_per_node"], p["depths"][-1]["ops"],
                      s["ratio_largest_end_to_end"], s["ratio_largest_bytecode"],
                      s["ratio_largest_split_only"]))
    for m in s.get("matched", []):
        print("  fx MLP %d nodes (%.1f us/node) vs pippy %d ops (%.2f us/op), same depth: "
              "end to end %.1fx (bytecode %.1fx), split passes only %.1fx" % (
                  m["fx_nodes"], m["fx_us_per_node"], m["pippy_ops"], m["pippy_us_per_op"],
                  m["ratio_end_to_end"], m["ratio_bytecode"], m["ratio_split_only"]))
    if "ratio_per_block_end_to_end" in s:
        print("same transformer, per block: fx %.2f ms, pippy %.2f ms end to end: %.1fx "
              "(split passes only: %.1fx)" % (
                  s["fx_transformer_s_per_block"] * 1e3, s["pippy_s_per_block_largest"] * 1e3,
                  s["ratio_per_block_end_to_end"], s["ratio_per_block_split_only"]))


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description="Compile-time benchmark of pippy-opt --pippy-split")
    ap.add_argument("--pippy-opt", required=True)
    ap.add_argument("--depths", type=ints, default=[200, 500, 1000, 2000],
                    help="numbers of blocks, smallest first (default 200,500,1000,2000)")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best is kept)")
    ap.add_argument("--fx-nodes", type=ints, default=[1000, 10000, 100000],
                    help="approximate node counts of the fx MLPs")
    ap.add_argument("--fx-blocks", type=ints, default=[50, 250, 500],
                    help="depths of the fx transformer")
    ap.add_argument("--no-fx", action="store_true", help="skip the torch.fx comparison")
    ap.add_argument("--workdir", help="where to write the generated IR (default: a temp dir)")
    ap.add_argument("--out", required=True, help="results JSON")
    args = ap.parse_args()

    res = {"args": {k: v for k, v in vars(args).items()},
           "machine": {"cpu": platform.processor() or platform.machine(),
                       "cores": os.cpu_count(),
                       "loadavg_before": [round(x, 2) for x in os.getloadavg()],
                       "date": datetime.datetime.now().isoformat(timespec="seconds")}}
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            if m:
                res["machine"]["cpu"] = m.group(1)
    except OSError:
        pass
    t0 = time.perf_counter()
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        res["pippy"] = bench_pippy(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="pippy-bench-compile.") as work:
            res["pippy"] = bench_pippy(args, work)
    if not args.no_fx:
        res["fx"] = bench_fx(args)
    res["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    res["elapsed_s"] = time.perf_counter() - t0
    res["summary"] = summarize(res)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print_report(res)
    print("\nwrote %s (%.0f s)" % (args.out, res["elapsed_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
