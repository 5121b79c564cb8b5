"""What :meth:`Trainer.fit <twotower.training.trainer.Trainer.fit>` returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TrainResult"]


@dataclass
class TrainResult:
    best_epoch: int
    best_metric: float
    epochs_run: int  # epochs that ran in this call and before it (a resumed run counts its earlier ones)
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    # why the fit ended before train.epochs ("early stopping ...", "time budget ..."); None when it ran them all
    stopped: str | None = None
    resumed_after: int = 0  # the checkpoint's epoch a resumed fit continued after (0: a fresh fit); ``seconds`` is
    # this call's time, so ``epochs_run - resumed_after`` epochs ran in it
    # what the pipeline fitted after training (model.item_item: weight, rank, lambda, its validation grid)
    item_item: dict[str, Any] | None = None
    # the evaluation files a resume kept that score the run as its settings now ask (pipeline/resume_results.py):
    # `twotower train` shows them rather than evaluating again
    kept_results: tuple[str, ...] = ()

    @property
    def final_metric(self) -> float:
        """The validation metric of the model as returned: ``best_metric`` (the best epoch's), or with the
        item-item term fitted after training, the metric at its chosen weight."""
        return float(self.item_item["valid_metric"]) if self.item_item else self.best_metric
