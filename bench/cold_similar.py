"""Item-to-item neighbours of cold items under the dual-head item tower (MovieLens-100K).

    HF_HUB_OFFLINE=1 python bench/cold_similar.py [--threads 1] [--cache FILE.npz]

Cold items are bench/movielens100k.py's cold-start protocol (seed 0: a fifth of the test split's items, every
train/valid row of them removed), plus "The Godfather: Part II", made cold for the case an audit found. One
dual-head model is trained on what is left. For each cold anchor, the items that its test raters rated in the
test split (the data training never saw) are the anchor's relevant neighbours; the neighbour lists of several
query/key spaces are scored against them (HR@10, NDCG@10, Recall@20). Anchors are split in two halves by a
seed: the option is chosen on the validation half and reported on the test half.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import refuse_below, refuse_range  # noqa: E402
from movielens100k import COLD_VARIANTS  # noqa: E402

from twotower.config import load_config  # noqa: E402
from twotower.pipeline.experiment import train_model  # noqa: E402
from twotower.pipeline.prepare import prepare  # noqa: E402
from twotower.pipeline.run import item_text_embeddings  # noqa: E402
from twotower.pipeline.sources import load_sources  # noqa: E402
from twotower.utils.atomic import atomic_write_bytes  # noqa: E402
from twotower.utils.runtime import set_threads  # noqa: E402

GODFATHER_II = "Godfather: Part II"


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def train_and_embed(base: list[str], share: float = 0.2, seed: int = 0) -> dict[str, np.ndarray]:
    """The cold-start split of bench/movielens100k.py (+ Godfather II), one dual-head fit, every space's vectors."""
    cfg = load_config(overrides=base + COLD_VARIANTS["dual_head"])
    src = load_sources(cfg.data, seed=cfg.train.seed)
    rng = np.random.default_rng(seed)
    test_items = np.array(sorted(set(src.test["item_id"]) & set(src.train["item_id"])))
    cold = set(rng.choice(test_items, size=int(share * len(test_items)), replace=False).tolist())
    titles = src.items.set_index("item_id")["title"] if "title" in src.items else None
    gf2 = [i for i, t in titles.items() if isinstance(t, str) and t.startswith(GODFATHER_II)]
    gf1 = [i for i, t in titles.items() if isinstance(t, str) and t.startswith("Godfather, The")]
    cold |= set(gf2)
    src = dataclasses.replace(src, train=src.train[~src.train["item_id"].isin(cold)].reset_index(drop=True),
                              valid=src.valid[~src.valid["item_id"].isin(cold)].reset_index(drop=True))
    prep = prepare(src)
    text = item_text_embeddings(cfg, prep)
    model, _ = train_model(cfg, prep, item_text=text)
    model.eval()
    with torch.no_grad():
        mixed, heads = model.item_tower.forward_heads(torch.arange(prep.n_items))
    assert heads is not None
    return {
        "mixed": mixed.numpy(), "semantic": heads.semantic.numpy(), "collab": heads.collaborative.numpy(),
        "text": _unit(np.asarray(text, np.float32)), "alpha": np.float32(heads.alpha.item()),
        "counts": prep.item_counts().astype(np.int64), "test": prep.matrix("test").toarray().astype(np.int8),
        "cold_rows": np.array(sorted(prep.item_vocab.index(i) for i in cold)),
        "gf2": np.array([prep.item_vocab.index(i) for i in gf2]), "gf1": np.array([prep.item_vocab.index(i) for i in gf1]),
        "titles": np.array([str(titles.get(prep.item_vocab.id_at(r), "")) for r in range(prep.n_items)]),
    }


