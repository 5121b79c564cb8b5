"""User and item towers.

Both end in an L2-normalised vector, so the towers' score is a cosine similarity in
[-1, 1]; the loss's temperature sets the sharpness. With the item-item term fitted after training
(models/item_item.py) both vectors grow by its rank and a score is that cosine plus ``w`` times a
unit-length dot product: in [-1 - w, 1 + w], and the item vectors are no longer unit length.

Shapes: B batch, L history length, D output dim, T text-embedding dim.
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from twotower.config import TowerConfig
from twotower.errors import ConfigError
from twotower.models.feature_block import FeatureArrays, FeatureBlock
from twotower.models.item_item import ItemItemItemPart, ItemItemUserPart
from twotower.models.l2norm import l2_normalize
from twotower.models.mlp import MLP
from twotower.models.pooling import BagPlan, plan_bags, plan_bags_chunk, weighted_bags
from twotower.models.sequence import SEQUENCE_KINDS, build_sequence_encoder

__all__ = ["ItemTower", "UserTower", "HeadOutputs", "PoolPlan", "check_item_inputs"]


@dataclass(frozen=True)
class PoolPlan:
    """What a pooled user tower computes from a ``history[B, L]`` alone (:meth:`UserTower.plan_pools`): each
    pool's weights, their sums and the backward's CSR structure, built ahead of the step by the training
    prefetch thread (training/batch_plan.py). The same numbers as computing them in the forward."""

    history: Tensor  # [B, L], the window it was built for (used for that tensor only)
    weights: tuple[Tensor, ...]  # [B, L] per pool
    totals: tuple[Tensor, ...]  # [B, 1] per pool: its weights' sum, at least 1e-12
    bags: BagPlan | None  # None: the backward sorts the entries itself


@functools.lru_cache(maxsize=64)
def _age_weights(decay: float, length: int, device: torch.device) -> Tensor:
    """``decay ** age`` for the columns of a right-aligned window of ``length`` (age 0 = the newest, last column),
    float32 ``[length]``: computed once per (decay, length, device) rather than every forward (the same values;
    a plain tensor even when first asked for under ``inference_mode``, since autograd may save it later)."""
    with torch.inference_mode(False):
        age = torch.arange(length - 1, -1, -1, device=device, dtype=torch.float32)  # [L]: 0 = newest
        return decay ** age


def _head(config: TowerConfig, in_dim: int, tower: str) -> nn.Module:
    """The MLP after a tower's inputs, or none (``head = false``: the input is the output)."""
    if config.head:
        return MLP(in_dim, config.hidden, config.out_dim, dropout=config.dropout, layernorm=config.layernorm,
                   dropout_rng=config.dropout_rng)
    if in_dim != config.out_dim:
        # known only once the data says which inputs the tower has, so checked here, before anything is written
        raise ConfigError(f"model.{tower}.head = false needs the tower's input width ({in_dim}) to equal "
                          f"model.{tower}.out_dim ({config.out_dim}); set out_dim to {in_dim} or head = true")
    return nn.Identity()


class HeadOutputs:
    """What the dual-head item tower computed, for explanations.

    ``semantic`` and ``collaborative`` are each head's unit vector [B, D];
    ``alpha`` the gate; ``norm`` the norm of the mixture before the final
    normalisation, so score = (alpha*<u,sem> + (1-alpha)*<u,collab>) / norm.
    """

    def __init__(self, semantic: Tensor, collaborative: Tensor, alpha: Tensor, norm: Tensor) -> None:
        self.semantic = semantic
        self.collaborative = collaborative
        self.alpha = alpha
        self.norm = norm


def check_item_inputs(config: TowerConfig, feature_width: int) -> None:
    """ConfigError when the item tower (its collaborative head, for a dual head) would read nothing:
    no ID embedding, no item features (``feature_width`` 0) and no text outside a semantic head.
    The pipeline calls it before the item texts are encoded, so the refusal does not wait for them."""
    text_in = config.text_embeddings and not config.dual_head
    if config.use_id or feature_width > 0 or text_in:
        return
    features = ("item features (--items FILE with data.item_categorical / item_numeric / item_multi, and "
                "model.item.use_features=true)")
    if config.dual_head:
        raise ConfigError("model.item.dual_head: the collaborative head has no input (the text feeds the "
                          f"semantic head only); set model.item.use_id=true or give {features}")
    raise ConfigError("the item tower has no input: set model.item.use_id=true or "
                      f"model.item.text_embeddings=true, or give {features}")


