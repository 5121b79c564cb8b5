"""MovieLens-100K: two-tower variants vs popularity, EASE and ItemKNN on the per-user temporal 80/10/10 split.

    python bench/movielens100k.py [--threads 1] [--variants default,id_only,...] [--epochs 30]

Prints one table (test Recall@20 / NDCG@20 / ... with fit seconds and peak RSS)
and the protocol. Data: MovieLens-100K (GroupLens; fetched by
`twotower data fetch movielens-100k`, RecBole 1.2.1 wheel copy as fallback).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PeakRSS  # noqa: E402

from twotower.config import load_config  # noqa: E402
from twotower.evaluation.table import format_table  # noqa: E402
from twotower.pipeline.experiment import PROTOCOL_TEXT, baseline_scorers, evaluate_scorers, train_model  # noqa: E402
from twotower.pipeline.run import item_text_embeddings, prepare_data  # noqa: E402
from twotower.training.scorer import TwoTowerScorer  # noqa: E402
from twotower.utils.runtime import set_threads  # noqa: E402

# name -> dotted overrides on top of the default configuration
VARIANTS: dict[str, list[str]] = {
    "default": [],
    "id_only": ["model.user.use_id=true", "model.user.history=none", "model.user.use_features=false", "model.item.use_features=false"],
    "features_only": ["model.user.use_id=false", "model.user.history=none", "model.item.use_id=false"],
    "history_mean": ["model.user.history=mean"],
    "denoising": ["train.examples=denoising"],
    "causal+denoising": ["train.examples=both"],
    "no_logq": ["loss.logq=false"],
    "temp_0.02": ["loss.temperature=0.02"],
    "temp_0.1": ["loss.temperature=0.1"],
    "temp_0.2": ["loss.temperature=0.2"],
    "full_softmax": ["loss.kind=full"],
    "uniform_neg_512": ["loss.uniform_negatives=512"],
    "no_hit_mask": ["loss.mask_hits=false"],
    "bpr": ["loss.kind=bpr"],
    "title_text": ["model.item.text_embeddings=true"],
    "dual_head": ["model.item.dual_head=true"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="default,id_only,features_only,history_mean,denoising,no_logq,temp_0.1,full_softmax,uniform_neg_512")
    ap.add_argument("--baselines", default="popularity,ease,itemknn")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--set", nargs="*", default=[], help="extra overrides applied to every variant")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    set_threads(args.threads)
    base = ["data.dataset=movielens-100k", "train.progress=false", *args.set]
    if args.epochs:
        base.append(f"train.epochs={args.epochs}")
    cfg0 = load_config(overrides=base)
    prep = prepare_data(cfg0)
    rows = []
    for name, (scorer, fit_s, info) in baseline_scorers(prep, tuple(b for b in args.baselines.split(",") if b)).items():
        res = evaluate_scorers(prep, {name: scorer})[name]
        label = name + (f" ({', '.join(f'{k}={v:g}' for k, v in info.items())})" if info else "")
        rows.append({"model": label, "fit_s": fit_s, "peak_MB": None, "epochs": None, **res})
        print(f"{label}: R@20 {res['Recall@20']:.4f} N@20 {res['NDCG@20']:.4f}", file=sys.stderr, flush=True)
    for name in [v for v in args.variants.split(",") if v]:
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
        cfg = load_config(overrides=base + VARIANTS[name])
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            text = item_text_embeddings(cfg, prep)
            model, result = train_model(cfg, prep, item_text=text)
            fit_s = time.perf_counter() - t0
        res = evaluate_scorers(prep, {name: TwoTowerScorer(model, prep.train_seqs)})[name]
        alpha = model.item_tower.alpha
        label = f"two-tower {name}" + (f" (α={alpha:.2f})" if alpha is not None else "")
        rows.append({"model": label, "fit_s": fit_s, "peak_MB": mem.peak_mb, "epochs": result.best_epoch, **res})
        print(f"{label}: R@20 {res['Recall@20']:.4f} N@20 {res['NDCG@20']:.4f} ({fit_s:.0f}s)", file=sys.stderr, flush=True)
    ease = next((r for r in rows if r["model"].startswith("ease")), None)
    for r in rows:
        if ease:
            r["vs_EASE_R@20"] = f"{100 * (r['Recall@20'] / ease['Recall@20'] - 1):+.1f}%"
            r["vs_EASE_N@20"] = f"{100 * (r['NDCG@20'] / ease['NDCG@20'] - 1):+.1f}%"
    cols = ["model", "Recall@20", "NDCG@20", "Recall@10", "NDCG@10", "MRR@10", "Coverage@20", "vs_EASE_R@20", "vs_EASE_N@20", "epochs", "fit_s", "peak_MB"]
    print(format_table(rows, cols, title=f"MovieLens-100K, per-user temporal 80/10/10, test split, threads={args.threads}"))
    print(PROTOCOL_TEXT)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
