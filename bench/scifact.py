"""SciFact (BEIR) query -> abstract retrieval: BM25, zero-shot MiniLM, fine-tuned two-tower,
hybrid fusion and cross-encoder reranking, on CPU.

    .venv/bin/python bench/scifact.py --threads 1            # full run (reuses cached embeddings)
    .venv/bin/python bench/scifact.py --threads 1 --quick    # smoke run on a small slice

Protocol: fine-tuning uses qrels/train.tsv minus a validation part held out by
relevant-document group (queries sharing a cited abstract stay together); the
fusion rule/weight is chosen on that validation part; qrels/test.tsv (300
queries) is scored once at the end, also on the 104 test queries none of whose
relevant abstracts appear in the train qrels ("unseen-doc" slice).

Data terms: SciFact is CC BY-NC 2.0 (Wadden et al., EMNLP 2020); it is read in
place and never copied into the project.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from twotower.config import FinetuneConfig  # noqa: E402  (the bi-encoder defaults, declared once)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import check_json_out, refuse_below, refuse_range, write_json_out  # noqa: E402


def default_data() -> Path:
    for cand in (Path("/work/shared/data/scifact"), REPO.parent / "shared" / "data" / "scifact"):
        if cand.exists():
            return cand
    return Path("../shared/data/scifact")


def check_reused(folder: Path, saved: dict, wanted: object) -> None:
    """``--reuse`` takes a model only if it was trained with the settings this command would train it with:
    another ``--epochs``/``--lr``/... would otherwise be reported in the table as if it were this command's."""
    import dataclasses

    want = json.loads(json.dumps(dataclasses.asdict(wanted)))  # tuples as lists, as the model's file keeps them
    # a setting added since the model was saved (valid_frac, patience) was trained at its default: a model saved
    # before it was refused as "trained with other settings" for a key it could not hold
    defaults = json.loads(json.dumps(dataclasses.asdict(type(wanted)())))
    saved = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
    diff = sorted(k for k in set(want) | set(saved) if want.get(k) != saved.get(k))
    if diff:
        raise SystemExit(f"error: --reuse: {folder} was trained with other settings ("
                         + ", ".join(f"{k} {saved.get(k)!r}, now {want.get(k)!r}" for k in diff)
                         + "); pass the same flags, or drop --reuse to train it again")


def sizes_note(args: argparse.Namespace, *, docs: int, train_queries: int, valid_queries: int, pairs: int,
               groups: int | None = None) -> str:
    """The sizes the table's rows were measured at, caps included, for its title: ``--ce-max-groups`` trained the
    cross-encoder on 400 of SciFact's ~750 training pairs per epoch, and ``--quick`` cut the corpus and the query
    sets and set every epoch count to 1, with nothing in the output to say so. ``groups``: the pairs the
    cross-encoder trained on (its marker's ``data.groups_used``; those with a hard negative), when it is known:
    "all 52 training pairs per epoch" was said of a training on 49 (3 without a hard negative are left out)."""
    cap = args.ce_max_groups
    trained = pairs if groups is None else groups
    per_epoch = f"at most {cap} of {trained}" if cap and cap < trained else f"all {trained}"
    left = (f"; {pairs - trained} of the {pairs} pairs had no hard negative and were left out" if trained < pairs
            else "")
    note = (f"corpus {docs} docs; bi-encoder {args.epochs} epoch(s) on {train_queries} train queries "
            f"({valid_queries} held out for validation)")
    if not args.no_rerank:
        note += (f"; cross-encoder {args.ce_epochs} epoch(s) on {per_epoch} training pairs per epoch "
                 f"(--ce-max-groups {cap}{left}), reranking the top {args.rerank_top}")
    return note