def check_user_inputs(config: TowerConfig, feature_width: int) -> None:
    """ConfigError when the user tower would read nothing: no ID embedding, no user features (``feature_width`` 0)
    and ``history = "none"``. Called before the model is built: it was a traceback (ValueError from the tower's
    constructor) after the data had been read, where ``--print-config`` had passed the same settings."""
    if config.use_id or config.history != "none" or feature_width > 0:
        return
    raise ConfigError("the user tower has no input: model.user.history=none reads no history; set model.user.history="
                      "recency (the default), mean, transformer or gru, or model.user.use_id=true, or give user "
                      "features (--users FILE with data.user_categorical / user_numeric / user_multi, and "
                      "model.user.use_features=true)")


class ItemTower(nn.Module):
    """Item tower: optional ID embedding + feature encoders (+ frozen text) -> MLP -> L2 norm.

    With ``dual_head`` the frozen text embedding feeds a semantic head (a
    linear projection, no nonlinearity) and everything else a collaborative
    head; the output is ``normalize(a*sem + (1-a)*collab)`` with the learned
    gate ``a = sigmoid(g)``, ``g`` initialised at 0 so ``a`` starts at 0.5.
    """

    def __init__(
        self,
        config: TowerConfig,
        n_items: int,
        features: FeatureArrays | None = None,
        text: np.ndarray | None = None,
        *,
        sparse: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.n_items = n_items
        features = features if features is not None and config.use_features else FeatureArrays.empty(n_items)
        self.features = FeatureBlock(features, config.feature_dim)
        self.id_emb = nn.Embedding(n_items, config.id_dim, sparse=sparse) if config.use_id else None
        if self.id_emb is not None:
            nn.init.normal_(self.id_emb.weight, std=0.05)
        use_text = config.text_embeddings or config.dual_head
        if use_text and text is None:
            raise ValueError("item tower: text_embeddings/dual_head need a text-embedding matrix")
        if use_text:
            self.register_buffer("text", torch.as_tensor(text, dtype=torch.float32), persistent=True)
        else:
            self.text = None
        text_dim = int(text.shape[1]) if use_text and text is not None else 0
        in_dim = (config.id_dim if config.use_id else 0) + self.features.out_dim
        if config.text_embeddings and not config.dual_head:
            in_dim += text_dim
        if in_dim == 0:  # a ConfigError: the CLI printed a traceback, and the dual head's text did not count
            check_item_inputs(config, self.features.out_dim)
        self.mlp = _head(config, in_dim, "item")
        if config.dual_head:
            self.semantic = nn.Linear(text_dim, config.out_dim, bias=False)
            self.gate = nn.Parameter(torch.zeros(()))
        else:
            self.semantic = None
            self.gate = None
        # the item side of the closed-form item-item term, attached after training (models/item_item.py)
        self.item_item: ItemItemItemPart | None = None

    def attach_item_item(self, rank: int) -> ItemItemItemPart:
        """Add the item-item term's item side (zero factors until set); vectors grow by ``rank``."""
        self.item_item = ItemItemItemPart(self.n_items, rank).to(next(self.parameters()).device)
        return self.item_item

    @property
    def output_dim(self) -> int:
        """Width of :meth:`forward`'s vectors: ``out_dim``, plus the item-item term's rank when attached."""
        return self.config.out_dim + (0 if self.item_item is None else int(self.item_item.factors.shape[1]))

    @property
    def alpha(self) -> float | None:
        return None if self.gate is None else float(torch.sigmoid(self.gate).detach())

    def _collab_input(self, rows: Tensor) -> Tensor:
        parts = []
        if self.id_emb is not None:
            parts.append(self.id_emb(rows))
        if self.features.out_dim:
            parts.append(self.features(rows))
        if self.text is not None and self.config.text_embeddings and not self.config.dual_head:
            parts.append(self.text[rows])
        return torch.cat(parts, dim=-1)

    def forward(self, rows: Tensor) -> Tensor:
        """Item rows [B] -> unit vectors [B, D] (then the item-item factors [B, r] when attached)."""
        v = self.forward_heads(rows)[0]
        return v if self.item_item is None else torch.cat([v, self.item_item(rows)], dim=-1)

    def forward_heads(self, rows: Tensor) -> tuple[Tensor, HeadOutputs | None]:
        collab = self.mlp(self._collab_input(rows))  # [B, D]
        if self.semantic is None:
            return (l2_normalize(collab) if self.config.normalize else collab), None
        sem = l2_normalize(self.semantic(self.text[rows]))  # [B, D]
        collab = l2_normalize(collab)
        a = torch.sigmoid(self.gate)
        mix = a * sem + (1 - a) * collab
        norm = mix.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return mix / norm, HeadOutputs(sem, collab, a, norm.squeeze(-1))


class UserTower(nn.Module):
    """User tower: optional ID embedding + user features + history -> MLP -> L2 norm.

    The history is a right-aligned window of the user's past items, padded on
    the left with ``n_items``. It is either pooled (a mean, optionally
    recency-weighted: the j-th most recent item has weight ``decay**j``) or
    read by a sequence encoder (:mod:`twotower.models.sequence`: a causal
    transformer or a GRU), whose state after the newest item is the user's
    history representation. Either way a user never seen in training is
    served from a history alone, without refitting.

    Sequence towers also give a user vector at every column
    (:meth:`forward_all`), which trains on whole windows at once.
    """

    def __init__(
        self,
        config: TowerConfig,
        n_users: int,
        n_items: int,
        features: FeatureArrays | None = None,
        *,
        sparse: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.n_users = n_users
        self.n_items = n_items
        features = features if features is not None and config.use_features else FeatureArrays.empty(n_users)
        self.features = FeatureBlock(features, config.feature_dim)
        self.id_emb = nn.Embedding(n_users, config.id_dim, sparse=sparse) if config.use_id else None
        if self.id_emb is not None:
            nn.init.normal_(self.id_emb.weight, std=0.05)
        self.uses_history = config.history != "none"
        self.is_sequence = config.history in SEQUENCE_KINDS
        self._tied: list[nn.Embedding] = []  # the item tower's ID table when tied (a list: not a submodule)
        if self.uses_history:
            self.history_emb: nn.Embedding | None = nn.Embedding(
                n_items + 1, config.history_dim, padding_idx=n_items, sparse=sparse
            )
            nn.init.normal_(self.history_emb.weight, std=0.05)
            with torch.no_grad():
                self.history_emb.weight[n_items].zero_()
        else:
            self.history_emb = None
        if self.is_sequence:
            self.encoder: nn.Module | None = build_sequence_encoder(
                config.history, config.history_dim, config.history_len,
                layers=config.seq_layers, heads=config.seq_heads, dropout=config.seq_dropout,
                positions=config.seq_positions, block=config.seq_block, rng=config.dropout_rng,
            )
            # the representation of an empty history (a new user with no items yet)
            self.empty = nn.Parameter(torch.zeros(config.history_dim))
        else:
            self.encoder = None
        in_dim = (config.id_dim if config.use_id else 0) + self.features.out_dim
        # the window pooled again with each extra decay: pooled towers only (sequence towers ignore the setting),
        # and not the first pool's own decay again (history=mean already pools with 1.0)
        first = 1.0 if config.history == "mean" else config.recency_decay
        pooled = self.uses_history and not self.is_sequence
        self.extra_pools = tuple(d for d in config.extra_pools if d != first) if pooled else ()
        in_dim += config.history_dim * (1 + len(self.extra_pools)) if self.uses_history else 0
        if in_dim == 0:
            check_user_inputs(config, 0)
        self.mlp = _head(config, in_dim, "user")
        # the user side of the closed-form item-item term, attached after training (models/item_item.py)
        self.item_item: ItemItemUserPart | None = None

    def attach_item_item(self, rank: int) -> ItemItemUserPart:
        """Add the item-item term's user side (zero factors and weight until set); vectors grow by ``rank``."""
        if not self.uses_history:
            raise ValueError("the item-item term reads the history; this user tower reads none")
        self.item_item = ItemItemUserPart(self.n_items, rank).to(next(self.parameters()).device)
        return self.item_item

    @property
    def output_dim(self) -> int:
        """Width of :meth:`forward`'s vectors: ``out_dim``, plus the item-item term's rank when attached."""
        return self.config.out_dim + (0 if self.item_item is None else int(self.item_item.factors.shape[1]))

    def tie_history_embedding(self, item_emb: nn.Embedding) -> None:
        """Embed history items with the item tower's ID table (SASRec's shared embeddings).

        The tower's own history table is dropped; padding embeds to zero.
        """
        if not self.is_sequence:
            raise ValueError("only sequence user towers tie their history embeddings to the item table")
        if item_emb.embedding_dim != self.config.history_dim or item_emb.num_embeddings != self.n_items:
            raise ValueError(
                f"cannot tie: item ID table is {item_emb.num_embeddings} x {item_emb.embedding_dim}, "
                f"history needs {self.n_items} x {self.config.history_dim} (set model.item.id_dim = model.user.history_dim)"
            )
        self.history_emb = None
        self._tied = [item_emb]

    @property
    def tied_tables(self) -> tuple[nn.Embedding, ...]:
        """The item tower's tables this tower reads too (:meth:`tie_history_embedding`): not among its parameters."""
        return tuple(self._tied)

    def embed_history(self, history: Tensor) -> Tensor:
        """History item embeddings [B, L, H] (zeros on padding)."""
        if self._tied:
            table = self._tied[0]
            valid = (history != self.n_items).unsqueeze(-1)
            emb = F.embedding(history.clamp_max(self.n_items - 1), table.weight, sparse=table.sparse)
            return emb * valid
        assert self.history_emb is not None
        return self.history_emb(history)

    def history_weights(self, history: Tensor, valid: Tensor | None = None) -> Tensor:
        """Pooling weights [B, L] for right-aligned ``history[B, L]`` (0 on padding).

        For a sequence tower the weights are a mask (1 on real items): a 0
        removes that item from what the encoder reads. ``valid``: that float mask, when the caller has it.
        """
        if valid is None:
            valid = (history != self.n_items).to(torch.float32)  # [B, L]
        if self.config.history == "recency":
            # right alignment means the newest real item is always the last column
            return valid * _age_weights(self.config.recency_decay, history.shape[1], history.device)  # [B, L] * [L]
        return valid

    def plan_pools(self, history: Tensor, weights: Tensor | None = None, *, bags: bool = True) -> PoolPlan:
        """The :class:`PoolPlan` of :meth:`pooled_histories` for ``history`` (and ``weights``); ``bags``: with
        the backward's CSR structure (a dense table's), which the backward otherwise builds itself."""
        sets = self._pool_weights(history, weights)
        totals = tuple(w.sum(dim=1, keepdim=True).clamp_min(1e-12) for w in sets)
        emb = self.history_emb
        assert emb is not None  # pooled towers keep their own table (only sequence towers tie theirs)
        plan = plan_bags(emb.weight, history, sets, emb.padding_idx) if bags and not emb.sparse else None
        return PoolPlan(history, tuple(sets), totals, plan)

    def plan_pools_chunk(self, history: Tensor, sizes: list[int]) -> list[PoolPlan]:
        """:meth:`plan_pools` of several batches at once: ``history`` their rows stacked (``sizes`` rows each); one
        plan per batch, for its rows of ``history`` (the plan's ``history``, the tensor to pass with it). The same
        numbers as one :meth:`plan_pools` per batch: the weights and their sums are row by row, and the backward's
        structure comes from one counting sort keyed by batch (:func:`~twotower.models.pooling.plan_bags_chunk`)."""
        sets = self._pool_weights(history, None)
        totals = tuple(w.sum(dim=1, keepdim=True).clamp_min(1e-12) for w in sets)
        ends = np.cumsum(sizes).tolist()
        spans = list(zip([0, *ends[:-1]], ends))
        parts = [(history[a:b], tuple(w[a:b] for w in sets)) for a, b in spans]
        emb = self.history_emb
        assert emb is not None  # pooled towers keep their own table (only sequence towers tie theirs)
        bags = plan_bags_chunk(emb.weight, history, sets, emb.padding_idx, sizes, parts) if not emb.sparse else None
        return [PoolPlan(h, ws, tuple(t[a:b] for t in totals), bags[k] if bags is not None else None)
                for k, ((h, ws), (a, b)) in enumerate(zip(parts, spans))]

    def _pool_weights(self, history: Tensor, weights: Tensor | None) -> list[Tensor]:
        """Each pool's weights [B, L]: the first pool's (``weights``, default :meth:`history_weights`), then one
        per ``extra_pools`` decay, which ``weights`` scale as a factor on each item's own weight."""
        if not self.extra_pools:
            return [self.history_weights(history) if weights is None else weights]
        L = history.shape[1]
        valid = (history != self.n_items).to(torch.float32)  # [B, L]
        base = self.history_weights(history, valid)
        if weights is not None:  # each item's factor on its own weight (0 where the first pool gives it none)
            valid = torch.where(base > 0, weights / base.clamp_min(1e-30), torch.zeros_like(weights))
        return [base if weights is None else weights] + [valid * _age_weights(d, L, history.device)
                                                         for d in self.extra_pools]

    def pooled_histories(self, history: Tensor, weights: Tensor | None = None, *,
                         plan: PoolPlan | None = None, fixed_norms: bool = False) -> Tensor:
        """The pooled history [B, H * (1 + len(extra_pools))]: the first pool (``weights``, default
        :meth:`history_weights`), then one per ``extra_pools`` decay. ``weights`` that override the first
        pool's (explanations: 0 drops an item) scale every pool alike, as a factor on each item's own weight,
        so dropping an item drops it from every pool and a gradient on ``weights`` reaches them all.
        ``plan``: :meth:`plan_pools` of this ``history`` built ahead (read when ``weights`` is None).
        ``fixed_norms``: each pool's weight sum is held out of autograd (the same values), so ``w_j`` times the
        gradient on ``weights`` is gradient x input of item ``j``'s term ``w_j e_j / sum(w)``: with the sum in the
        graph, a mean does not change when every weight is scaled alike, and those products summed to 0."""
        if plan is None or weights is not None or plan.history is not history:
            plan = self.plan_pools(history, weights, bags=False)
        if fixed_norms:
            plan = replace(plan, totals=tuple(t.detach() for t in plan.totals))
        assert self.history_emb is not None  # pooled towers keep their own table
        emb = self.history_emb
        # one fused pass (gather + weighted sum) for every pool; padding has weight 0. Its backward sorts the
        # window's entries once for all of them, or takes that from the plan (models/pooling.py)
        bags = weighted_bags(emb.weight, history, list(plan.weights), sparse=emb.sparse, padding_idx=emb.padding_idx,
                             plan=plan.bags)
        pooled = [bag / total for bag, total in zip(bags, plan.totals)]
        return pooled[0] if len(pooled) == 1 else torch.cat(pooled, dim=-1)

    def pool_history(self, history: Tensor, weights: Tensor | None = None) -> Tensor:
        """Deprecated: use :meth:`pooled_histories`. The first pool alone, [B, L] -> [B, H] (zeros for an empty
        history), as this method gave before ``extra_pools``: the first H columns of :meth:`pooled_histories`."""
        warnings.warn("UserTower.pool_history is deprecated and gives the first pool alone; use "
                      "UserTower.pooled_histories, which gives every pool side by side ([B, H * (1 + "
                      "len(extra_pools))])", DeprecationWarning, stacklevel=2)
        assert self.history_emb is not None  # pooled towers keep their own table (only sequence towers tie theirs)
        return self.pooled_histories(history, weights)[..., : self.history_emb.embedding_dim]

    def sequence_states(self, history: Tensor, weights: Tensor | None = None, *,
                        newest: bool = False) -> tuple[Tensor, Tensor]:
        """Encoder states at every column [B, L, H] and the mask of valid columns [B, L].

        ``weights`` (0 = removed) scale the item embeddings, so that a weight of
        1 changes nothing and gradient x input attribution has a gradient.
        ``newest``: only the state at each row's newest valid column, [B, H]
        (the last column for an empty row), which spares the encoder's last
        block the other columns.
        """
        assert self.encoder is not None
        valid = history != self.n_items  # [B, L]
        emb = self.embed_history(history)  # [B, L, H]
        if weights is not None:
            valid = valid & (weights > 0)
            emb = emb * weights.unsqueeze(-1)
        if not newest:
            return self.encoder(emb, valid), valid
        L = history.shape[1]
        # the newest valid column (right-aligned, so normally L - 1; an empty row gives column 0)
        last = (valid * torch.arange(1, L + 1, device=history.device)).argmax(dim=1)  # [B]
        return self.encoder(emb, valid, last), valid

    def _user_parts(
        self, user_rows: Tensor | None, batch: int, features: tuple[Tensor, list[Tensor], Tensor] | None
    ) -> list[Tensor]:
        """Per-user inputs [B, *] that are not the history: ID embedding and features."""
        parts: list[Tensor] = []
        if self.id_emb is not None:
            if user_rows is None:
                raise ValueError("this user tower has an ID embedding; a new user cannot be embedded without one")
            parts.append(self.id_emb(user_rows))
        if self.features.out_dim:
            if features is not None:
                parts.append(self.features.embed(*features))
            elif user_rows is not None:
                parts.append(self.features(user_rows))
            else:
                parts.append(self.features.embed(*self.features.missing_rows(batch)))
        return parts

    def _head(self, x: Tensor) -> Tensor:
        out = self.mlp(x)
        return l2_normalize(out) if self.config.normalize else out

    def from_history_state(self, state: Tensor) -> Tensor:
        """The output [B, D] for a new user (no ID row, missing features) whose history reads as ``state``
        [B, H]: the head over what :meth:`forward` concatenates, without the item-item term. The empty-history
        fit (``pipeline/empty_history.py``) trains ``empty`` through it."""
        parts = self._user_parts(None, state.shape[0], None)
        return self._head(torch.cat([*parts, state], dim=-1))

    def forward(
        self,
        user_rows: Tensor | None,
        history: Tensor | None = None,
        *,
        features: tuple[Tensor, list[Tensor], Tensor] | None = None,
        history_weights: Tensor | None = None,
        pools: PoolPlan | None = None,
        fixed_norms: bool = False,
    ) -> Tensor:
        """Users -> unit vectors [B, D].

        ``user_rows[B]`` index the ID table and feature table; pass ``None``
        (with explicit ``features`` or none) for a user not in training, and
        ``history[B, L]`` for a tower that reads history. ``history_weights``
        overrides the pooling weights (explanations drop one item with a 0); ``pools``: a pooled tower's
        :meth:`plan_pools` of ``history``, built ahead (training/batch_plan.py). ``fixed_norms``: the history's
        normalisers (the pools' weight sums, the item-item term's norm) held out of autograd, the same values:
        gradient x input attribution (explain/attribution.py) differentiates each item's share of them.
        """
        B = history.shape[0] if history is not None else (user_rows.shape[0] if user_rows is not None else 1)
        parts = self._user_parts(user_rows, B, features)
        if self.uses_history:
            if history is None:
                raise ValueError("this user tower reads history; pass history[B, L]")
            if self.is_sequence:
                h, valid = self.sequence_states(history, history_weights, newest=True)  # [B, H], [B, L]
                h = torch.where(valid.any(dim=1, keepdim=True), h, self.empty.expand_as(h))  # empty rows use `empty`
                parts.append(h)
            else:
                parts.append(self.pooled_histories(history, history_weights, plan=pools, fixed_norms=fixed_norms))
        out = self._head(torch.cat(parts, dim=-1))
        if self.item_item is None or history is None:
            return out
        valid = (history != self.n_items).to(out.dtype)  # [B, L]
        if history_weights is not None:  # each item's factor on its own weight, as the extra pools read them
            base = self.history_weights(history)
            valid = torch.where(base > 0, history_weights / base.clamp_min(1e-30), torch.zeros_like(history_weights))
        return torch.cat([out, self.item_item(history, valid, fixed_norm=fixed_norms)], dim=-1)

    def forward_all(
        self,
        user_rows: Tensor | None,
        history: Tensor,
        *,
        features: tuple[Tensor, list[Tensor], Tensor] | None = None,
    ) -> Tensor:
        """The user vector after every column of ``history[B, L]``: [B, L, D] (sequence towers).

        Column ``t`` reads only columns ``<= t``; values at padding columns are
        finite but meaningless (mask them with ``history != n_items``).
        """
        if not self.is_sequence:
            raise ValueError("forward_all needs a sequence user tower (model.user.history = transformer | gru)")
        B, L = history.shape
        states, _ = self.sequence_states(history)  # [B, L, H]
        parts = [p.unsqueeze(1).expand(B, L, p.shape[-1]) for p in self._user_parts(user_rows, B, features)]
        return self._head(torch.cat([*parts, states], dim=-1))
