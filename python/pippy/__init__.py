"""pippy's Python side: `pipe_split()`, the split marker of a traced model,
and `traceable_batch_norm(model)`, which makes BatchNorm layers with
momentum=None traceable for training (batchnorm.py).

    import sys; sys.path.insert(0, "PIPPY/python")
    from pippy import pipe_split

    class Model(nn.Module):
        def forward(self, x):
            x = self.encoder(x)
            pipe_split()          # stage 0 ends here
            return self.head(x)

`torch.jit.trace` records each call as the operator `pippy::_pipe_split`
(registered here with torch.library; side-effecting, so the trace keeps
it), and `pippy-import` turns it into a `pippy.split_point`, which
`pippy-opt --pippy-outline-stages` (or `--pippy-split` without `stages=`)
cuts at, as PiPPy's `pipe_split()` does. Outside tracing the call does
nothing.
"""
import torch

from .batchnorm import traceable_batch_norm

__all__ = ["pipe_split", "traceable_batch_norm"]

if not hasattr(torch.ops.pippy, "_pipe_split"):
    _LIBRARY = torch.library.Library("pippy", "DEF")
    _LIBRARY.define("_pipe_split() -> ()", alias_analysis="CONSERVATIVE")
    _LIBRARY.impl("_pipe_split", lambda: None, "CompositeExplicitAutograd")


def pipe_split():
    """Ends the current pipeline stage at this point of forward."""
    torch.ops.pippy._pipe_split()
