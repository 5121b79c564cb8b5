"""The item ID rows of items without training interactions, kept out of training under every loss.

Such an item (a cold item) keeps the ID vector the model was built with -- zero, in a run the pipeline builds
(``pipeline.experiment.build_model_for``) -- so its item vector comes from its features and text alone. The
default in-batch loss never sees one (its candidates are the batch's positives), but BPR's uniform negatives,
``loss.kind=sampled``, ``loss.kind=full`` and ``loss.uniform_negatives`` draw cold items as negatives and pushed
their ID rows: after 2 BPR epochs on MovieLens-100K (genres + year) their mean norm was 0.56, the warm rows'
0.51, and a cold item's vector mostly that learnt "never a positive" direction.

:meth:`ColdRows.mask_grads` runs after every backward (``TrainLoop``'s ``after_backward``) and removes those rows
from the ID table's gradient: zeroed in a dense gradient, dropped from a sparse one (``train.optimizer=
sparse_adam``). With no gradient ever, their Adam moments stay zero, so the update (``m / (sqrt(v) + eps)``) and
AdamW's decay of a zero row are exactly zero, and a checkpoint resumes with them as they were. Rows no loss
reaches are untouched either way, so an in-batch run's numbers are the same, bit for bit.

A checkpoint written before the mask (a BPR, full, sampled or uniform-negatives run) holds cold rows trained as
negatives and Adam moments that would go on moving them with no gradient at all. :meth:`ColdRows.settle_resumed`
(on resume) zeroes every cold row's moments and the rows those moments show were trained, as a run now keeps them:
trained as pure negatives they hurt (a walkthrough's cold-item Recall@100 went 0.0119 -> 0.0565 once zeroed).
The best weights saved before the resume (``model.safetensors``, read back at the end of a fit whose best epoch
came before it) hold them too: :meth:`ColdRows.settle_saved` zeroes there the rows the settled checkpoint holds
at zero, so the run ends with them zero whatever epoch its weights come from.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

__all__ = ["ColdRows"]

#: The ID table's name in a saved state dict (``model.item_tower.id_emb``, the table ColdRows holds)
KEY = "item_tower.id_emb.weight"

log = logging.getLogger(__name__)


class ColdRows:
    """The rows of ``model.item_tower.id_emb`` whose ``counts`` (training interactions per item ``[I]``) are 0 and
    whose vectors are zero when training starts."""

    def __init__(self, model: torch.nn.Module, counts: np.ndarray) -> None:
        emb = getattr(model.item_tower, "id_emb", None)
        cold = np.flatnonzero(np.asarray(counts)[: model.n_items] == 0)
        if emb is not None and len(cold):
            # only rows built as zero (the pipeline's cold items): a model built by hand keeps its random rows
            # trainable as before, since freezing random vectors would leave cold items scored at random
            with torch.no_grad():
                zero = (emb.weight[torch.as_tensor(cold, dtype=torch.long, device=emb.weight.device)] == 0).all(dim=1)
            cold = cold[zero.cpu().numpy()]
        self.weight = emb.weight if emb is not None and len(cold) else None
        if self.weight is None:
            return
        dev = self.weight.device
        self.rows = torch.as_tensor(cold, dtype=torch.long, device=dev)  # [C]
        self.warm = torch.ones(self.weight.shape[0], dtype=torch.bool, device=dev)  # [I]
        self.warm[self.rows] = False

    def __len__(self) -> int:
        return 0 if self.weight is None else int(self.rows.numel())

    @torch.no_grad()
    def mask_grads(self) -> None:
        """Take the cold rows out of the ID table's gradient (module docstring)."""
        w = self.weight
        if w is None or w.grad is None:
            return
        g = w.grad
        if not g.is_sparse:
            g.index_fill_(0, self.rows, 0.0)
            return
        idx = g._indices()  # [1, nnz] (coalesced or not: a GradCache step adds several)
        keep = self.warm[idx[0]]  # [nnz]
        if bool(keep.all()):
            return
        w.grad = torch.sparse_coo_tensor(idx[:, keep], g._values()[keep], g.shape, check_invariants=False,
                                         is_coalesced=g.is_coalesced())

    @torch.no_grad()
    def settle_resumed(self, optimizers: list[torch.optim.Optimizer], average: object = None, *, say: bool = True) -> int:
        """After a checkpoint is loaded: zero the cold rows' optimizer moments (Adam's, SparseAdam's) and, where
        those moments are non-zero (an older version trained the row), the row itself and its weight average.
        Rows with zero moments keep their values (the ones the model was built with). ``say``: log what was done,
        once (rank 0). Returns the number of rows zeroed."""
        w = self.weight
        if w is None:
            return 0
        moved = torch.zeros(len(self), dtype=torch.bool, device=w.device)  # [C]
        for opt in optimizers:
            state = opt.state.get(w, {})
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):  # max_: amsgrad
                t = state.get(key)
                if isinstance(t, torch.Tensor) and t.shape == w.shape:
                    moved |= t.index_select(0, self.rows).ne(0).any(dim=1)
                    t.index_fill_(0, self.rows, 0.0)
        nonzero = int(w.index_select(0, self.rows).ne(0).any(dim=1).sum())
        rows = self.rows[moved]
        if rows.numel():
            w.index_fill_(0, rows, 0.0)
            for p, shadow in zip(getattr(average, "params", ()), getattr(average, "shadow", ())):
                if p is w:  # the saved model is the average's: it must not bring the trained rows back
                    shadow.index_fill_(0, rows, 0.0)
        if say and rows.numel():
            left = int(w.index_select(0, self.rows).ne(0).any(dim=1).sum())  # rows with zero moments, as built
            log.warning(
                "resume: %d of the %d cold items (no training interactions) had non-zero ID rows; %d had non-zero "
                "optimizer moments (an older version trained them as negatives): those rows and every cold row's "
                "moments are now zero, as a run keeps them, so these items score by their features alone%s",
                nonzero, len(self), rows.numel(),
                f"; {left} with zero moments keep the values the model was built with" if left else "")
        return int(rows.numel())

    @torch.no_grad()
    def settle_saved(self, path: Path, *, say: bool = True) -> int:
        """After :meth:`settle_resumed`: zero in the weights file ``path`` (the best epoch's, saved before the
        resume) the cold rows the model now holds at zero, rewriting it atomically when any was not. Returns the
        number of rows zeroed."""
        from safetensors.torch import load_file

        from twotower.training.checkpoint import save_weights

        if self.weight is None:
            return 0
        state = load_file(str(path))
        saved = state.get(KEY)
        if saved is None or saved.shape != self.weight.shape:
            return 0  # not this model's weights: loading them at the end of the fit says so
        held = self.rows[self.weight.index_select(0, self.rows).eq(0).all(dim=1)].cpu()  # [H] zero in the model
        rows = held[saved.index_select(0, held).ne(0).any(dim=1)]
        if rows.numel():
            state[KEY] = saved.index_fill(0, rows, 0.0)
            save_weights(path, state)
            if say:
                log.warning("resume: %s (the best epoch's weights, saved before the resume) had %d cold items' ID "
                            "rows trained by an older version; zeroed there too, as the checkpoint's", path.name,
                            rows.numel())
        return int(rows.numel())
