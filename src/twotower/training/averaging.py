"""An exponential moving average of the weights (Polyak averaging), for validation and the saved model.

After every optimiser step ``t`` the shadow copy moves towards the live weights,

    shadow <- d_t * shadow + (1 - d_t) * weights,    d_t = min(decay, (1 + t) / (10 + t)),

the warm-up in ``d_t`` keeping the random initial weights from lingering in
the average (Polyak & Juditsky, "Acceleration of stochastic approximation by
averaging", SIAM J. Control Optim. 1992; the warm-up as in TensorFlow's
``ExponentialMovingAverage(num_updates=...)``). Training keeps stepping the
live weights; :meth:`WeightAverage.swapped` puts the average in their place
for validation and saving, and puts them back after. With small, noisy
batches (``train.batch_size = 16`` windows in the ML-1M recipe) the average
sits nearer the bottom of the valley than any single step's weights.

Example::

    avg = WeightAverage(model.parameters(), decay=0.999)
    for batch in batches:
        step(batch)        # forward, backward, optimizer.step()
        avg.update()
    with avg.swapped():
        validate(model)    # on the averaged weights
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from twotower.errors import ConfigError

__all__ = ["WeightAverage"]


class WeightAverage:
    """A shadow copy of ``params`` kept as their exponential moving average (module docstring)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], decay: float) -> None:
        if not 0.0 < decay < 1.0:
            # named as the caller passed it, as gradcache's `size` is (a run's train.ema_decay is checked by
            # TrainConfig first); ConfigError is a ValueError, so callers catching that still catch it
            raise ConfigError(f"decay: must be in (0, 1), got {decay}")
        self.params = [p for p in params if p.dtype.is_floating_point]
        self._live = [p.detach() for p in self.params]  # views of the same storage: built once, not per step
        self.decay = decay
        self.updates = 0
        self.shadow = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def update(self) -> None:
        """One step of the average towards the live weights."""
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        torch._foreach_lerp_(self.shadow, self._live, 1.0 - d)
        self.updates += 1

    @contextmanager
    def swapped(self) -> Iterator[None]:
        """The averaged weights in the parameters for the duration of the block; the live ones after."""
        with torch.no_grad():
            live = [p.detach().clone() for p in self.params]
            for p, s in zip(self.params, self.shadow):
                p.copy_(s)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, v in zip(self.params, live):
                    p.copy_(v)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only (safetensors): the shadow weights and the update count."""
        state = {f"shadow.{i}": s.detach().cpu().contiguous().clone() for i, s in enumerate(self.shadow)}
        state["updates"] = torch.tensor([self.updates], dtype=torch.int64)
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        n = sum(1 for k in state if k.startswith("shadow."))
        if n != len(self.shadow):
            raise ValueError(f"weight average holds {n} tensors, this model has {len(self.shadow)}")
        with torch.no_grad():
            for i, s in enumerate(self.shadow):
                src = state[f"shadow.{i}"]
                if src.shape != s.shape:
                    raise ValueError(f"weight average tensor {i} has shape {tuple(src.shape)}, expected {tuple(s.shape)}")
                s.copy_(src)
        self.updates = int(state["updates"][0])
