"""Build the loss a :class:`~twotower.config.LossConfig` describes (one place maps config -> loss)."""
from __future__ import annotations

from twotower.config import LossConfig, TrainConfig
from twotower.losses.base import RetrievalLoss

__all__ = ["make_loss"]


def make_loss(cfg: LossConfig, *, world: int = 1, precision: str = TrainConfig.precision) -> RetrievalLoss:
    """``inbatch`` (cross-rank under ``world > 1``), ``sampled``, ``full`` or ``bpr``, with the config's corrections.

    ``precision`` (``train.precision``: fp32 | bf16 | auto) sets the full-softmax kernel's GEMMs.
    """
    from twotower.losses.bpr import BPRLoss
    from twotower.losses.distributed import DistributedInBatchSoftmax
    from twotower.losses.softmax import FullSoftmax, InBatchSoftmax, SampledSoftmax

    if cfg.kind == "inbatch":
        cls = DistributedInBatchSoftmax if world > 1 else InBatchSoftmax
        return cls(cfg.temperature, logq=cfg.logq, mask_accidental_hits=cfg.mask_hits)
    if cfg.kind == "sampled":
        return SampledSoftmax(cfg.temperature, logq=cfg.logq, mask_accidental_hits=cfg.mask_hits)
    if cfg.kind == "full":
        return FullSoftmax(cfg.temperature, precision=precision)
    return BPRLoss(cfg.temperature)
