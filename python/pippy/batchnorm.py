"""BatchNorm with `momentum=None` (a cumulative moving average), made
traceable for training.

PyTorch's BatchNorm with `momentum=None` updates its running statistics with
the factor `1 / num_batches_tracked`, which it computes as a Python float:
`torch.jit.trace` bakes the factor of the traced call in as a constant (and
its own trace check refuses the module). `traceable_batch_norm(model)` gives
each such layer a forward that computes the factor as a tensor, so the trace
keeps it and pippy trains the layer as PyTorch does:

    from pippy import traceable_batch_norm
    traced = torch.jit.trace(traceable_batch_norm(model), example)

The layer normalises with the batch's statistics as before (the kernel runs
on copies of the running statistics, with momentum 0) and then updates them
itself: the running mean and the unbiased running variance
move by `1 / num_batches_tracked` towards the batch's, after the count is
incremented, as PyTorch's kernel does; in eval mode it reads them. The
results equal PyTorch's to rounding (the update's arithmetic is not the
kernel's own).
"""
import types

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ["traceable_batch_norm"]


def _cumulative_forward(self, input):
    self._check_input_dim(input)
    if not self.training:
        return F.batch_norm(input, self.running_mean, self.running_var,
                            self.weight, self.bias, False, 0.0, self.eps)
    # The kernel gets copies (with momentum 0 it leaves them as they are):
    # its backward keeps them, and the update below rewrites the buffers.
    # pippy-run --infer, which runs this trace with `training` false, reads
    # the running statistics through the copies.
    out = F.batch_norm(input, self.running_mean.clone(),
                       self.running_var.clone(), self.weight, self.bias, True,
                       0.0, self.eps)
    with torch.no_grad():
        self.num_batches_tracked.add_(1)
        factor = 1.0 / self.num_batches_tracked.to(input.dtype)
        dims = [0] + list(range(2, input.dim()))
        mean = input.mean(dims)
        var = input.var(dims, unbiased=True)
        self.running_mean.copy_(mean * factor +
                                self.running_mean * (1 - factor))
        self.running_var.copy_(var * factor + self.running_var * (1 - factor))
    return out


def traceable_batch_norm(model):
    """Gives every BatchNorm of `model` with momentum=None (and running
    statistics) the traceable forward above; returns `model`."""
    for module in model.modules():
        if (isinstance(module, _BatchNorm) and module.momentum is None
                and module.track_running_stats):
            module.forward = types.MethodType(_cumulative_forward, module)
    return model
