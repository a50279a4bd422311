"""Writes the fixture of torch2-module.test: a module as PyTorch 2.x saves
it, calling ATen operators that libtorch 1.13 lacks. Needs PyTorch 2.5 or
later (scaled_dot_product_attention's enable_gqa, rms_norm). This machine's
1.13 cannot run it; the Debian 13 root that scripts/torch2-check.sh makes
(build-torch2/root, PyTorch 2.6) can, with this tree mounted at /src as
that script mounts it:

  python3 /src/test/Import/Inputs/make_torch2_module.py OUT_DIR

  torch2-attention.pt               the traced module (TorchScript)
  torch2-attention.data.safetensors an input of 4 rows and zero targets
  torch2-attention.out.safetensors  PyTorch's output for that input
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import st  # noqa: E402

SEQ, D = 6, 8


class Attention(nn.Module):
    """Causal attention with an explicit scale, then an RMS norm."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.norm = nn.Parameter(torch.linspace(0.5, 1.5, D))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        h = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
        return F.rms_norm(h + x, (D,), self.norm, 1e-5)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Attention().eval()
    x = torch.randn(4, SEQ, D)
    traced = torch.jit.trace(model, (x[:2],))
    traced.save(os.path.join(out, "torch2-attention.pt"))
    st.save(os.path.join(out, "torch2-attention.data.safetensors"),
            {"input": x, "target": torch.zeros(4)})
    with torch.no_grad():
        st.save(os.path.join(out, "torch2-attention.out.safetensors"),
                {"output": model(x)})


if __name__ == "__main__":
    main()
