"""RecBole 1.2.1's GRU4Rec on the MovieLens-100K split of ``bench/movielens100k.py``, beside the default two-tower.

    python bench/recbole_gru4rec.py [--threads 1] [--seeds 42] [--recbole-path DIR] [--set hidden_size=256 ...]
                                    [--no-default]

Issue 10 measures the default two-tower against *RecBole's* GRU4Rec on the per-user temporal 80/10/10
split, so this script runs RecBole's own model class (``recbole.model.sequential_recommender.GRU4Rec``:
its embedding, GRU, dense layer, initialisation and cross-entropy over the whole catalogue) with
RecBole's training recipe from its ``overall.yaml`` / ``GRU4Rec.yaml`` (every prefix of a user's
sequence as one example, right-padded windows of the last 50 items, Adam lr 1e-3, batch 2048, no
weight decay, embedding 64, hidden 128, one layer, dropout 0.3, early stopping after 10 epochs
without a better validation score, at most 300 epochs). What is ours is the protocol, so both models
are measured the same way: fitted on train only, the input history of every validation and test
user is their train sequence (as for the two-tower), validation NDCG@10 selects the epoch (RecBole
would use MRR@10), and test ranks the full catalogue excluding each user's train+valid items with
the same evaluator as ``bench/movielens100k.py`` (``twotower.pipeline.experiment.evaluate_scorers``).

RecBole is not a dependency of twotower. Install it beside the project, without its pinned
extras (Ray and friends are only used by its hyper-parameter search, which this script does not
import), and point ``--recbole-path`` at that folder::

    .venv/bin/pip install --no-deps --target .recbole recbole==1.2.1 colorlog==4.7.2 colorama==0.4.4 \\
        texttable tabulate thop tensorboard tensorboard-data-server absl-py protobuf grpcio markdown \\
        werkzeug six plotly narwhals
    .venv/bin/python bench/recbole_gru4rec.py --recbole-path .recbole
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PeakRSS, check_json_out, write_json_out  # noqa: E402

# RecBole's defaults for this model (recbole/properties/overall.yaml, model/GRU4Rec.yaml, dataset/sample.yaml)
RECBOLE_DEFAULTS: dict[str, Any] = {
    "embedding_size": 64, "hidden_size": 128, "num_layers": 1, "dropout_prob": 0.3, "loss_type": "CE",
    "learning_rate": 1e-3, "train_batch_size": 2048, "weight_decay": 0.0, "epochs": 300, "stopping_step": 10,
    "MAX_ITEM_LIST_LENGTH": 50,
}
_FIELDS = {"USER_ID_FIELD": "user_id", "ITEM_ID_FIELD": "item_id", "LIST_SUFFIX": "_list",
           "ITEM_LIST_LENGTH_FIELD": "item_length", "NEG_PREFIX": "neg_"}


def _import_recbole(path: str | None) -> tuple[Any, Any]:
    if path:
        sys.path.insert(0, str(Path(path).resolve()))
    try:
        from recbole.data.interaction import Interaction
        from recbole.model.sequential_recommender.gru4rec import GRU4Rec
    except ImportError as e:
        # "error: " as every other refusal of the bench scripts
        raise SystemExit(f"error: RecBole could not be imported ({e}); see this script's docstring for the install "
                         "line and pass its folder as --recbole-path") from None
    return GRU4Rec, Interaction


class _Dataset:
    """What RecBole's model constructor reads from its dataset: the item count (row 0 is its padding)."""

    def __init__(self, n_items: int) -> None:
        self.n_items = n_items

    def num(self, field: str) -> int:
        return self.n_items + 1


