"""The item tower's backward pass on a second thread, beside the user tower's on the step's own.

The towers of a step share no weights, so once the loss has given each tower
its output's gradient, their backward passes are independent: the step splits
the graph at the item tower's output ``c`` (the loss reads ``c' = c.detach()``),
takes ``d loss / d (q, c')`` and runs ``c.backward(gc)`` on the side thread
while ``q.backward(gq)`` runs here. A loss that can (the in-batch CPU kernel) computes ``gc`` itself
on the side thread (:class:`~twotower.losses.side_gradient.SideGradient`), so the item tower's backward follows it there
and the step's own thread computes only ``gq``. PyTorch's autograd engine lets go of the
GIL while it computes, so on the CPU the two passes keep a core each busy.
Each tower's gradients come from the same ops, in the same order, as in one
backward pass of the whole graph: the numbers are those of ``loss.backward()``,
bit for bit.

The forward passes stay on one thread, in order: run side by side they spent
most of what they saved waiting for each other's GIL (ML-1M default model, one
intra-op thread: 0.3 ms of a 9 ms step), and the dropout masks they draw from
torch's default generator would depend on the threads' timing.

:func:`item_side_blocker` says why a model cannot take this path: weights
shared by the towers (two passes adding into one gradient at once), or a loss
with weights of its own (``d loss / d (q, c')`` leaves them out).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from twotower.losses.side_gradient import SideGradient
from twotower.models.two_tower import TwoTowerModel
from twotower.training.side_worker import SideWorker

__all__ = ["item_side_blocker", "split_item_graph", "side_gradient", "backward_beside"]


def item_side_blocker(model: TwoTowerModel, loss: nn.Module) -> str | None:
    """Why the item tower's backward cannot run on a second thread during this model's steps (None: it can)."""
    user = {id(p) for p in model.user_tower.parameters()}
    user |= {id(p) for t in model.user_tower.tied_tables for p in t.parameters()}  # SASRec's tie: not a submodule
    if any(id(p) in user for p in model.item_tower.parameters()):
        return "the towers share weights"
    if any(p.requires_grad for p in loss.parameters()):
        return "the loss has weights of its own"
    return None


def split_item_graph(c: Tensor) -> Tensor:
    """What the loss reads of the item tower's output ``c``: ``c`` cut from its graph (a leaf needing the gradient
    ``c`` needs), so that the loss's backward stops there and :func:`backward_beside` runs the rest."""
    return c.detach().requires_grad_(c.requires_grad)


def side_gradient(q: Tensor, c: Tensor, side: SideWorker) -> SideGradient | None:
    """A :class:`SideGradient` on ``side`` for a loss over ``q`` and ``c``, where both need a gradient (None: not)."""
    return SideGradient(side.submit) if q.requires_grad and c.requires_grad else None


def backward_beside(loss: Tensor, q: Tensor, c_in: Tensor, c: Tensor, side: SideWorker,
                    deferred: SideGradient | None = None) -> None:
    """``loss.backward()`` through ``q`` here and through ``c`` (read by the loss as ``c_in``) on ``side``;
    ``deferred``: the loss's :class:`SideGradient`, whose ``grad`` (once set) is ``c``'s, computed on ``side``."""
    if deferred is not None and deferred.grad is not None:
        (gq,) = torch.autograd.grad(loss, [q])  # queues the loss's last scaling of gc, when there is one

        def item_pass() -> None:  # behind the loss's jobs on side, which complete c's gradient
            c.backward(deferred.wait())

    else:
        ends = [t for t in (q, c_in) if t.requires_grad]
        if not ends:
            loss.backward()  # raises as the unsplit step did: nothing to differentiate
            return
        grads = torch.autograd.grad(loss, ends)
        gq = grads[0] if q.requires_grad else None
        gc = grads[-1] if c_in.requires_grad else None
        item_pass = (lambda: c.backward(gc)) if gc is not None else None
    pending = side.submit(item_pass) if item_pass is not None else None
    try:
        if gq is not None:
            q.backward(gq)
    finally:
        if pending is not None:
            pending.result()  # waited for even when the user tower's pass raised; raises what the item tower's raised
