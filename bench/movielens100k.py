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

from _common import PeakRSS, check_json_out, refuse_below, write_json_out  # noqa: E402
from ml1m import ROWS as ML1M_ROWS  # noqa: E402

from twotower.config import EvalConfig, load_config  # noqa: E402
from twotower.errors import ConfigError  # noqa: E402
from twotower.evaluation import choose_on_validation  # noqa: E402
from twotower.evaluation.table import format_table  # noqa: E402
from twotower.pipeline.experiment import PROTOCOL_TEXT, baseline_scorers, evaluate_scorers, train_model  # noqa: E402
from twotower.pipeline.run import item_text_embeddings, prepare_data  # noqa: E402
from twotower.training.scorer import TwoTowerScorer  # noqa: E402
from twotower.utils.runtime import set_threads  # noqa: E402

# (without the pooled default's weight average, as these rows were measured: docs/benchmarks.md)
_SEQ = ["train.examples=sequence", "train.batch_size=16", "train.lr=1e-3", "loss.temperature=0.05",
        "model.user.history_len=100", "train.ema_decay=0"]

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
    "temp_0.02+uniform_512": ["loss.temperature=0.02", "loss.uniform_negatives=512"],
    "temp_0.02+title_text": ["loss.temperature=0.02", "model.item.text_embeddings=true"],
    "temp_0.02+full": ["loss.temperature=0.02", "loss.kind=full"],
    "bpr_temp_0.1": ["loss.kind=bpr", "loss.temperature=0.1"],
    "dual_head": ["model.item.dual_head=true"],
    # sequence user towers (issue 10): trained on every position of each window (train.examples=sequence);
    # small batches (943 windows an epoch: batch 16 gives ~60 updates), T=0.05, 100-item windows
    "transformer": ["model.user.history=transformer", *_SEQ],
    "gru": ["model.user.history=gru", *_SEQ],
    "transformer_full": ["model.user.history=transformer", *_SEQ, "loss.kind=full"],
    "gru_full": ["model.user.history=gru", *_SEQ, "loss.kind=full"],
    # bench/ml1m.py's transformer recipe as it is (examples/sasrec.toml: tied IDs, no features, no maps after the
    # towers, 3 blocks, 2 heads, full softmax T=0.08, weight decay 0.1, 30-epoch cosine): does it carry over?
    "transformer_ml1m": ML1M_ROWS["transformer-full"],
    # the same towers trained with one causal example per target (the pooled towers' objective)
    "transformer_causal": ["model.user.history=transformer"],
    "gru_causal": ["model.user.history=gru"],
}


COLD_VARIANTS: dict[str, list[str]] = {
    "id_only": ["model.item.use_features=false"],
    "content": ["model.item.use_id=false", "model.item.text_embeddings=true"],
    "dual_head": ["model.item.dual_head=true"],
}


