"""The two-tower model: a user tower and an item tower scored by inner product."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn

from twotower.config import ModelConfig
from twotower.models.feature_block import FeatureArrays
from twotower.models.towers import ItemTower, UserTower

__all__ = ["TwoTowerModel", "CHECKED_ROWS", "CHECKED_CELLS"]

#: rows of a sequence tower's forward between two calls of a ``check`` (the service's time budget): a batch of 256
#: ad-hoc 200-item histories is seconds of transformer passes, which a single check before them could not stop
CHECKED_ROWS = 32
#: and history cells (rows x the columns their block keeps): a pass costs per item read, not per row, so 32 rows of
#: 200 items (examples/sasrec.toml's window) were one unchecked block of 0.5 s idle and 4.1 s under load, against a
#: 2 s budget; 1,600 cells keep blocks of 32 rows up to 50 items (model.user.history_len's default), 8 rows of 200
CHECKED_CELLS = 1600


def length_blocks(lengths: np.ndarray, width: int, rows: int, cells: int | None = None) -> list[tuple[int, int]]:
    """``[(start, end)]`` blocks of ``lengths`` (sorted ascending): at most ``rows`` rows, and with ``cells`` at
    most that many cells (a block keeps its longest row's length rounded up to 8, at most ``width``), one row
    at least."""
    keep = np.minimum(width, np.maximum(8, -(-lengths.astype(np.int64) // 8) * 8))  # [B] as a block ending there
    out, s, n = [], 0, len(lengths)
    while s < n:
        e = min(n, s + rows)
        if cells is not None:  # the block's cells grow with its end: the last end that fits, one row at least
            fit = np.flatnonzero((np.arange(s + 1, e + 1) - s) * keep[s:e] <= cells)
            e = s + 1 + (int(fit[-1]) if fit.size else 0)
        out.append((s, e))
        s = e
    return out


class TwoTowerModel(nn.Module):
    """Separate user and item towers; score(u, i) = <user(u), item(i)> (a cosine; plus the item-item term's
    ``w * <z/||z||, Q[i]>`` when it is attached, models/item_item.py)."""

    def __init__(
        self,
        config: ModelConfig,
        n_users: int,
        n_items: int,
        *,
        user_features: FeatureArrays | None = None,
        item_features: FeatureArrays | None = None,
        item_text: np.ndarray | None = None,
        sparse: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.n_users = n_users
        self.n_items = n_items
        self.user_tower = UserTower(config.user, n_users, n_items, user_features, sparse=sparse)
        self.item_tower = ItemTower(config.item, n_items, item_features, item_text, sparse=sparse)
        item_ids = self.item_tower.id_emb
        if (
            config.share_item_embeddings
            and self.user_tower.is_sequence
            and item_ids is not None
            and item_ids.embedding_dim == config.user.history_dim
        ):
            self.user_tower.tie_history_embedding(item_ids)

    def attach_item_item(self, rank: int) -> None:
        """Give both towers the closed-form item-item term's parts (zero until set; models/item_item.py)."""
        self.user_tower.attach_item_item(rank)
        self.item_tower.attach_item_item(rank)

    def set_item_item(self, user_factors: Tensor, item_factors: Tensor, weight: float) -> None:
        """Set the term's factors ([I, r] each; the user side gets its padding row) and weight."""
        if self.user_tower.item_item is None or self.item_tower.item_item is None:
            self.attach_item_item(int(item_factors.shape[1]))
        assert self.user_tower.item_item is not None and self.item_tower.item_item is not None
        pad = torch.zeros(1, user_factors.shape[1], dtype=user_factors.dtype)
        self.user_tower.item_item.set(torch.cat([user_factors, pad]), weight)
        self.item_tower.item_item.set(item_factors, weight)

    def set_item_item_weight(self, weight: float) -> None:
        """The attached term's weight ``w`` (both sides carry ``sqrt(w)``)."""
        if self.user_tower.item_item is None or self.item_tower.item_item is None:
            raise ValueError("no item-item term attached")
        with torch.no_grad():
            self.user_tower.item_item.weight.fill_(weight)
            self.item_tower.item_item.weight.fill_(weight)

    def detach_item_item(self) -> None:
        """Remove the term: the towers give their trained vectors alone again."""
        self.user_tower.item_item = None
        self.item_tower.item_item = None

    @property
    def history_len(self) -> int:
        """Items of history the user tower reads (its newest ``L``)."""
        return self.config.user.history_len

    @property
    def pad_item(self) -> int:
        """The item row that pads a history (one past the last item)."""
        return self.n_items

    def encode_users(self, user_rows: Tensor | None, history: Tensor | None) -> Tensor:
        """User vectors ``[B, D]`` for user rows ``[B]`` and/or their item histories ``[B, L]`` (the user tower)."""
        return self.user_tower(user_rows, history)

    def encode_items(self, rows: Tensor) -> Tensor:
        """Item vectors ``[B, D]`` for item rows ``[B]`` (the item tower)."""
        return self.item_tower(rows)

    @torch.no_grad()
    def all_item_embeddings(self, batch: int = 8192) -> Tensor:
        """Vectors of the whole catalogue [I, D] (unit length; [I, D + r] with the item-item term), in eval mode."""
        was = self._to_eval()
        dev = next(self.parameters()).device
        out = [self.item_tower(torch.arange(s, min(s + batch, self.n_items), device=dev)) for s in range(0, self.n_items, batch)]
        if was is not None:
            self.train(was)
        return torch.cat(out, dim=0)

    @torch.no_grad()
    def item_embeddings_of(self, rows: Tensor) -> Tensor:
        """Vectors ``[B, D]`` of item rows ``[B]``, in eval mode: :meth:`all_item_embeddings`'s rows, for a few items."""
        was = self._to_eval()
        try:
            return self.item_tower(rows.to(next(self.parameters()).device)).cpu()
        finally:
            if was is not None:
                self.train(was)

    def _to_eval(self) -> bool | None:
        """Put every module in eval mode for an inference pass; returns the mode to restore after it, or None when
        all were in eval mode already (a served model always is). ``eval()`` and ``train()`` walk and set every
        module: 0.19 ms a request on the MovieLens-100K demo run, 0.6 ms on a 2-layer transformer, on a busy
        2-core machine, of a 1.2-1.9 ms /recommend."""
        if not any(m.training for m in self.modules()):
            return None
        was = self.training
        self.eval()
        return was

    @torch.no_grad()
    def user_embeddings(self, user_rows: np.ndarray | None, history: np.ndarray | None, batch: int = 4096, *,
                        check: Callable[[], None] | None = None) -> Tensor:
        """Vectors [B, D] (unit length; [B, D + r] with the item-item term) for known user rows and/or
        right-aligned histories [B, L]. ``check``: for a sequence tower, called before each block of at most
        :data:`CHECKED_ROWS` rows and :data:`CHECKED_CELLS` history cells, and may raise to abandon the work
        (the service's time budget)."""
        if history is not None and self.user_tower.is_sequence and len(history):
            if check is None:
                return self._sequence_user_embeddings(user_rows, np.asarray(history))
            return self._sequence_user_embeddings(user_rows, np.asarray(history), CHECKED_ROWS, check=check,
                                                  cells=CHECKED_CELLS)
        was = self._to_eval()
        n = len(user_rows) if user_rows is not None else len(history)  # type: ignore[arg-type]
        outs = []
        for s in range(0, n, batch):
            dev = next(self.parameters()).device
            u = None if user_rows is None else torch.as_tensor(user_rows[s : s + batch], dtype=torch.long, device=dev)
            h = None if history is None else torch.as_tensor(history[s : s + batch], dtype=torch.long, device=dev)
            outs.append(self.user_tower(u, h))
        if was is not None:
            self.train(was)
        return torch.cat(outs, dim=0) if outs else torch.zeros((0, self.user_tower.output_dim))

    @torch.no_grad()
    def _sequence_user_embeddings(self, user_rows: np.ndarray | None, history: np.ndarray, batch: int = 256, *,
                                  check: Callable[[], None] | None = None, cells: int | None = None) -> Tensor:
        """:meth:`user_embeddings` for a sequence tower: rows of similar length together, each batch trimmed.

        A sequence encoder's cost grows with the window (attention with its
        square), and most users' windows are mostly padding (ML-1M: half the
        200 columns). Rows are sorted by history length and each batch drops
        the leading columns that are padding in all its rows; positions are
        numbered from the right edge or among the valid items, so the trimmed
        window gives the same vector. ``cells``: a batch holds at most this many (rows x kept columns).
        """
        was = self._to_eval()
        dev = next(self.parameters()).device
        L = history.shape[1]
        lengths = (history != self.pad_item).sum(axis=1)  # [B]
        order = np.argsort(lengths, kind="stable")  # [B]
        out = torch.empty((len(history), self.user_tower.output_dim), device=dev)
        for s, e in length_blocks(lengths[order], L, batch, cells):
            if check is not None:
                check()
            rows = order[s:e]
            keep = min(L, max(8, -(-int(lengths[rows].max()) // 8) * 8))  # columns kept, rounded up to 8
            u = None if user_rows is None else torch.as_tensor(user_rows[rows], dtype=torch.long, device=dev)
            h = torch.as_tensor(history[rows, L - keep :], dtype=torch.long, device=dev)  # [b, keep]
            out[torch.as_tensor(rows, device=dev)] = self.user_tower(u, h)
        if was is not None:
            self.train(was)
        return out
