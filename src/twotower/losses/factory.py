"""Build the loss a :class:`~twotower.config.LossConfig` describes (one place maps config -> loss)."""
from __future__ import annotations

from twotower.config import LossConfig, TrainConfig
from twotower.losses.base import RetrievalLoss

__all__ = ["make_loss", "describe_loss", "unread_sampled_negatives"]


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


def describe_loss(cfg: LossConfig, n_items: int, *, per: str = "example", batch: int | None = None,
                  world: int = 1) -> str:
    """The loss as the start-up log names it: its candidates and which corrections apply, so a switch the kind
    does not read (loss.logq and loss.mask_hits beside full or bpr) is said rather than silently left out.
    ``per``: what gets one BPR negative (an example, or a target position of the sequence objective).
    ``batch`` (the global batch a step takes) and ``world`` (ranks): the in-batch softmax says how many negatives
    a query is scored against and that they are gathered from every rank (not the rank's own share alone)."""
    t = f"T={cfg.temperature:g}"
    if cfg.kind in ("full", "bpr"):
        what = f"full over {n_items} items" if cfg.kind == "full" else f"bpr, one uniform negative per {per}"
        on = [name for name, value in (("loss.logq", cfg.logq), ("loss.mask_hits", cfg.mask_hits)) if value]
        if not on:
            return f"{what} ({t})"
        return f"{what} ({t}; {' and '.join(on)} {'do' if len(on) > 1 else 'does'} not apply)"
    if cfg.kind == "sampled":
        what = f"sampled, {cfg.sampled_negatives} {cfg.sampler} negatives"
        logq = "logQ" if cfg.sampler == "popularity" else "logQ (uniform: a constant)"
    else:
        what = f"inbatch + {cfg.uniform_negatives} uniform negatives" if cfg.uniform_negatives else "inbatch"
        if per == "example" and batch is not None:
            what += f": {batch - 1 + cfg.uniform_negatives} negatives a query"
        elif per != "example":
            what += ": the batch's distinct items"
        if world > 1:
            what += f", gathered from {world} ranks"
        logq = "mixture logQ" if cfg.uniform_negatives else "logQ"
        if per != "example" and not cfg.mask_hits:
            # the sequence objective's candidates are de-duplicated: no positive is also another column, so there
            # is no accidental hit to keep as a negative, and loss.mask_hits=false trained exactly as true did
            return (f"{what} ({t}, {logq if cfg.logq else 'no logQ'}; loss.mask_hits=false does not apply: "
                    "each item is one candidate, never a hit)")
    return f"{what} ({t}, {logq if cfg.logq else 'no logQ'}, {'hit masking' if cfg.mask_hits else 'no hit masking'})"


def unread_sampled_negatives(cfg: LossConfig) -> str | None:
    """The start-up warning for a ``loss.sampled_negatives`` the loss kind does not read (only ``sampled`` draws
    them): ``loss.sampled_negatives=1000`` beside the default inbatch trained as if unset, while the mixed
    negatives it was likely meant as are ``loss.uniform_negatives``. None at the default, which no one set."""
    n = cfg.sampled_negatives
    if cfg.kind == "sampled" or n == LossConfig.sampled_negatives:
        return None
    said = f"loss.sampled_negatives={n} has no effect: it sizes loss.kind=sampled's negatives"
    if cfg.kind == "inbatch":
        return (f"{said}, and loss.kind=inbatch scores the batch's own items; loss.uniform_negatives={n} adds that "
                "many uniform negatives to the in-batch softmax (mixed negatives), or set loss.kind=sampled")
    how = "scores every item" if cfg.kind == "full" else "draws one uniform negative per example"
    return f"{said}, and loss.kind={cfg.kind} {how}; set loss.kind=sampled to use it, or drop loss.sampled_negatives"