def prefix_examples(seqs: Any, n_users: int, max_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RecBole's sequential augmentation: every item after a user's first is the target of the (at most
    ``max_len``) items before it. Returns right-padded ``[E, max_len]`` item ids (RecBole's ids: ours + 1,
    0 = padding), lengths ``[E]`` and targets ``[E]``."""
    rows, lens, targets = [], [], []
    for u in range(n_users):
        s = seqs.of(u) + 1
        for t in range(1, len(s)):
            window = s[max(0, t - max_len):t]
            rows.append(np.pad(window, (0, max_len - len(window))))
            lens.append(len(window))
            targets.append(s[t])
    return np.stack(rows).astype(np.int64), np.asarray(lens, np.int64), np.asarray(targets, np.int64)


class RecBoleScorer:
    """``score(users) -> [U, I]`` from RecBole's ``full_sort_predict`` on each user's train-only history."""

    def __init__(self, model: Any, interaction_cls: Any, seqs: Any, max_len: int, n_items: int, batch: int = 512) -> None:
        self.model, self.interaction_cls, self.seqs, self.max_len, self.batch = model, interaction_cls, seqs, max_len, batch
        self.n_items = n_items

    def score(self, users: np.ndarray) -> np.ndarray:
        import torch

        out = []
        self.model.eval()
        with torch.no_grad():
            for lo in range(0, len(users), self.batch):
                part = users[lo:lo + self.batch]
                seq = np.zeros((len(part), self.max_len), np.int64)
                lens = np.ones(len(part), np.int64)  # a user without train items reads one padding item
                for i, u in enumerate(part):
                    h = self.seqs.of(int(u))[-self.max_len:] + 1
                    seq[i, :len(h)] = h
                    lens[i] = max(len(h), 1)
                inter = self.interaction_cls({"item_id_list": torch.from_numpy(seq), "item_length": torch.from_numpy(lens)})
                out.append(self.model.full_sort_predict(inter)[:, 1:].numpy())  # drop RecBole's padding column
        return np.concatenate(out) if out else np.zeros((0, self.n_items), np.float32)


def fit_gru4rec(prep: Any, settings: dict[str, Any], seed: int, gru_cls: Any, interaction_cls: Any) -> tuple[RecBoleScorer, dict]:
    import torch

    from twotower.pipeline.experiment import evaluate_scorers

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    config = {**settings, **_FIELDS, "device": torch.device("cpu")}
    model = gru_cls(config, _Dataset(prep.n_items))
    opt = torch.optim.Adam(model.parameters(), lr=settings["learning_rate"], weight_decay=settings["weight_decay"])
    L = settings["MAX_ITEM_LIST_LENGTH"]
    seq, lens, targets = prefix_examples(prep.train_seqs, prep.n_users, L)
    bs = settings["train_batch_size"]
    scorer = RecBoleScorer(model, interaction_cls, prep.train_seqs, L, prep.n_items)
    best, best_epoch, best_state, history = -1.0, 0, None, []
    for epoch in range(1, settings["epochs"] + 1):
        model.train()
        order = rng.permutation(len(targets))
        total, t0 = 0.0, time.perf_counter()
        for lo in range(0, len(order), bs):
            idx = torch.from_numpy(order[lo:lo + bs])
            inter = interaction_cls({"item_id_list": torch.from_numpy(seq)[idx], "item_length": torch.from_numpy(lens)[idx],
                                     "item_id": torch.from_numpy(targets)[idx]})
            opt.zero_grad()
            loss = model.calculate_loss(inter)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        valid = evaluate_scorers(prep, {"gru4rec": scorer}, split="valid", ks=(10,))["gru4rec"]["NDCG@10"]
        history.append({"epoch": epoch, "loss": total / len(targets), "valid_NDCG@10": valid,
                        "epoch_s": time.perf_counter() - t0})
        print(f"  epoch {epoch}: loss {total / len(targets):.4f} valid NDCG@10 {valid:.4f} "
              f"({time.perf_counter() - t0:.1f}s)", file=sys.stderr, flush=True)
        if valid > best:
            best, best_epoch = valid, epoch
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        elif epoch - best_epoch >= settings["stopping_step"]:
            break
    model.load_state_dict(best_state)
    return scorer, {"best_epoch": best_epoch, "valid": best, "examples": len(targets), "history": history}


def _parse_set(items: list[str]) -> dict[str, Any]:
    from _common import number_refusal

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in RECBOLE_DEFAULTS:
            raise SystemExit(f"error: --set {item!r}: expected KEY=VALUE with KEY one of {', '.join(RECBOLE_DEFAULTS)}")
        kind = type(RECBOLE_DEFAULTS[key])
        if kind is str:
            if key == "loss_type" and value != "CE":
                raise SystemExit(f"error: --set {item!r}: only CE (the harness draws no negatives for BPR)")
            out[key] = value
            continue
        try:
            number = float(value)
            if kind is int and math.isfinite(number) and not number.is_integer():
                raise ValueError(value)  # epochs=0.5 was taken as 0 (refused as such), hidden_size=2.5 as 2
        except ValueError:
            raise SystemExit(f"error: --set {item!r}: {key} takes {'an integer' if kind is int else 'a number'}") from None
        # in the words and the one line of every bench flag: learning_rate=inf was taken (NaN weights after the
        # first step), epochs=inf an OverflowError traceback
        hi = 1.0 if key == "dropout_prob" else None
        said = number_refusal(f"--set {key}", number, 0, hi, lo_open=key not in ("dropout_prob", "weight_decay"),
                              hi_open=hi is not None)
        if said is not None:
            raise SystemExit(f"error: {said}")
        out[key] = int(number) if kind is int else number
    return out


def _parse_seeds(text: str) -> list[int]:
    """``--seeds 42,43`` in the one line of every bench flag (``error: --seeds: ...``): integers of at least 0 (numpy's
    generators take no negative seed), one or more."""
    from _common import int_list

    return int_list("--seeds", text, 0, what="seed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seeds", default="42", help="comma-separated; one GRU4Rec fit (and one default fit) each")
    ap.add_argument("--recbole-path", help="folder RecBole was installed into (pip --target)")
    ap.add_argument("--set", nargs="*", default=[], help="RecBole settings, e.g. hidden_size=256 dropout_prob=0.5")
    ap.add_argument("--no-default", action="store_true", help="skip the default two-tower rows")
    ap.add_argument("--json", help="also write the rows (with each fit's epoch history) to this JSON file")
    args = ap.parse_args(argv)
    json_out = check_json_out(args.json)
    settings = {**RECBOLE_DEFAULTS, **_parse_set(args.set)}
    seeds = _parse_seeds(args.seeds)
    gru_cls, interaction_cls = _import_recbole(args.recbole_path)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("twotower.data.movielens").setLevel(logging.INFO)

    from twotower.config import load_config
    from twotower.evaluation.table import format_table
    from twotower.pipeline.experiment import PROTOCOL_TEXT, evaluate_scorers, train_model
    from twotower.pipeline.run import prepare_data
    from twotower.training.scorer import TwoTowerScorer
    from twotower.utils.runtime import set_threads

    set_threads(args.threads)
    base = ["data.dataset=movielens-100k", "train.progress=false"]
    prep = prepare_data(load_config(overrides=base))
    rows: list[dict[str, Any]] = []
    changed = {k: v for k, v in settings.items() if v != RECBOLE_DEFAULTS[k]}
    label = "RecBole GRU4Rec" + (f" ({', '.join(f'{k}={v}' for k, v in changed.items())})" if changed else "")
    for seed in seeds:
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            scorer, info = fit_gru4rec(prep, settings, seed, gru_cls, interaction_cls)
            fit_s = time.perf_counter() - t0
        res = evaluate_scorers(prep, {"gru4rec": scorer})["gru4rec"]
        rows.append({"model": label, "seed": seed, "valid_NDCG@10": info["valid"], "epochs": info["best_epoch"],
                     "fit_s": round(fit_s, 1), "peak_MB": round(mem.peak_mb), **res, "history": info["history"]})
        print(f"{label} seed {seed}: R@20 {res['Recall@20']:.4f} N@20 {res['NDCG@20']:.4f} ({fit_s:.0f}s, "
              f"{info['examples']} prefix examples)", file=sys.stderr, flush=True)
        if not args.no_default:
            cfg = load_config(overrides=[*base, f"train.seed={seed}"])
            with PeakRSS() as mem:
                t0 = time.perf_counter()
                model, result = train_model(cfg, prep)
                fit_s = time.perf_counter() - t0
            res = evaluate_scorers(prep, {"default": TwoTowerScorer(model, prep.train_seqs)})["default"]
            rows.append({"model": "two-tower default", "seed": seed, "valid_NDCG@10": result.final_metric,
                         "epochs": result.best_epoch, "fit_s": round(fit_s, 1), "peak_MB": round(mem.peak_mb), **res})
            print(f"two-tower default seed {seed}: R@20 {res['Recall@20']:.4f} N@20 {res['NDCG@20']:.4f} ({fit_s:.0f}s)",
                  file=sys.stderr, flush=True)
    by_seed = {(r["model"], r["seed"]): r for r in rows}
    for r in rows:
        gru = by_seed.get((label, r["seed"]))
        if gru is not None and r is not gru:
            r["vs_GRU4Rec_R@20"] = f"{100 * (r['Recall@20'] / gru['Recall@20'] - 1):+.1f}%"
            r["vs_GRU4Rec_N@20"] = f"{100 * (r['NDCG@20'] / gru['NDCG@20'] - 1):+.1f}%"
    cols = ["model", "seed", "Recall@20", "NDCG@20", "Recall@10", "NDCG@10", "vs_GRU4Rec_R@20", "vs_GRU4Rec_N@20",
            "valid_NDCG@10", "epochs", "fit_s", "peak_MB"]
    print(format_table(rows, cols, title=f"MovieLens-100K, per-user temporal 80/10/10, test split, threads={args.threads}"))
    if len(seeds) > 1:
        for name in dict.fromkeys(r["model"] for r in rows):
            mine = [r for r in rows if r["model"] == name]
            print(f"{name}, mean of {len(mine)} seeds: Recall@20 {np.mean([r['Recall@20'] for r in mine]):.4f} "
                  f"NDCG@20 {np.mean([r['NDCG@20'] for r in mine]):.4f}")
    print(PROTOCOL_TEXT + "; RecBole's GRU4Rec reads the same train-only history (its last "
          f"{settings['MAX_ITEM_LIST_LENGTH']} items) and is early-stopped on the same validation NDCG@10")
    if args.json:
        write_json_out(json_out, json.dumps(rows, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
