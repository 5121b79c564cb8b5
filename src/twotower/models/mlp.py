"""The MLP shared by both towers."""
from __future__ import annotations

from torch import Tensor, nn

from twotower.models.dropout import Dropout

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
        d = in_dim
        for h in hidden:
            layers.append(nn.Linear(d, h))
            if layernorm:
                layers.append(nn.LayerNorm(h))
            layers.append(nn.GELU())
            if dropout > 0:
                layers.append(Dropout(dropout, dropout_rng))  # nn.Dropout's function, a cheaper mask
            d = h
        layers.append(nn.Linear(d, out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)
