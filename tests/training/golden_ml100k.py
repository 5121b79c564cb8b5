"""Golden run: the default MovieLens-100K configuration, fixed seed, a few short epochs.

``python tests/training/golden_ml100k.py --write`` records per-epoch losses,
in-batch accuracies, validation metrics and the final test metrics of the two
towers to ``tests/training/golden_ml100k.json``; ``test_golden.py`` re-runs the
same thing and compares. The figures in the JSON were recorded with the trainer
as it was BEFORE the training loop was rewritten (issue 11), so the test checks
that the rewrite kept the default run's behaviour.

One thread, so the floating-point reductions happen in one fixed order. The towers take
PyTorch's own dropout masks (``dropout_rng=torch``), as the old trainer did: the default's cheaper
masks (numpy PCG64) are the same function with other random numbers, so they would change every
figure without changing the loop this test is about. For the same reason it keeps the user tower of that
time, one history pool (``extra_pools=[]``; the default added the window's mean beside it later), and
its training without history dropout or a weight average (both defaults since), and the towers' scores alone,
without the item-item term fitted after training (``model.item_item.enabled=false``; a default since).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("golden_ml100k.json")
EPOCHS = 3
OVERRIDES = ["data.dataset=movielens-100k", f"train.epochs={EPOCHS}", "train.threads=1", "train.seed=42",
             "train.progress=false", "train.checkpoint=false",
             "model.user.dropout_rng=torch", "model.item.dropout_rng=torch",  # the old trainer's masks (docstring)
             "model.user.extra_pools=[]",  # the old default tower: one history pool (docstring)
             "train.history_dropout=0", "train.ema_decay=0",  # the old training: neither (docstring)
             "model.item_item.enabled=false"]  # the towers' scores alone (docstring)


def run_golden() -> dict[str, Any]:
    """Train the default config for ``EPOCHS`` epochs; per-epoch figures and test metrics of the best epoch."""
    import torch

    from twotower.config import load_config
    from twotower.pipeline.experiment import evaluate_scorers, train_model
    from twotower.pipeline.run import prepare_data
    from twotower.training.scorer import TwoTowerScorer
    from twotower.utils.runtime import seed_everything, set_threads

    cfg = load_config(overrides=OVERRIDES)
    set_threads(1)
    seed_everything(cfg.train.seed)
    prep = prepare_data(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        model, result = train_model(cfg, prep, out_dir=Path(tmp))
    keys = ("epoch", "loss", "inbatch_accuracy", "valid_NDCG@10", "valid_Recall@20")
    epochs = [{k: row[k] for k in keys if k in row} for row in result.history]
    with torch.no_grad():
        test = evaluate_scorers(prep, {"two-tower": TwoTowerScorer(model, prep.train_seqs)}, ks=(10, 20))["two-tower"]
    return {
        "overrides": OVERRIDES,
        "epochs": epochs,
        "best_epoch": result.best_epoch,
        "test": {k: float(v) for k, v in test.items() if "@" in k},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"overwrite {GOLDEN.name}")
    args = ap.parse_args(argv)
    out = run_golden()
    text = json.dumps(out, indent=2, sort_keys=True)
    print(text)
    if args.write:
        GOLDEN.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
