"""The MLP shared by both towers."""
from __future__ import annotations

from torch import Tensor, nn

from twotower.models.dropout import Dropout, cheap, masks_ahead

__all__ = ["MLP"]


class MLP(nn.Module):
    """``in -> [Linear -> LayerNorm -> GELU -> Dropout] * len(hidden) -> Linear(out)``.

    LayerNorm keeps the scale of concatenated inputs (ID embeddings next to
    standardised numerics) comparable, which matters with a low softmax
    temperature.
    ``dropout_rng``: where the dropout masks come from (:mod:`twotower.models.dropout`).
    """

    def __init__(self, in_dim: int, hidden: tuple[int, ...], out_dim: int, *, dropout: float, layernorm: bool,
                 dropout_rng: str) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        self._drop_widths: dict[int, int] = {}
        d = in_dim
        for h in hidden:
            layers.append(nn.Linear(d, h))
            if layernorm:
                layers.append(nn.LayerNorm(h))
            layers.append(nn.GELU())
            if dropout > 0:
                self._drop_widths[len(layers)] = h  # each dropout layer's index and width
                layers.append(Dropout(dropout, dropout_rng))  # nn.Dropout's function, a cheaper mask
            d = h
        layers.append(nn.Linear(d, out_dim))
        self.net = nn.Sequential(*layers)
        self._rng = dropout_rng

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or not self._drop_widths or not cheap(x, self._rng):
            return self.net(x)
        # the masks built on a spare core while the linear maps run, where a training step lends one
        rows = x.shape[:-1].numel()
        with masks_ahead([(self.net[i].p, rows * width) for i, width in self._drop_widths.items()]):
            return self.net(x)
