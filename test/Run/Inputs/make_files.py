"""Writes the weights and data files the pippy-run tests use into OUT_DIR."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import st  # noqa: E402

out = sys.argv[1]
torch.manual_seed(0)
st.save(f"{out}/linear.safetensors",
        {"fc.weight": torch.randn(3, 4), "fc.bias": torch.randn(3)})
st.save(f"{out}/linear-missing.safetensors", {"fc.weight": torch.randn(3, 4)})
st.save(f"{out}/linear-shape.safetensors",
        {"fc.weight": torch.randn(4, 4), "fc.bias": torch.randn(3)})
st.save(f"{out}/data.safetensors",
        {"input": torch.randn(6, 4), "target": torch.tensor([0, 1, 2, 0, 1, 2])})
st.save(f"{out}/data-dtype.safetensors",
        {"input": torch.randn(6, 4).double(), "target": torch.zeros(6).long()})
st.save(f"{out}/data-width.safetensors",
        {"input": torch.randn(6, 5), "target": torch.zeros(6).long()})
st.save(f"{out}/data-notarget.safetensors", {"input": torch.randn(6, 4)})
st.save(f"{out}/data-floattarget.safetensors",
        {"input": torch.randn(6, 4), "target": torch.randn(6, 3)})
st.save(f"{out}/data-rows.safetensors",
        {"input": torch.randn(5, 4), "target": torch.zeros(5).long()})
with open(f"{out}/corrupt.safetensors", "wb") as f:
    f.write(b"\xff\xff\xff\xff\xff\xff\xff\x7f{}")

# A two-stage pipeline (8 -> 32 -> 4) for the stage executable tests.
st.save(f"{out}/pipe.safetensors",
        {"0.weight": torch.randn(32, 8) * 0.3, "0.bias": torch.randn(32) * 0.1,
         "1.weight": torch.randn(4, 32) * 0.3, "1.bias": torch.randn(4) * 0.1})
st.save(f"{out}/pipe-data.safetensors",
        {"input": torch.randn(16, 8), "target": torch.randint(0, 4, (16,))})

# For outputs.test (after the others, whose values stay as they were).
plain = st.load(f"{out}/data.safetensors")[0]
st.save(f"{out}/data-int32target.safetensors",
        {"input": plain["input"], "target": plain["target"].int()})
st.save(f"{out}/data-badclass.safetensors",
        {"input": torch.randn(6, 4), "target": torch.tensor([0, 1, 2, 0, 7, 2])})
st.save(f"{out}/embed.safetensors", {"emb.weight": torch.randn(5, 4)})
st.save(f"{out}/data-badtoken.safetensors",
        {"input": torch.tensor([[0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 9, 1]]),
         "target": torch.randn(4, 3, 4)})
