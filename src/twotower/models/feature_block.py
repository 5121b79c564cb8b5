"""Embeds an entity's static feature row: categorical, multi-valued and numeric columns.

The encoded table (one row per vocabulary entry) is held in buffers so a tower
can look up features by row; :meth:`FeatureBlock.embed` also accepts explicit
feature tensors for an entity that was not in the table (a new item or user).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["FeatureArrays", "FeatureBlock"]


@dataclass(frozen=True)
class FeatureArrays:
    """Encoded features aligned with a vocabulary (0 means missing in index columns).

    categorical: int64 [n, C]; multi: list of int64 [n, L_c]; numeric: float32 [n, F].
    ``*_sizes`` are embedding-table sizes per column, row 0 included.
    """

    categorical: np.ndarray
    categorical_sizes: tuple[int, ...]
    multi: tuple[np.ndarray, ...]
    multi_sizes: tuple[int, ...]
    numeric: np.ndarray

    @staticmethod
    def empty(n: int) -> "FeatureArrays":
        return FeatureArrays(
            categorical=np.zeros((n, 0), np.int64),
            categorical_sizes=(),
            multi=(),
            multi_sizes=(),
            numeric=np.zeros((n, 0), np.float32),
        )

    @staticmethod
    def from_encoded(enc: object) -> "FeatureArrays":
        """Adapt ``twotower.data.features.EncodedFeatures`` (duck-typed)."""
        return FeatureArrays(
            categorical=np.asarray(getattr(enc, "categorical"), np.int64),
            categorical_sizes=tuple(int(s) for s in getattr(enc, "categorical_sizes")),
            multi=tuple(np.asarray(m, np.int64) for m in getattr(enc, "multi")),
            multi_sizes=tuple(int(s) for s in getattr(enc, "multi_sizes")),
            numeric=np.asarray(getattr(enc, "numeric"), np.float32),
        )

    @property
    def n(self) -> int:
        return int(self.numeric.shape[0])

    def is_empty(self) -> bool:
        return self.categorical.shape[1] == 0 and not self.multi and self.numeric.shape[1] == 0


class FeatureBlock(nn.Module):
    """Concatenates embeddings of categorical and multi-valued columns with numerics.

    Output width: ``feature_dim * (C + M) + F``.
    """

    def __init__(self, arrays: FeatureArrays, feature_dim: int) -> None:
        super().__init__()
        # sizes are table sizes: row 0 is "missing" and embeds to zeros
        self.cat_embs = nn.ModuleList(nn.Embedding(max(s, 1), feature_dim, padding_idx=0) for s in arrays.categorical_sizes)
        self.multi_embs = nn.ModuleList(
            nn.EmbeddingBag(max(s, 1), feature_dim, mode="mean", padding_idx=0) for s in arrays.multi_sizes
        )
        self.register_buffer("categorical", torch.as_tensor(arrays.categorical, dtype=torch.long), persistent=True)
        for j, m in enumerate(arrays.multi):
            self.register_buffer(f"multi_{j}", torch.as_tensor(m, dtype=torch.long), persistent=True)
        self.register_buffer("numeric", torch.as_tensor(arrays.numeric, dtype=torch.float32), persistent=True)
        self.n_numeric = int(arrays.numeric.shape[1])
        self.out_dim = feature_dim * (len(self.cat_embs) + len(self.multi_embs)) + self.n_numeric

    def rows(self, rows: Tensor) -> tuple[Tensor, list[Tensor], Tensor]:
        """Feature tensors of table rows ``rows[B]``."""
        multi = [getattr(self, f"multi_{j}")[rows] for j in range(len(self.multi_embs))]
        return self.categorical[rows], multi, self.numeric[rows]

    def missing_rows(self, batch: int) -> tuple[Tensor, list[Tensor], Tensor]:
        """Feature tensors of ``batch`` entities with no row in the table (a user never seen in training).

        One definition, so that the PyTorch towers and the ONNX export's new-user row encode such an entity alike.
        """
        cat = torch.zeros((batch, len(self.cat_embs)), dtype=torch.long)
        multi = [torch.zeros((batch, 1), dtype=torch.long) for _ in self.multi_embs]
        numeric = torch.zeros((batch, self.n_numeric))
        # numeric columns are [standardised values, missing flags] (data.features.encode_rows): every value
        # missing, as training encoded its users without a row in the user table (0 flags read as "present,
        # at the mean", which no training user was)
        numeric[:, self.n_numeric // 2 :] = 1.0
        return cat, multi, numeric

    def embed(self, categorical: Tensor, multi: list[Tensor], numeric: Tensor) -> Tensor:
        """[B, C] + list of [B, L_c] + [B, F] -> [B, out_dim]."""
        parts: list[Tensor] = [emb(categorical[:, j]) for j, emb in enumerate(self.cat_embs)]
        for j, emb in enumerate(self.multi_embs):
            values = multi[j]  # [B, L]; a row of all padding gives a zero vector
            parts.append(emb(values))
        if self.n_numeric:
            parts.append(numeric)
        if not parts:
            return numeric.new_zeros((numeric.shape[0], 0))
        return torch.cat(parts, dim=-1)

    def forward(self, rows: Tensor) -> Tensor:
        cat, multi, num = self.rows(rows)
        return self.embed(cat, multi, num)
