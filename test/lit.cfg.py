# lit configuration for pippy's FileCheck tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "pippy"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit", "models"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pippy_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

config.substitutions.append(("%pippy_python", config.python3))
config.substitutions.append(("%samples_dir", config.samples_dir))
config.substitutions.append(("%pippy_src_root", config.pippy_src_root))
config.substitutions.append(("%pippy_bin", config.pippy_tools_dir))

tool_dirs = [config.pippy_tools_dir, config.llvm_tools_dir, "/usr/lib/llvm-22/bin"]
llvm_config.add_tool_substitutions(["pippy-opt", "pippy-import", "pippy-run"], tool_dirs)
llvm_config.with_environment("PATH", config.pippy_tools_dir, append_path=True)
llvm_config.with_environment("PATH", "/usr/lib/llvm-22/bin", append_path=True)

# The tools link LLVM's static components, not libLLVM.so (PIPPY_STATIC_LLVM).
if config.pippy_static_llvm == "ON":
    config.available_features.add("static-llvm")

# Network namespaces (root and iproute2): two-hosts.test runs two "hosts" on
# one machine, joined by a virtual Ethernet pair. The probe does what the
# test does: a namespace, a command run in it, a veth pair.
def _can_make_network_namespaces():
    import subprocess
    name = f"pippy-lit-probe-{os.getpid()}"
    veth = f"plp{os.getpid()}"
    def ip(*args):
        try:
            return subprocess.run(["ip", *args], capture_output=True,
                                  timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False
    if not ip("netns", "add", name):
        return False
    works = (ip("netns", "exec", name, "ip", "link", "set", "lo", "up") and
             ip("link", "add", veth, "type", "veth", "peer", "name",
                veth + "b"))
    ip("link", "delete", veth)
    ip("netns", "delete", name)
    return works


if _can_make_network_namespaces():
    config.available_features.add("netns")