def options(e: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (query vectors [I, D], key vectors [I, D]): the anchor's row of the first against all of the second."""
    return {
        "a_mixed": (e["mixed"], e["mixed"]),  # what /similar-items does now
        "b_semantic_vs_mixed": (e["semantic"], e["mixed"]),  # the semantic head against the served index
        "c_semantic_vs_semantic": (e["semantic"], e["semantic"]),  # both sides in the semantic head's space
        "d_text_vs_text": (e["text"], e["text"]),  # the frozen encoder's own cosine
        "e_collab_vs_collab": (e["collab"], e["collab"]),
    }


def neighbour_rows(q: np.ndarray, keys: np.ndarray, anchor: int, k: int) -> np.ndarray:
    s = keys @ q[anchor]
    s[anchor] = -np.inf
    return np.argsort(-s, kind="stable")[:k]


def rank_of(q: np.ndarray, keys: np.ndarray, anchor: int, target: int) -> int:
    s = keys @ q[anchor]
    s[anchor] = -np.inf
    return int((s > s[target]).sum()) + 1


def score(nbrs: np.ndarray, rel: np.ndarray) -> dict[str, float]:
    hits = rel[nbrs]
    disc = 1.0 / np.log2(np.arange(2, 12))
    idcg = disc[: min(10, int(rel.sum()))].sum()
    return {"HR@10": float(hits[:10].any()), "NDCG@10": float((hits[:10] * disc).sum() / idcg),
            "Recall@20": float(hits[:20].sum() / rel.sum())}


def per_anchor(e: dict[str, np.ndarray], anchors: np.ndarray, warm_only: bool) -> dict[str, list[dict[str, float]]]:
    """Each option's scores per anchor. ``warm_only``: neighbours and relevant items are warm items only (the
    protocol's cold items are all test items, co-rated in the same weeks far more than new items would be)."""
    test = e["test"]
    warm = e["counts"] > 0
    popular = np.argsort(-e["counts"], kind="stable")
    spaces = {name: (q, keys) for name, (q, keys) in options(e).items()}
    per: dict[str, list[dict[str, float]]] = {name: [] for name in [*spaces, "f_popularity"]}
    for c in anchors:
        raters = np.flatnonzero(test[:, c])
        rel = test[raters].any(axis=0)
        rel[c] = False
        if warm_only:
            rel &= warm
        if not rel.any():
            continue
        for name, (q, keys) in spaces.items():
            s = keys @ q[c]
            s[c] = -np.inf
            if warm_only:
                s[~warm] = -np.inf
            per[name].append(score(np.argsort(-s, kind="stable")[:20], rel))
        per["f_popularity"].append(score(popular[popular != c][:20], rel))
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", type=Path, help="FILE.npz: each fit's vectors are kept beside it as FILE-s<seed>-<share>.npz, "
                    "read when it exists, else written")
    ap.add_argument("--split-seed", type=int, default=1)
    ap.add_argument("--cold-seeds", default="0", help="cold-set seeds (one fit each), anchors pooled")
    ap.add_argument("--share", type=float, default=0.2, help="share of test items made cold (0: Godfather II only)")
    args = ap.parse_args()
    refuse_below(args, ("threads",))  # --threads 0 was torch's traceback
    refuse_range(args, "share", 0, 1)  # NaN made no item cold, and the fits ran on
    if args.cache and not args.cache.parent.is_dir():  # checked before the fits, not after the first one
        raise SystemExit(f"--cache {args.cache}: no folder {args.cache.parent} to keep the fits' vectors in")
    set_threads(args.threads)
    base = ["data.dataset=movielens-100k", "train.progress=false"]
    fits = []
    for seed in (int(x) for x in args.cold_seeds.split(",")):
        path = args.cache.with_name(f"{args.cache.stem}-s{seed}-{args.share:g}.npz") if args.cache else None
        if path and path.exists():
            with np.load(path, allow_pickle=False) as z:
                e = {k: z[k] for k in z.files}
        else:
            e = train_and_embed(base, args.share, seed)
            if path:
                buf = io.BytesIO()
                np.savez(buf, **e)
                atomic_write_bytes(path, buf.getvalue())  # an interrupted write leaves no half file to read next time
        fits.append(e)
        print(f"cold seed {seed}: alpha={float(e['alpha']):.3f}, {len(e['cold_rows'])} cold items")
    rng = np.random.default_rng(args.split_seed)
    for warm_only in (False, True):
        res: dict[str, dict[str, list[dict[str, float]]]] = {"validation": {}, "test": {}}
        for e in fits:
            anchors = rng.permutation(np.array([c for c in e["cold_rows"] if c not in e["gf2"] or args.share == 0]))
            for part, rows in (("validation", anchors[: len(anchors) // 2]), ("test", anchors[len(anchors) // 2:])):
                for name, got in per_anchor(e, np.sort(rows), warm_only).items():
                    res[part].setdefault(name, []).extend(got)
        print(f"\n== neighbours {'and relevant items among warm items only' if warm_only else 'among all items'} ==")
        means = {part: {n: {m: float(np.mean([r[m] for r in v])) for m in v[0]} for n, v in rows.items()}
                 for part, rows in res.items() if rows and next(iter(rows.values()))}
        for part, rows in means.items():
            print(f"{part} anchors ({len(res[part]['a_mixed'])})")
            print(f"{'option':28s} {'HR@10':>7s} {'NDCG@10':>8s} {'Recall@20':>9s}")
            for name, m in rows.items():
                print(f"{name:28s} {m['HR@10']:7.4f} {m['NDCG@10']:8.4f} {m['Recall@20']:9.4f}")
        if len(means) == 2:
            chosen = max((n for n in means["validation"] if n != "f_popularity"),
                         key=lambda n: means["validation"][n]["NDCG@10"])
            print(f"chosen on validation NDCG@10: {chosen}; test NDCG@10 {means['test'][chosen]['NDCG@10']:.4f} against "
                  f"a_mixed {means['test']['a_mixed']['NDCG@10']:.4f}")
    e = fits[0]
    for g2 in e["gf2"]:
        for g1 in e["gf1"]:
            ranks = {name: rank_of(q, keys, int(g2), int(g1)) for name, (q, keys) in options(e).items()}
            print(f"'{e['titles'][g2]}' (cold) -> '{e['titles'][g1]}' rank: {json.dumps(ranks)}")
        nb = neighbour_rows(e["mixed"], e["mixed"], int(g2), 5)
        print("  a_mixed top 5:", "; ".join(f"{e['titles'][r]} (n={e['counts'][r]})" for r in nb))
        nb = neighbour_rows(e["semantic"], e["semantic"], int(g2), 5)
        print("  c_semantic_vs_semantic top 5:", "; ".join(f"{e['titles'][r]} (n={e['counts'][r]})" for r in nb))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
