"""AdamW / Adam whose fused update runs in two halves, one on the spare core's thread where the step lends one.

The fused CPU kernel updates each element from its own gradient and moments, so
updating the tensors in two sets, each set in one kernel call on its own thread,
gives every element the numbers one call gives (utils/spare_thread.py). The sets
are balanced by element count. Anything the split does not cover (a closure, a
differentiable or capturable optimizer, the per-tensor loop, a gradient scaler's
``grad_scale``) takes PyTorch's own ``step``; so does a thread no step lends a
worker to (the bi-encoder and cross-encoder training, one core).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.optim.adam import adam

from twotower.utils.spare_thread import beside, halves, lent

__all__ = ["TwinAdam", "TwinAdamW"]


class _Twin:
    """The split ``step`` shared by :class:`TwinAdam` and :class:`TwinAdamW`."""

    param_groups: list[dict[str, Any]]

    def _splits(self, closure: Any) -> bool:
        return (closure is None and lent() is not None and hasattr(self, "_init_group")
                and getattr(self, "grad_scale", None) is None and getattr(self, "found_inf", None) is None
                and all(g.get("fused") and "decoupled_weight_decay" in g and not g.get("differentiable") and not g.get("capturable")
                        and not g.get("amsgrad") and not g.get("maximize") for g in self.param_groups))

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        if not self._splits(closure):
            return super().step(closure)  # type: ignore[misc]
        for group in self.param_groups:
            # params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs (empty without amsgrad), state_steps
            lists: tuple[list[torch.Tensor], ...] = ([], [], [], [], [], [])
            has_complex = self._init_group(group, *lists)  # type: ignore[attr-defined]
            first, second = halves([p.numel() for p in lists[0]])
            beta1, beta2 = group["betas"]

            def update(sel: list[int], group: dict[str, Any] = group, has_complex: bool = has_complex) -> None:
                if sel:
                    adam(*([t[i] for i in sel] if t else t for t in lists), amsgrad=False, has_complex=has_complex,
                         beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
                         eps=group["eps"], maximize=False, foreach=group["foreach"], capturable=False,
                         differentiable=False, fused=True, grad_scale=None, found_inf=None,
                         decoupled_weight_decay=group.get("decoupled_weight_decay", False))

            beside(lambda: update(second), lambda: update(first))
        return None


class TwinAdamW(_Twin, torch.optim.AdamW):
    """:class:`torch.optim.AdamW` with the split fused step (module docstring)."""


class TwinAdam(_Twin, torch.optim.Adam):
    """:class:`torch.optim.Adam` with the split fused step (module docstring)."""