def _groups_used(ce_dir: Path) -> int | None:
    """The training pairs the saved cross-encoder trained on (its marker's ``data.groups_used``); None without one."""
    try:
        return int(json.loads((ce_dir / "twotower_cross_encoder.json").read_text())["data"]["groups_used"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=default_data(), help="SciFact dir (holding beir/) or the BEIR dir itself")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "scifact")
    p.add_argument("--threads", type=int, default=int(os.environ.get("TWOTOWER_THREADS", "1")))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--valid-frac", type=float, default=0.2)
    p.add_argument("--max-length", type=int, default=FinetuneConfig.max_length, help="document word pieces for the bi-encoder")
    p.add_argument("--epochs", type=int, default=FinetuneConfig.epochs, help="bi-encoder epochs")
    p.add_argument("--lr", type=float, default=FinetuneConfig.lr)
    p.add_argument("--batch-size", type=int, default=FinetuneConfig.batch_size)
    p.add_argument("--negatives", type=int, default=3, help="mined hard negatives per query per step")
    p.add_argument("--corpus-negatives", action="store_true",
                   help="frozen doc tower: full softmax over the whole corpus instead of mined negatives")
    p.add_argument("--train-doc-tower", action="store_true",
                   help="also train the document tower (re-encodes the corpus; far slower on CPU)")
    # cross-encoder defaults are sized for 2 shared CPU cores: ~1,200 training pairs, 160 word pieces
    p.add_argument("--ce-epochs", type=int, default=1)
    p.add_argument("--ce-max-length", type=int, default=160)
    p.add_argument("--ce-negatives", type=int, default=2)
    p.add_argument("--ce-max-groups", type=int, default=400, help="training queries per epoch for the cross-encoder")
    p.add_argument("--ce-freeze-layers", type=int, default=3)
    p.add_argument("--ce-lr", type=float, default=5e-5)
    p.add_argument("--rerank-top", type=int, default=10)
    p.add_argument("--no-rerank", action="store_true")
    p.add_argument("--ce-only", action="store_true",
                   help="only train the cross-encoder into --out (run it beside the main bench, then use --reuse)")
    p.add_argument("--reuse", action="store_true", help="reuse trained models found under --out")
    p.add_argument("--quick", action="store_true", help="smoke run: 300 docs, few queries, 1 epoch")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    # zeros started encoding the 5,183-document corpus (~450 s) before anything refused them
    refuse_below(args, ("threads", "epochs", "rerank_top", "max_length", "batch_size", "ce_epochs", "ce_max_length",
                        "ce_max_groups"))
    # NaN passed the trainers' checks as a learning rate (every weight NaN after the first step)
    refuse_range(args, "valid_frac", 0, 1, lo_open=True, hi_open=True)  # validation_split_by_group's (0, 1)
    for flag in ("lr", "ce_lr"):
        refuse_range(args, flag, 0, lo_open=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    from twotower.utils.runtime import seed_everything, set_threads

    set_threads(args.threads)
    seed_everything(args.seed)
    check_json_out(args.json)  # before the models are trained: a bad path is one line, not a late traceback

    from twotower.evaluation.table import format_table
    from twotower.search.beir import load_beir, relevant_rows, validation_split_by_group
    from twotower.search.bm25 import BM25Retriever
    from twotower.search.dense import DenseRetriever
    from twotower.search.evaluate import evaluate_retriever
    from twotower.search.finetune import finetune_bi_encoder, load_bi_encoder
    from twotower.search.fusion import tune_fusion
    from twotower.search.negatives import MiningConfig, mine_hard_negatives
    from twotower.search.rerank import CrossEncoderReranker, RerankTrainConfig, train_cross_encoder
    from twotower.text.cache import EmbeddingCache, cached_encode
    from twotower.text.encoder import describe_truncation, load_text_encoder, truncation_report

    out: Path = args.out / ("quick" if args.quick else "full")
    cache_dir = args.out / "cache"
    t_all = time.perf_counter()
    from twotower.cli.paths import check_output_dir
    from twotower.errors import TwoTowerError

    try:  # a wrong --data or --out, or --valid-frac outside (0, 1), is one line, not a traceback
        check_output_dir(args.out, "--out")
        train = load_beir(args.data, "train", arg="--data")
        test = load_beir(args.data, "test", arg="--data")
        train_qrels, valid_qrels = validation_split_by_group(train.qrels, args.valid_frac, args.seed)
    except TwoTowerError as e:
        raise SystemExit(f"error: {e}") from None
    corpus = train.corpus
    doc_texts = corpus.doc_texts()
    test_qids = list(test.queries)
    seen_docs = {d for q in train.qrels.values() for d in q}
    unseen = [i for i, q in enumerate(test_qids) if not (set(test.qrels[q]) & seen_docs)]
    if args.quick:
        keep_q = test_qids[:20]
        test_qids = keep_q
        unseen = [i for i, q in enumerate(test_qids) if not (set(test.qrels[q]) & seen_docs)]
        train_qrels = dict(list(train_qrels.items())[:48])
        valid_qrels = dict(list(valid_qrels.items())[:16])
        needed = sorted({corpus.row_of[d] for qr in (train_qrels, valid_qrels, {q: test.qrels[q] for q in keep_q})
                         for q in qr.values() for d in q})
        extra = [r for r in range(len(corpus)) if r not in set(needed)][: max(0, 300 - len(needed))]
        rows = sorted(set(needed) | set(extra))
        from twotower.search.beir import Corpus

        corpus = Corpus([corpus.ids[r] for r in rows], [corpus.titles[r] for r in rows],
                        [corpus.texts[r] for r in rows], {corpus.ids[r]: i for i, r in enumerate(rows)})
        doc_texts = corpus.doc_texts()
        args.epochs, args.ce_epochs, args.rerank_top = 1, 1, 5
    valid_qids = list(valid_qrels)
    all_queries = {**train.queries, **test.queries}
    test_texts = [all_queries[q] for q in test_qids]
    valid_texts = [all_queries[q] for q in valid_qids]
    rel_test = relevant_rows(test_qids, test.qrels, corpus)
    rel_valid = relevant_rows(valid_qids, valid_qrels, corpus)
    print(f"SciFact: {len(corpus)} docs; train {len(train_qrels)} queries, valid {len(valid_qrels)} "
          f"(grouped by relevant doc), test {len(test_qids)} ({len(unseen)} with unseen docs)", file=sys.stderr)

    # training pairs: one per (train query, relevant doc)
    pair_q, pair_pos = [], []
    for q in sorted(train_qrels, key=lambda s: int(s) if s.isdigit() else s):
        for d, rel in sorted(train_qrels[q].items()):
            if rel > 0:
                pair_q.append(all_queries[q])
                pair_pos.append(corpus.row_of[d])
    pos_by_q: dict[str, set[int]] = {}
    for q, r in zip(pair_q, pair_pos):
        pos_by_q.setdefault(q, set()).add(r)
    uniq_q = list(pos_by_q)
    uniq_pos = [np.asarray(sorted(pos_by_q[q])) for q in uniq_q]

    rows: list[dict] = []
    K = 100

    def get_cross_encoder():
        ce_dir = out / "cross_encoder"
        cfg = RerankTrainConfig(epochs=args.ce_epochs, max_length=args.ce_max_length, lr=args.ce_lr,
                                negatives_per_query=args.ce_negatives, max_groups=args.ce_max_groups,
                                freeze_layers=args.ce_freeze_layers, seed=args.seed)
        if args.reuse and (ce_dir / "twotower_cross_encoder.json").is_file():
            print(f"reusing {ce_dir}", file=sys.stderr)
            meta = json.loads((ce_dir / "twotower_cross_encoder.json").read_text())
            check_reused(ce_dir, meta["config"], cfg)
            return CrossEncoderReranker(ce_dir, max_length=meta["config"]["max_length"]), float(meta["seconds"])
        t = time.perf_counter()
        bm25_ce = BM25Retriever().fit(doc_texts, corpus.ids)
        ce_mining = MiningConfig(n=args.ce_negatives * max(1, args.ce_epochs), depth=30, relative_margin=0.05)
        ce_negs, ce_report = mine_hard_negatives(uniq_q, uniq_pos, bm25_ce, ce_mining)
        print("cross-encoder negatives (BM25):", ce_report.summary(), file=sys.stderr)
        by_q = dict(zip(uniq_q, ce_negs))
        ce = train_cross_encoder(pair_q, pair_pos, [by_q[q] for q in pair_q], doc_texts, ce_dir, config=cfg)
        return ce, time.perf_counter() - t

    if args.ce_only:
        _, secs = get_cross_encoder()
        print(f"cross-encoder trained in {secs:.0f}s -> {out / 'cross_encoder'}")
        return 0

    def record(name: str, test_res, **extra) -> None:
        m_all = evaluate_retriever(test_res, rel_test)
        sl = type(test_res)(test_res.ids[unseen], test_res.scores[unseen])
        m_sl = evaluate_retriever(sl, [rel_test[i] for i in unseen])
        row = {"system": name}
        row.update({k: v for k, v in m_all.items()})
        row.update({f"{k} unseen": v for k, v in m_sl.items()})
        row.update({k: f"{v:.1f}" for k, v in extra.items()})
        rows.append(row)
        print(f"[{time.perf_counter() - t_all:7.1f}s] {name}: NDCG@10 {m_all['NDCG@10']:.4f} "
              f"(unseen {m_sl['NDCG@10']:.4f}) {extra}", file=sys.stderr, flush=True)

    # 1. BM25
    t = time.perf_counter()
    bm25 = BM25Retriever().fit(doc_texts, corpus.ids)
    bm25_fit_s = time.perf_counter() - t
    t = time.perf_counter()
    bm25_test = bm25.search(test_texts, K)
    bm25_q_s = time.perf_counter() - t
    bm25_valid = bm25.search(valid_texts, K)
    record("BM25 (bm25s, lucene k1=1.2 b=0.75)", bm25_test,
           **{"train s": 0.0, "encode s": bm25_fit_s, "ms/query": 1000 * bm25_q_s / len(test_texts)})

    # 2. zero-shot MiniLM
    enc = load_text_encoder(None)
    doc_emb = cached_encode(enc, doc_texts, cache_dir, max_length=args.max_length, batch_size=32)  # [N, D]
    cut = truncation_report(enc, doc_texts, args.max_length)  # cached_encode is not DenseRetriever.fit: say it here
    if cut is not None:
        print(describe_truncation(cut), file=sys.stderr)
    # cold encoding time of the corpus, as recorded by the cache when it was filled
    enc_s = EmbeddingCache(cache_dir, model_id=enc.model_id, max_length=args.max_length).stats()["encode_seconds"]
    zs = DenseRetriever(enc, max_length=args.max_length).fit_embeddings(doc_emb)
    t = time.perf_counter()
    zs_test = zs.search(test_texts, K)
    q_s = time.perf_counter() - t
    zs_valid = zs.search(valid_texts, K)
    record("zero-shot all-MiniLM-L6-v2", zs_test, **{"train s": 0.0, "encode s": round(enc_s, 1),
                                                      "ms/query": round(1000 * q_s / len(test_texts), 1)})

    # 3. fine-tuned two-tower (hard negatives mined from the zero-shot dense index)
    ft_dir = out / "bi_encoder"
    ft_train_s = 0.0
    full = args.corpus_negatives and not args.train_doc_tower
    cfg = FinetuneConfig(
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, temperature=FinetuneConfig.temperature, max_length=args.max_length,
        train_doc_tower=args.train_doc_tower, corpus_negatives=full,
        negatives_per_query=0 if full else (1 if args.train_doc_tower else args.negatives),
        refresh_negatives=not (full or args.train_doc_tower), seed=args.seed,
    )
    if args.reuse and (ft_dir / "twotower_bi_encoder.json").is_file():
        meta = json.loads((ft_dir / "twotower_bi_encoder.json").read_text())
        check_reused(ft_dir, meta["config"], cfg)
        q_enc, d_enc = load_bi_encoder(ft_dir)
        ft_train_s = float(meta["seconds"])
        print(f"reusing {ft_dir}", file=sys.stderr)
    else:
        t = time.perf_counter()
        mining = MiningConfig(n=max(3, args.negatives), depth=30, skip_top=0, relative_margin=0.05)
        negs, report = mine_hard_negatives(uniq_q, uniq_pos, zs, mining)
        print("bi-encoder negatives (zero-shot dense):", report.summary(), file=sys.stderr)
        by_q = dict(zip(uniq_q, negs))
        res = finetune_bi_encoder(pair_q, pair_pos, doc_texts, ft_dir, config=cfg, negatives=[by_q[q] for q in pair_q],
                                  mining=mining, cache_dir=cache_dir)
        q_enc, d_enc = res.query_encoder, res.doc_encoder
        ft_train_s = time.perf_counter() - t
        first = np.mean([h["loss"] for h in res.history if h["epoch"] == 0])
        last = np.mean([h["loss"] for h in res.history if h["epoch"] == cfg.epochs - 1])
        print(f"fine-tune: {len(res.history)} steps, mean loss epoch 0 {first:.3f} -> last {last:.3f}, "
              f"{ft_train_s:.0f}s", file=sys.stderr)
    ft_doc = cached_encode(d_enc, doc_texts, cache_dir, max_length=args.max_length, batch_size=32)
    ft_enc_s = EmbeddingCache(cache_dir, model_id=d_enc.model_id, max_length=args.max_length).stats()["encode_seconds"]
    ft = DenseRetriever(q_enc, doc_encoder=d_enc, max_length=args.max_length).fit_embeddings(ft_doc)
    t = time.perf_counter()
    ft_test = ft.search(test_texts, K)
    ft_q_s = time.perf_counter() - t
    ft_valid = ft.search(valid_texts, K)
    tower = "query+doc towers" if args.train_doc_tower else "query tower, frozen doc tower"
    record(f"fine-tuned two-tower ({tower})", ft_test,
           **{"train s": ft_train_s, "encode s": ft_enc_s, "ms/query": 1000 * ft_q_s / len(test_texts)})

    # 4. hybrid: fusion rule and weight chosen on validation NDCG@10
    for name, v in (("BM25", bm25_valid), ("zero-shot", zs_valid), ("fine-tuned", ft_valid)):
        print(f"valid NDCG@10 {name}: {evaluate_retriever(v, rel_valid)['NDCG@10']:.4f}", file=sys.stderr)
    choice = tune_fusion([bm25_valid, ft_valid], rel_valid)
    hybrid_test = choice.apply([bm25_test, ft_test], top_k=K)
    hybrid_valid = choice.apply([bm25_valid, ft_valid], top_k=K)
    record(f"hybrid BM25 + fine-tuned [{choice.describe()}]", hybrid_test, **{"train s": round(ft_train_s, 1)})

    # 5. cross-encoder rerank of the hybrid top-N
    if not args.no_rerank:
        ce, ce_train_s = get_cross_encoder()
        n = args.rerank_top
        reranked = ce.rerank(test_texts, hybrid_test, doc_texts, top_n=n, show_progress=True)
        ce_ms = 1000 * ce.last_seconds / len(test_texts)
        record(f"hybrid + cross-encoder rerank top-{n}", reranked, **{"train s": ce_train_s, "ms/query": ce_ms})
        # guarded variant: fuse hybrid and cross-encoder scores over the top-n, rule and weight chosen on
        # validation (the grid includes weight 1.0 = keep the hybrid order, so a weak reranker can't hurt valid)
        ce_valid = ce.rerank(valid_texts, hybrid_valid, doc_texts, top_n=n, show_progress=True)
        head = lambda r: type(r)(r.ids[:, :n], r.scores[:, :n])  # noqa: E731
        ce_choice = tune_fusion([head(hybrid_valid), head(ce_valid)], rel_valid)
        fused_head = ce_choice.apply([head(hybrid_test), head(reranked)], top_k=n)
        ids = hybrid_test.ids.copy()
        scores = hybrid_test.scores.copy()
        ids[:, :n] = fused_head.ids
        floor = fused_head.scores.min(axis=1, keepdims=True)
        scores[:, :n] = fused_head.scores
        scores[:, n:] = floor - 1.0 - np.arange(ids.shape[1] - n)[None, :]
        fused = type(hybrid_test)(ids, scores.astype(np.float32))
        record(f"hybrid + rerank fused [{ce_choice.describe()}, chosen on valid]", fused,
               **{"train s": ce_train_s, "ms/query": ce_ms})
        print(f"rerank fusion chosen on validation: {ce_choice.describe()} (valid NDCG@10 {ce_choice.valid_ndcg10:.4f})",
              file=sys.stderr)

    cols = ["system", "NDCG@10", "Recall@10", "Recall@100", "MRR@10",
            "NDCG@10 unseen", "Recall@10 unseen", "Recall@100 unseen", "MRR@10 unseen",
            "train s", "encode s", "ms/query"]
    title = (f"SciFact test: {len(test_qids)} queries (cols 2-5) and the {len(unseen)} whose relevant docs are "
             f"unseen in train qrels (cols 6-9); threads={args.threads}, doc max_length={args.max_length}"
             + (" [QUICK SMOKE RUN - not a result]" if args.quick else "") + "\n"
             + sizes_note(args, docs=len(corpus), train_queries=len(train_qrels), valid_queries=len(valid_qids),
                          pairs=len(pair_q), groups=_groups_used(out / "cross_encoder")))
    print(format_table(rows, cols, title=title, mark_best=["NDCG@10", "NDCG@10 unseen"]))
    print(f"fusion chosen on {len(valid_qids)} validation queries: {choice.describe()} "
          f"(valid NDCG@10 {choice.valid_ndcg10:.4f}); total {time.perf_counter() - t_all:.0f}s")
    if args.json:
        write_json_out(args.json, json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