def cold_start(base: list[str], threads: int, share: float = 0.2, seed: int = 0) -> list[dict]:
    """Cold items: a random share of the test split's items, with every train/valid interaction removed.

    Recall@k is computed by ranking only the cold items for each user who has a
    test interaction with one (a random ranking's expected Recall@k is k/|C|);
    warm metrics rank the warm catalogue for the warm test interactions.
    """
    import dataclasses

    import numpy as np
    import scipy.sparse as sp

    from twotower.evaluation.protocol import EvalProtocol, evaluate
    from twotower.pipeline.prepare import prepare
    from twotower.pipeline.sources import load_sources

    cfg0 = load_config(overrides=base)
    src = load_sources(cfg0.data, seed=cfg0.train.seed)
    rng = np.random.default_rng(seed)
    test_items = np.array(sorted(set(src.test["item_id"]) & set(src.train["item_id"])))
    cold = set(rng.choice(test_items, size=int(share * len(test_items)), replace=False).tolist())
    src = dataclasses.replace(
        src,
        train=src.train[~src.train["item_id"].isin(cold)].reset_index(drop=True),
        valid=src.valid[~src.valid["item_id"].isin(cold)].reset_index(drop=True),
    )
    prep = prepare(src)
    cold_rows = np.array(sorted(prep.item_vocab.index(i) for i in cold))
    assert prep.item_counts()[cold_rows].sum() == 0
    test = prep.matrix("test")
    is_cold = np.zeros(prep.n_items, bool)
    is_cold[cold_rows] = True
    cold_rel = test[:, cold_rows]  # [U, C] relevant among cold items only
    warm_rel = test.multiply(sp.csr_matrix((~is_cold)[None, :].astype(np.float32))).tocsr()
    warm_rel.eliminate_zeros()
    ex = (prep.matrix("train") + prep.matrix("valid")).tocsr()
    ex = (ex + sp.csr_matrix(np.repeat(is_cold[None, :], prep.n_users, 0).astype(np.float32))).tocsr()  # warm ranking hides cold items
    ex.data[:] = 1.0
    pop = prep.item_counts()

    class Restrict:
        def __init__(self, scorer, cols):
            self.scorer, self.cols = scorer, cols
            self.rng = np.random.default_rng(seed)

        def score(self, users):
            # an untrained ID tower scores every cold item the same; break those ties at random,
            # not by item row (which would leak MovieLens' popularity-ordered ids)
            s = self.scorer.score(users)[:, self.cols]
            return s + 1e-6 * self.rng.random(s.shape).astype(np.float32)

    class RandomScores:
        def __init__(self, n, seed):
            self.n, self.rng = n, np.random.default_rng(seed)

        def score(self, users):
            return self.rng.random((len(users), self.n)).astype(np.float32)

    rows = []
    ks = (10, 20)
    rnd = evaluate(RandomScores(len(cold_rows), seed), cold_rel, None, EvalProtocol(ks=ks))
    rows.append({"model": "random ranking of cold items", "cold_Recall@10": rnd["Recall@10"], "cold_Recall@20": rnd["Recall@20"],
                 "cold_users": rnd["users_evaluated"]})
    for name, over in COLD_VARIANTS.items():
        cfg = load_config(overrides=base + over)
        t0 = time.perf_counter()
        text = item_text_embeddings(cfg, prep)
        model, _ = train_model(cfg, prep, item_text=text)
        scorer = TwoTowerScorer(model, prep.train_seqs)
        c = evaluate(Restrict(scorer, cold_rows), cold_rel, None, EvalProtocol(ks=ks))
        w = evaluate(scorer, warm_rel, ex, EvalProtocol(ks=ks), pop)
        alpha = model.item_tower.alpha
        rows.append({"model": f"two-tower {name}" + (f" (α={alpha:.2f})" if alpha is not None else ""),
                     "cold_Recall@10": c["Recall@10"], "cold_Recall@20": c["Recall@20"], "cold_users": c["users_evaluated"],
                     "warm_Recall@20": w["Recall@20"], "warm_NDCG@20": w["NDCG@20"], "fit_s": time.perf_counter() - t0})
        print(f"cold {name}: {rows[-1]}", file=sys.stderr, flush=True)
    print(format_table(rows, ["model", "cold_Recall@10", "cold_Recall@20", "cold_users", "warm_Recall@20", "warm_NDCG@20", "fit_s"],
                       title=f"Cold-start items: {len(cold_rows)} test items removed from train/valid (seed {seed}); "
                             f"cold metrics rank only the cold items (random Recall@k = k/{len(cold_rows)})"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="default,id_only,features_only,history_mean,denoising,no_logq,temp_0.1,full_softmax,"
                                          "uniform_neg_512,transformer,gru")
    ap.add_argument("--baselines", default="popularity,ease,itemknn")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--set", nargs="*", default=[], help="extra overrides applied to every variant")
    ap.add_argument("--cold-start", action="store_true", help="also run the cold-start item evaluation")
    ap.add_argument("--cold-only", action="store_true", help="only the cold-start item evaluation")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("twotower.data.movielens").setLevel(logging.INFO)  # the line saying where the data came from
    # names and --json checked before any work: a typo is one line now, not a traceback (or an exit) after the
    # baselines' minutes of tuning or the whole run
    json_out = check_json_out(args.json)
    variants = [v for v in args.variants.split(",") if v]
    for name in variants:
        if name not in VARIANTS:
            raise SystemExit(f"error: --variants: unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    baselines = tuple(b for b in args.baselines.split(",") if b)
    try:
        EvalConfig(baselines=baselines)  # the library's check of the names
    except ConfigError as e:
        raise SystemExit(f"error: --baselines: {e}") from None
    # --threads 0 was torch's traceback and --epochs 0 trained the full 30 epochs (`if args.epochs`)
    refuse_below(args, ("threads", "epochs"))
    set_threads(args.threads)
    base = ["data.dataset=movielens-100k", "train.progress=false", *args.set]
    if args.epochs is not None:
        base.append(f"train.epochs={args.epochs}")
    try:  # a bad --set was a traceback from inside the config's loading
        load_config(overrides=base)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    if args.cold_only:
        cold_start(base, args.threads)
        return 0
    cfg0 = load_config(overrides=base)
    prep = prepare_data(cfg0)
    rows = []
    for name, (scorer, fit_s, info) in baseline_scorers(prep, baselines).items():
        res = evaluate_scorers(prep, {name: scorer})[name]
        label = name + (f" ({', '.join(f'{k}={v}' if isinstance(v, str) else f'{k}={v:g}' for k, v in info.items())})" if info else "")
        rows.append({"model": label, "fit_s": fit_s, "peak_MB": None, "epochs": None, **res})
        print(f"{label}: R@20 {res['Recall@20']:.4f} N@20 {res['NDCG@20']:.4f}", file=sys.stderr, flush=True)
    for name in variants:
        cfg = load_config(overrides=base + VARIANTS[name])
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            text = item_text_embeddings(cfg, prep)
            model, result = train_model(cfg, prep, item_text=text)
            fit_s = time.perf_counter() - t0
        res = evaluate_scorers(prep, {name: TwoTowerScorer(model, prep.train_seqs)})[name]
        alpha = model.item_tower.alpha
        label = f"two-tower {name}" + (f" (α={alpha:.2f})" if alpha is not None else "")
        # the validation metric of the model as scored (with the item-item term when one was fitted): what chooses
        # a dataset's default tower
        rows.append({"model": label, "fit_s": fit_s, "peak_MB": round(mem.peak_mb), "epochs": result.best_epoch,
                     f"valid_{cfg.eval.select_metric}": result.final_metric, **res,
                     # the item-item term's chosen weight and the towers' own validation figure ("-": not fitted)
                     "item_item_w": result.item_item["weight"] if result.item_item else "-",
                     "valid_towers": result.best_metric if result.item_item else "-"})
        print(f"{label}: R@20 {res['Recall@20']:.4f} N@20 {res['NDCG@20']:.4f} ({fit_s:.0f}s)", file=sys.stderr, flush=True)
    ease = next((r for r in rows if r["model"].startswith("ease")), None)
    for r in rows:
        if ease:
            r["vs_EASE_R@20"] = f"{100 * (r['Recall@20'] / ease['Recall@20'] - 1):+.1f}%"
            r["vs_EASE_N@20"] = f"{100 * (r['NDCG@20'] / ease['NDCG@20'] - 1):+.1f}%"
    cols = ["model", "Recall@20", "NDCG@20", "Recall@10", "NDCG@10", "MRR@10", "Coverage@20", "vs_EASE_R@20", "vs_EASE_N@20",
            f"valid_{cfg0.eval.select_metric}", "item_item_w", "valid_towers", "epochs", "fit_s", "peak_MB"]
    print(format_table(rows, cols, title=f"MovieLens-100K, per-user temporal 80/10/10, test split, threads={args.threads}"))
    print(PROTOCOL_TEXT)
    metric = f"valid_{cfg0.eval.select_metric}"
    candidates = {r["model"]: [r[metric]] for r in rows if metric in r}
    if candidates:  # which variant this split should use: chosen on validation, never on the test table above
        print(choose_on_validation(candidates, metric=cfg0.eval.select_metric).text())
    if args.cold_start:
        rows += cold_start(base, args.threads)
    if args.json:
        write_json_out(json_out, json.dumps(rows, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
