"""Two hosts on one machine: network namespaces joined by a virtual
Ethernet pair, each with its own /etc/hosts (ip netns exec mounts
/etc/netns/NAME/hosts over it).

Usage: two_hosts.py OUT_DIR BIN_DIR   (needs root and iproute2)

Host 0 (10.231.0.1) names itself pippy-master at 127.0.1.1, as Debian's
installer writes /etc/hosts; host 1 (10.231.0.2) knows pippy-master as
10.231.0.1. Node 0 starts with pippy-run's --nnodes/--node-rank, node 1 with
torchrun's variables; GLOO_SOCKET_IFNAME is unset on both. Their losses and
weights must equal a one-host two-rank run's bit for bit. Then a "host" with
loopback alone, whose ranks say they are on different hosts, must stop
naming GLOO_SOCKET_IFNAME.
Prints one line per check; exits non-zero when one fails.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_check  # noqa: E402
from dist_check import M  # noqa: E402

PORT = "29500"
TAG = str(os.getpid())
HOSTS = [f"pippy-h0-{TAG}", f"pippy-h1-{TAG}", f"pippy-h2-{TAG}"]
HOSTS_FILES = ["127.0.0.1 localhost\n127.0.1.1 pippy-master\n",
               "127.0.0.1 localhost\n10.231.0.1 pippy-master\n",
               "127.0.0.1 localhost\n127.0.1.1 pippy-master\n"]


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def make_hosts():
    for name, hosts in zip(HOSTS, HOSTS_FILES):
        ip("netns", "add", name)
        os.makedirs(f"/etc/netns/{name}", exist_ok=True)
        with open(f"/etc/netns/{name}/hosts", "w") as f:
            f.write(hosts)
        ip("-n", name, "link", "set", "lo", "up")
    ends = [f"pv0-{TAG}", f"pv1-{TAG}"]
    ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
    for i, end in enumerate(ends):
        ip("link", "set", end, "netns", HOSTS[i])
        ip("-n", HOSTS[i], "addr", "add", f"10.231.0.{i + 1}/24", "dev", end)
        ip("-n", HOSTS[i], "link", "set", end, "up")


def remove_hosts():
    for name in HOSTS:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
        shutil.rmtree(f"/etc/netns/{name}", ignore_errors=True)


def node(out, bindir, host, rank_env, args):
    """Starts one pippy-run inside namespace `host`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLOO_SOCKET_IFNAME", "RANK", "WORLD_SIZE",
                        "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE")}
    env.update(rank_env)
    cmd = ["ip", "netns", "exec", host, f"{bindir}/pippy-run",
           f"{out}/pipe.mlir", "--schedule", "1f1b", "--microbatches",
           str(M), "--data", f"{out}/data.safetensors", "--optimizer",
           "adamw", "--lr", "0.01", "--timeout", "20"] + args
    return subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


def torchrun_env(rank):
    return {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "pippy-master",
            "MASTER_PORT": PORT}


def two_hosts(out, bindir):
    files = ["--steps", "3", "--metrics", f"{out}/hosts.json",
             "--save-weights", f"{out}/hosts.safetensors"]
    procs = [node(out, bindir, HOSTS[0], {},
                  ["--nproc", "1", "--nnodes", "2", "--node-rank", "0",
                   "--master-addr", "pippy-master", "--master-port", PORT]
                  + files),
             node(out, bindir, HOSTS[1], torchrun_env(1), files)]
    texts = [p.communicate(timeout=120)[0] for p in procs]
    codes = [p.returncode for p in procs]
    print(f"two hosts: exit statuses {codes}")
    if codes != [0, 0]:
        print("".join(texts))
        return False
    a = dist_check.step_losses(f"{out}/one-node.json")
    b = dist_check.step_losses(f"{out}/hosts.json")
    same = len(a) == 3 and a == b
    print(f"two-host losses {'equal' if same else 'DIFFER FROM'} the "
          f"one-host run's")
    same_w = dist_check.same_weights(f"{out}/one-node.safetensors",
                                     f"{out}/hosts.safetensors")
    print(f"two-host weights {'equal' if same_w else 'DIFFER FROM'} the "
          f"one-host run's")
    return same and same_w


def loopback_only(out, bindir):
    procs = [node(out, bindir, HOSTS[2], torchrun_env(r), ["--steps", "1"])
             for r in (0, 1)]
    texts = [p.communicate(timeout=120)[0] for p in procs]
    codes = [p.returncode for p in procs]
    print(f"a host with loopback alone: exit statuses {codes}")
    errors = sorted({line for t in texts for line in t.splitlines()
                     if "error" in line})
    print("\n".join(errors))
    return codes == [1, 1]


def main():
    out, bindir = sys.argv[1:3]
    dist_check.build(out, bindir)
    dist_check.train(out, bindir, 3, [
        "--metrics", f"{out}/one-node.json", "--save-weights",
        f"{out}/one-node.safetensors"])
    remove_hosts()
    try:
        make_hosts()
        ok = two_hosts(out, bindir)
        ok &= loopback_only(out, bindir)
    finally:
        remove_hosts()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
