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
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["ColdRows"]


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
