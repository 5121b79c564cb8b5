"""``twotower search ...`` and ``twotower rerank ...`` subcommands (argparse, lazy imports).

Mounted by :mod:`twotower.cli.main` (next to the other command modules) through :func:`register`; each handler
takes the parsed ``argparse.Namespace`` and returns an exit code.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator

from twotower.config import MAX_QUERY_CHARS, SEARCH_THREADS_DEFAULT  # light: what --help states is what _threads sets
from twotower.cli.stopping import sigterm_keeps_folder  # light: the standard library alone
from twotower.utils.shell import shell_arg
from twotower.utils.wording import plural

__all__ = ["register", "register_search", "register_rerank"]

_THREADS_HELP = f"torch threads (default: TWOTOWER_THREADS, else {SEARCH_THREADS_DEFAULT})"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``search`` and ``rerank`` command groups."""
    register_search(subparsers)
    register_rerank(subparsers)


def register_search(subparsers: argparse._SubParsersAction) -> None:
    from twotower.config import FUSION_CHOICES, SearchConfig  # every default is declared there, once

    sc = SearchConfig()
    p = subparsers.add_parser("search", help="text retrieval: BM25, dense two-tower, hybrid, rerank (BEIR data; "
                              "`search prepare` makes it from your own CSV/JSONL passages and pairs)")
    sub = p.add_subparsers(dest="search_cmd", required=True)

    _register_prepare(sub)

    e = sub.add_parser("evaluate", help="NDCG@10, Recall@10/100, MRR@10 of a retriever on a BEIR split")
    e.add_argument("--beir", required=True, help="BEIR directory (corpus.jsonl, queries.jsonl, qrels/)")
    e.add_argument("--split", default="test", help="qrels split to score (default test)")
    # --mode: the name `search query` and POST /search give the same choice; without it, argparse read
    # `--mode dense` as an abbreviation of --model ("--model dense: no such folder")
    e.add_argument("--retriever", "--mode", dest="retriever", default="bm25", choices=["bm25", "dense", "hybrid"],
                   help="bm25 (default), dense (bi-encoder) or hybrid (both, fused); --mode is the same flag, "
                        "as search query names it")
    e.add_argument("--model", help="bi-encoder directory (default: zero-shot all-MiniLM-L6-v2)")
    _fusion_flags(e, sc, FUSION_CHOICES, "hybrid: ")
    _bm25_flags(e, "bm25 and hybrid: ")
    e.add_argument("--rerank", help="cross-encoder directory to rerank the top candidates")
    e.add_argument("--rerank-top", type=int,
                   help="candidates the cross-encoder re-scores; only with --rerank "
                   f"(default {sc.rerank_top})")
    rerank_backend_flag(e)
    _length_flags(e, sc)
    e.add_argument("--cache", default=sc.cache_dir, help="corpus embedding cache directory, shared by every run and "
                   "working folder (default %(default)s)")
    e.add_argument("--threads", type=int, help=_THREADS_HELP)
    e.add_argument("--json", action="store_true",
                   help="print one JSON object: the four metrics, and what was measured (beir, split, retriever, "
                        "fusion, bm25 (its settings), model (with its encoder_backend, max_length and "
                        "query_max_length), rerank, queries, and skipped: judged queries without a relevant "
                        "document, not scored; dense and hybrid add truncation: the passages the encoder cut, "
                        "--rerank adds without_rerank, rerank_backend and rerank_truncation: the pairs the "
                        "cross-encoder cut)")
    e.add_argument("--keep-unknown", action="store_true",
                   help="count a qrels pair whose corpus id is not in corpus.jsonl as relevant and never retrieved, "
                        "as BEIR's evaluation does, with a warning naming how many (default: refuse the qrels file)")
    _encoder_flags(e, model_flag=True)
    # search query's list length, refused saying the depths measured: argparse read `--k 10` as --keep-unknown
    # and then refused "unrecognized arguments: 10"
    e.add_argument("--k", dest="evaluate_k", help=argparse.SUPPRESS)
    e.set_defaults(func=sigterm_keeps_folder(cmd_search_evaluate))

    i = sub.add_parser("index", help="build a saved search index (BM25 + dense) over a corpus")
    i.add_argument("--beir", required=True, help="BEIR directory (or any dir with corpus.jsonl)")
    i.add_argument("--out", required=True, help="folder for the search index")
    i.add_argument("--force", action="store_true",
                   help="replace --out even when it holds files no search index wrote (they are removed)")
    i.add_argument("--model", help="bi-encoder directory (default: zero-shot all-MiniLM-L6-v2)")
    # not a setting of the index (it holds every mode), but named so that `--mode hybrid` is refused in words that
    # say where the mode is chosen: argparse read it as an abbreviation of --model ("--model hybrid: no such folder")
    i.add_argument("--mode", dest="index_mode", help=argparse.SUPPRESS)
    _length_flags(i, sc)
    _fusion_flags(i, sc, FUSION_CHOICES, "stored with the index: ")
    _bm25_flags(i, "saved with the index (bm25/meta.json): ")
    i.add_argument("--cache", default=sc.cache_dir, help="embedding cache folder, shared by every run and "
                   "working folder (default %(default)s)")
    i.add_argument("--threads", type=int, help=_THREADS_HELP)
    _encoder_flags(i, model_flag=True)
    i.set_defaults(func=sigterm_keeps_folder(cmd_search_index))

    q = sub.add_parser("query", help="search a saved index (hybrid by default, optional rerank)")
    q.add_argument("--index", required=True, help="directory written by 'twotower search index'")
    q.add_argument("text", nargs="+", help=f"query text(s), at most {MAX_QUERY_CHARS} characters each")
    from twotower.cli.flags import count_or_typed

    # a --k that is no integer is refused by the command, in the words of `recommend --k` (count_or_typed)
    q.add_argument("--k", type=count_or_typed, default=sc.k, metavar="K", help="results to print (default %(default)s)")
    q.add_argument("--mode", default="hybrid", choices=["bm25", "dense", "hybrid"],
                   help="bm25, dense or hybrid (default: both, fused as stored with the index)")
    q.add_argument("--rerank", help="cross-encoder directory")
    q.add_argument("--rerank-top", type=int,
                   help="candidates the cross-encoder re-scores; only with --rerank "
                   f"(default {sc.rerank_top})")
    rerank_backend_flag(q)
    q.add_argument("--threads", type=int, help=_THREADS_HELP)
    q.add_argument("--json", action="store_true", help="print the results as JSON")
    # search evaluate's and index's flag, refused saying where the model is chosen: argparse offered "did you mean
    # --mode DIR?" (the index searches with the model it was built with)
    q.add_argument("--model", dest="query_model", help=argparse.SUPPRESS)
    # search index's settings, stored with the index: refused saying so (argparse: "unrecognized arguments:
    # --fusion; did you mean --json?")
    for flag in _INDEX_SETTINGS:
        q.add_argument(flag, dest="index_settings", action=_IndexSetting, help=argparse.SUPPRESS)
    q.set_defaults(func=cmd_search_query)

    n = sub.add_parser("info", help="describe a saved search index: its documents, model, fusion and BM25 settings "
                       "(k1, b, token pattern, vocabulary)")
    n.add_argument("--index", required=True, help="directory written by 'twotower search index' (or a folder "
                   "BM25Retriever.save wrote)")
    n.add_argument("--json", action="store_true",
                   help="print one JSON object: kind, path, documents, model, model_found (whether that folder "
                        "exists; null for the packaged model), doc_encoder, query_encoder (null: not recorded by an "
                        "older index), query_encoder_now and query_encoder_matches (the model's query tower now, and "
                        "whether it is the recorded one; null when unchecked), encoder_backend, "
                        "max_length, query_max_length, fusion, source, truncation, twotower_version (the version that "
                        "built it; null: an older index) and bm25 (k1, b, method, "
                        "stopwords, stemmer, token_pattern, documents, vocabulary)")
    n.set_defaults(func=cmd_search_info)

    from twotower.config import FinetuneConfig  # every default is declared there, once

    ft = FinetuneConfig()
    t = sub.add_parser("train", help="fine-tune a text two-tower on a BEIR train split (in-batch + hard negatives)")
    _train_common(t, seed=ft.seed)
    t.add_argument("--epochs", type=int, default=ft.epochs, help="training epochs (default %(default)s)")
    t.add_argument("--lr", type=float, default=ft.lr, help="learning rate (default %(default)s)")
    t.add_argument("--batch-size", type=int, default=ft.batch_size, help="queries per batch (default %(default)s)")
    t.add_argument("--temperature", type=float, default=ft.temperature, help="softmax temperature (default %(default)s)")
    # None: --base's own lengths, else the config's (_base_lengths)
    _length_flags(t, ft, source="--base", recorded=("; recorded, so search evaluate / index read at it too",
                                                    "; recorded, as --max-length"))
    t.add_argument("--train-doc-tower", action="store_true",
                   help="train the document tower too (slow on CPU; 1 hard negative per query per step)")
    t.add_argument("--shared", action="store_true", help="one transformer for both towers (implies --train-doc-tower)")
    t.add_argument("--negatives", type=int, default=ft.negatives_per_query,
                   help="hard negatives mined per query (default %(default)s; 0: in-batch negatives only, the "
                        "batch's other positives, as MultipleNegativesRankingLoss; nothing is mined)")
    _mining_flags(t, "the --mining-retriever")
    from twotower.config import MINING_RETRIEVERS

    t.add_argument("--mining-retriever", default=ft.mining_retriever, choices=MINING_RETRIEVERS,
                   help="where the hard negatives are mined (default %(default)s): dense, the model's own index "
                        "(--base's towers, then the model being trained, mined again before each epoch after the "
                        "first with a frozen document tower), or bm25, BM25's lexical matches as rerank train mines "
                        "them (mined once: BM25's lists do not change as the model trains)")
    _bm25_flags(t, "with --mining-retriever bm25, recorded in the marker's mining: ")
    _valid_frac_flag(t, ft.valid_frac, "scored by dense NDCG@10 before training and after each epoch; the best "
                     "epoch's towers are saved, the starting ones (with a warning) when no epoch beats them. With "
                     "--train-doc-tower each validation encodes the corpus again")
    t.add_argument("--patience", type=int, default=ft.patience,
                   help="with --valid-frac: stop after this many epochs without a better validation NDCG@10 "
                        "(default %(default)s)")
    t.add_argument("--cache", default=sc.cache_dir, help="embedding cache folder, shared by every run and "
                   "working folder (default %(default)s)")
    _encoder_flags(t)
    t.set_defaults(func=sigterm_keeps_folder(cmd_search_train))


def _register_prepare(sub: argparse._SubParsersAction) -> None:
    from twotower.config import PrepareConfig  # every default is declared there, once

    pc = PrepareConfig()
    r = sub.add_parser(
        "prepare", help="turn your own passages + (query, relevant passage) pairs (CSV/TSV/Parquet/JSONL) into "
        "the BEIR folder the other search commands read",
        description="Reads a passages table and a pairs table with your column names and writes OUT/corpus.jsonl, "
        "queries.jsonl, qrels/train.tsv + qrels/test.tsv (queries sharing a relevant passage stay in one split; "
        "or the splits of --split-col) and prepare.json (what was read and dropped). Then: twotower search "
        "evaluate --beir OUT; twotower search train --beir OUT ...")
    r.add_argument("--passages", required=True, help="passages table: one row per passage, with an id and a text")
    r.add_argument("--pairs", required=True, help="pairs table: one row per (query text, relevant passage id)")
    r.add_argument("--out", required=True, 
                   help="BEIR folder to write: new, empty, or an earlier `search prepare` output (replaced)")
    r.add_argument("--force", action="store_true",
                   help="replace --out even when it holds files no search prepare wrote (they are removed)")
    r.add_argument("--passage-id-col", default=pc.passage_id, help="passages: id column (default %(default)s)")
    r.add_argument("--passage-text-col", default=pc.passage_text, help="passages: text column (default %(default)s)")
    r.add_argument("--passage-title-col", default=pc.passage_title, help="passages: optional title column")
    r.add_argument("--query-col", default=pc.query, help="pairs: query text column (default %(default)s)")
    r.add_argument("--query-id-col", default=pc.query_id,
                   help="pairs: optional query id column (default: one id per distinct query text, q1, q2, ... in "
                   "order of first appearance among the pairs kept)")
    r.add_argument("--pair-passage-col", default=pc.pair_passage,
                   help="pairs: relevant passage id column (default: the --passage-id-col name)")
    r.add_argument("--pair-passage-list", default=pc.pair_passage_list, metavar="brackets|SEP",
                   help="pairs: a cell lists several relevant passage ids, each its own pair (same query, score and "
                   "split): 'brackets' for [1, 2], ['a', 'b'] or [1 2] (SciFact's cited_doc_ids), or the character "
                   "between the ids, e.g. ';' for 1;2; an empty list is an empty id (default: one id per cell)")
    r.add_argument("--score-col", default=pc.score, help="pairs: optional integer relevance (default: 1 for every pair)")
    r.add_argument("--split-col", default=pc.split,
                   help="pairs: optional split name per row (train, test, ...), instead of --test-share")
    r.add_argument("--test-share", type=float, default=pc.test_share,
                   help="share of the queries written to qrels/test.tsv, the rest to train.tsv (default %(default)s; "
                   "0: every query in test.tsv, for evaluation only)")
    r.add_argument("--seed", type=int, default=pc.seed, help="seed of the train/test cut (default %(default)s)")
    r.add_argument("--encoding", default=pc.encoding,
                   help="text encoding of both tables, e.g. cp1252 for Windows / Excel exports (default %(default)s; "
                        "the BEIR folder is written in UTF-8)")
    r.add_argument("--drop-unknown", action="store_true",
                   help="leave out (and count) pairs whose passage id is empty or not in --passages instead of "
                   "refusing them")
    r.set_defaults(func=sigterm_keeps_folder(cmd_search_prepare))


def _prepare_config(args: argparse.Namespace):  # noqa: ANN202 - PrepareConfig
    """The PrepareConfig of ``search prepare``'s flags; a refusal names the flag typed (``--passage-id-col: empty
    column name ...``), not the field a Python caller sees (``PrepareConfig.passage_id: ...``)."""

    from twotower.config import PREPARE_COLUMNS, PrepareConfig
    from twotower.errors import ConfigError

    try:
        return PrepareConfig(passage_id=args.passage_id_col, passage_text=args.passage_text_col,
                             passage_title=args.passage_title_col, query=args.query_col, query_id=args.query_id_col,
                             pair_passage=args.pair_passage_col, pair_passage_list=args.pair_passage_list,
                             score=args.score_col, split=args.split_col,
                             test_share=args.test_share, seed=args.seed, drop_unknown=args.drop_unknown,
                             encoding=args.encoding)
    except ConfigError as e:
        from twotower.cli.flags import fields_as_flags

        # only the class-qualified names: "encoding" and "query" are words of the messages too
        def flag(field: str) -> str:
            return f"--{field.replace('_', '-')}{'-col' if field in PREPARE_COLUMNS else ''}"

        raise ConfigError(fields_as_flags(str(e), "PrepareConfig", flag)) from None


def _warn_unused_cut_flags(args: argparse.Namespace) -> None:
    """--test-share and --seed cut the queries into train and test; with --split-col each pair's split is read from
    that column instead, and `--split-col part --test-share 0.5` dropped the 0.5 without a word."""
    from twotower.config import PrepareConfig

    if args.split_col is None:
        return
    for flag, value, default in (("--test-share", args.test_share, PrepareConfig.test_share),
                                 ("--seed", args.seed, PrepareConfig.seed)):
        if value != default:
            logging.getLogger(__name__).warning(
                "%s %s has no effect with --split-col %s (each pair's split is read from that column); leave "
                "--split-col out to cut the queries by --test-share", flag, value, args.split_col)


def cmd_search_prepare(args: argparse.Namespace) -> int:
    from twotower.cli.paths import check_artefact_dir
    from twotower.errors import DataError
    from twotower.search.prepare import is_prepared_beir, prepare_beir, prepared_files

    check_artefact_dir(args.out, kind="prepared BEIR folder", is_same_kind=is_prepared_beir,
                       inputs={"--passages": args.passages, "--pairs": args.pairs}, own_files=prepared_files,
                       force=args.force)
    from twotower.cli.flags import check_range
    from twotower.config import MAX_SEED

    # PrepareConfig's bounds, said as `--k 0` is ("--test-share: must be at least 0 and less than 1, got -1")
    check_range("--test-share", args.test_share, 0, 1, hi_open=True)
    check_range("--seed", args.seed, 0, MAX_SEED, hi_said="2**64 - 1", why="the largest torch takes")
    cols = _prepare_config(args)
    _warn_unused_cut_flags(args)
    try:
        with _out_writer(args, "twotower search prepare"):
            rep = prepare_beir(args.passages, args.pairs, args.out, cols, force=args.force)
    except DataError as e:  # the readers' advice names data.encoding; here the setting is a flag
        if "data.encoding" not in e.message:
            raise
        raise DataError(e.message.replace("data.encoding", "--encoding"), file=e.file, row=e.row, column=e.column,
                        unit=e.unit, line=e.line) from None
    splits = ", ".join(f"{n} {_count(s['queries'], 'query', 'queries')} / {_count(s['judgements'], 'pair')}"
                       for n, s in rep["splits"].items())
    dropped = "".join(f", {_count(rep[key], one, many)} dropped" for key, one, many in (
        ("empty_passage_ids_dropped", "pair with an empty passage id", "pairs with an empty passage id"),
        ("unknown_passages_dropped", "pair with an unknown passage", "pairs with unknown passages"),
        ("duplicate_pairs_dropped", "duplicate pair", "duplicate pairs")) if rep[key])
    empty = f" ({rep['empty_passages']} empty)" if rep["empty_passages"] else ""
    print(f"wrote {args.out}: {_count(rep['passages'], 'passage')}{empty}, {_count(rep['queries'], 'query', 'queries')}; "
          f"{splits}{dropped}")
    return 0


def _count(n: int, one: str, many: str | None = None) -> str:
    """``1 query``, ``2 queries``, ``5,183 passages`` (``utils.wording.plural``): the summary said "train 1 queries"."""
    from twotower.utils.wording import plural

    return plural(n, one, many)


def register_rerank(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rerank", help="cross-encoder reranker")
    sub = p.add_subparsers(dest="rerank_cmd", required=True)
    from twotower.config import RerankTrainConfig, SearchConfig  # every default is declared there, once

    rt = RerankTrainConfig()
    t = sub.add_parser("train", help="train a cross-encoder from MiniLM on BEIR train pairs + hard negatives mined "
                       "from BM25 (default) or a bi-encoder (--mining-retriever dense)")
    _train_common(t, seed=rt.seed)
    t.add_argument("--epochs", type=int, default=rt.epochs, help="training epochs (default %(default)s)")
    t.add_argument("--negatives", type=int, default=rt.negatives_per_query, help="hard negatives per query (default %(default)s)")
    # None: --base's own length, else the config's (_base_lengths)
    t.add_argument("--max-length", type=int, default=None,
                   help="word pieces the cross-encoder reads of each (query, passage) pair, the longer text cut "
                        f"first (default: the length --base was trained with, else {rt.max_length}); recorded, so "
                        "--rerank reads pairs at it too")
    t.add_argument("--lr", type=float, default=rt.lr,
                   help="learning rate of the transformer (the fresh relevance head learns at "
                        f"{rt.head_lr}; default %(default)s)")
    t.add_argument("--batch-size", type=int, default=rt.groups_per_step,
                   help="queries per optimiser step, each scored with its positive and --negatives (default "
                        "%(default)s)")
    _mining_flags(t, "the --mining-retriever")
    from twotower.config import MINING_RETRIEVERS, RERANK_MINING_RETRIEVER

    t.add_argument("--mining-retriever", default=RERANK_MINING_RETRIEVER, choices=MINING_RETRIEVERS,
                   help="where the hard negatives are mined, and whose lists --valid-frac reranks (default "
                        "%(default)s): bm25, BM25's lexical matches, or dense, a bi-encoder's (--mining-model): "
                        "mine from the first stage the cross-encoder will rerank")
    _bm25_flags(t, "with --mining-retriever bm25 (the default), recorded in the marker's mining: ")
    t.add_argument("--mining-model", help="with --mining-retriever dense: the bi-encoder directory (a `search train` "
                   "output; default: zero-shot all-MiniLM-L6-v2)")
    t.add_argument("--cache", default=SearchConfig.cache_dir, help="with --mining-retriever dense: the corpus "
                   "embedding cache folder, shared by every run and working folder (default %(default)s)")
    _valid_frac_flag(t, rt.valid_frac, f"reranked after each epoch (top {SearchConfig.rerank_top} of the "
                     "--mining-retriever's list, as `search evaluate --rerank` does) and scored by NDCG@10 against "
                     "that list's own order; the best epoch's weights are saved, with a warning when even they "
                     "rerank worse than it")
    t.add_argument("--patience", type=int, default=rt.patience,
                   help="with --valid-frac: stop after this many epochs without a better validation NDCG@10 "
                        "(default %(default)s)")
    t.set_defaults(func=sigterm_keeps_folder(cmd_rerank_train))


def _valid_frac_flag(t: argparse.ArgumentParser, default: float, what: str) -> None:
    t.add_argument("--valid-frac", type=float, default=default,
                   help="share of the --split queries held out from training (queries sharing a relevant document "
                        f"stay together; drawn by --seed) and {what} (default %(default)s: none held out)")


def _mining_flags(t: argparse.ArgumentParser, retriever: str) -> None:
    from twotower.search.negatives import MiningConfig  # its defaults are declared there, once

    t.add_argument("--mining-depth", type=int, default=MiningConfig.depth,
                   help=f"candidates {retriever} retrieves per query to mine hard negatives from (default %(default)s)")
    t.add_argument("--mining-margin", type=float, default=MiningConfig.relative_margin,
                   help="drop mined candidates scoring above (1 - this) x the positive's score, as likely unjudged "
                        "relevant documents (default %(default)s; lower keeps more)")


#: what the mining summary calls the settings that fill a query short of negatives, in these commands
MINING_FLAGS = {"depth": "--mining-depth", "relative_margin": "--mining-margin"}


def _mining_config(args: argparse.Namespace, n: int, n_flag: str):  # noqa: ANN202 - MiningConfig
    """MiningConfig of ``--mining-depth`` / ``--mining-margin`` and ``n`` negatives, an error naming the flags."""
    from twotower.search.negatives import MiningConfig

    from twotower.cli.flags import check_range

    _check_positive(args, "--mining-depth")
    # MiningConfig's own message offers None, which a flag cannot take
    check_range("--mining-margin", args.mining_margin, 0, 1, hi_open=True)
    return _flag_config(lambda: MiningConfig(n=n, depth=args.mining_depth, relative_margin=args.mining_margin),
                        {"n": n_flag})


def _check_mining_depth(args: argparse.Namespace, n_docs: int) -> None:
    """``--mining-depth`` above the larger of MAX_K and the corpus size, refused once the corpus is read, before a model
    is loaded or the corpus indexed: the search refused it later, naming its ``k`` ("k must be at most 10000 (the
    larger of ...)"). Below 1 it is refused before anything is read (:func:`_mining_config`)."""
    from twotower.config import MAX_K

    from twotower.cli.flags import check_range

    check_range("--mining-depth", args.mining_depth, hi=max(MAX_K, n_docs),
                why=f"the larger of twotower.config.MAX_K, {MAX_K}, and the {n_docs} documents of the corpus: the "
                    "candidate lists are padded to it")


def _train_common(t: argparse.ArgumentParser, *, seed: int) -> None:
    t.add_argument("--beir", required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    t.add_argument("--split", default="train", help="qrels split to train on (default train)")
    t.add_argument("--out", required=True, help="model directory to write")
    t.add_argument("--force", action="store_true",
                   help="replace --out even when it holds files its earlier training did not write (they are removed)")
    t.add_argument("--base", help="starting sentence-transformers directory (default: all-MiniLM-L6-v2)")
    t.add_argument("--seed", type=int, default=seed, help="random seed (default %(default)s)")
    t.add_argument("--threads", type=int, help=_THREADS_HELP)


#: the word-piece lengths `search train` / `rerank train` read, by config field: (flag, what one length covers)
_BI_LENGTHS = {"max_length": ("--max-length", "a document"), "query_max_length": ("--query-max-length", "a query")}
_CROSS_LENGTHS = {"max_length": ("--max-length", "a (query, passage) pair")}


def _lengths_given(args: argparse.Namespace, lengths: dict[str, tuple[str, str]]) -> dict[str, int]:
    """The length flags of ``lengths`` given, by config field; one not given is left to :func:`_base_lengths`."""
    return {field: getattr(args, field) for field in lengths if getattr(args, field) is not None}


def _base_lengths(args: argparse.Namespace, lengths: dict[str, tuple[str, str]]) -> dict[str, int]:
    """The lengths of ``lengths`` that no flag gives, read from the marker of the ``--base`` training goes on from,
    and logged (``{}`` for a plain model: the config's defaults stand); a flag given that differs from the base's
    length is said too.

    `search train --base M` went back to 256 word pieces a document for an M trained at 128: the corpus was encoded
    again at a length M never saw, and the marker recorded 256, without a word, where `search evaluate` / `index`
    read M at its own lengths. `rerank train --base` did the same to a cross-encoder's pairs.
    """
    from twotower.search.artefacts import trained_lengths

    trained = {field: n for field, n in trained_lengths(args.base).items() if field in lengths}
    log = logging.getLogger(__name__)
    for field, n in trained.items():
        given = getattr(args, field)
        if given is not None and given != n:
            flag, per = lengths[field]
            log.info("%s %d: not the %d word pieces %s --base %s was fine-tuned at; training goes on at %d", flag,
                     given, n, per, args.base, given)
    read = {field: n for field, n in trained.items() if getattr(args, field) is None}
    if read:
        # "24 word pieces a document and 8 a query"
        said = " and ".join(f"{n}{' word pieces' if i == 0 else ''} {lengths[field][1]}"
                            for i, (field, n) in enumerate(read.items()))
        flags = " / ".join(lengths[field][0] for field in read)
        log.info("--base %s was fine-tuned at %s: training goes on at %s (%s to choose %s)", args.base, said,
                 "them" if len(read) > 1 else "it", flags, "others" if len(read) > 1 else "another")
    return read


def _length_flags(p: argparse.ArgumentParser, sc, *, source: str = "--model",  # noqa: ANN001 - a config
                  recorded: tuple[str, str] = ("", "")) -> None:
    """--max-length / --query-max-length, None when not given: the lengths ``source`` was fine-tuned with, else
    ``sc``'s (SearchConfig's, or FinetuneConfig's for search train); ``recorded``: what each help adds."""
    for flag, what, default, said in (("--max-length", "document", sc.max_length, recorded[0]),
                                      ("--query-max-length", "query", sc.query_max_length, recorded[1])):
        p.add_argument(flag, type=int, default=None,
                       help=f"word pieces the encoder reads of each {what} (default: the length {source} was "
                            f"fine-tuned with, else {default}){said}")


def _fusion_flags(p: argparse.ArgumentParser, sc, choices: tuple[str, ...], what: str) -> None:  # noqa: ANN001
    from twotower.config import MAX_RRF_K

    p.add_argument("--fusion", default=sc.fusion, choices=list(choices),
                   help=f"{what}RRF (its k: --rrf-k) or weighted score interpolation after min-max / z-score "
                        "normalisation (default %(default)s)")
    p.add_argument("--rrf-k", type=int, default=sc.rrf_k,
                   help="rrf: the constant k of 1 / (k + rank), an integer 1 to "
                        f"{MAX_RRF_K:,}; larger k flattens the gap between the top ranks (default %(default)s)")
    p.add_argument("--bm25-weight", type=float, default=sc.bm25_weight,
                   help="minmax / zscore interpolation: BM25 weight w, dense 1-w (default %(default)s)")


def _bm25_flags(p: argparse.ArgumentParser, what: str) -> None:
    from twotower.search.bm25 import BM25Config  # its default is declared there, once (light: no bm25s import)

    p.add_argument("--token-pattern", default=BM25Config.token_pattern, metavar="REGEX",
                   help=f"{what}the words BM25 indexes and searches, a Python regular expression matched on the "
                        "lower-cased text, with no capturing group and never matching the empty string (default "
                        "%(default)s: every run of letters or digits; (?u)\\b\\w\\w+\\b drops one-letter words "
                        "and single digits, as bm25s' own default; a pattern starting with - is written "
                        "--token-pattern=-...)")


def _bm25_config(args: argparse.Namespace):  # noqa: ANN202 - BM25Config
    """``--token-pattern`` as a BM25Config (checked there: it compiles, matches no empty string, has no capturing
    group), refused now, before any data is read, naming the flag."""
    from twotower.search.bm25 import BM25Config

    return _flag_config(lambda: BM25Config(token_pattern=args.token_pattern), {"token_pattern": "--token-pattern"})


def _encoder_flags(p: argparse.ArgumentParser, *, model_flag: bool = False, setting: str | None = None) -> None:
    """``model_flag``: the command loads a ``--model``, whose fine-tuning backend is the default (load_bi_encoder).
    ``setting``: the config key ``--encoder-backend`` is a shortcut for (train's ``train.encoder_backend``)."""
    from twotower.text.encoder import BACKEND_CHOICES, EncoderSettings

    trained = "the backend --model was fine-tuned through, else " if model_flag else ""
    trained = f"--config's {setting}, else $TWOTOWER_ENCODER_BACKEND, else " if setting else f"$TWOTOWER_ENCODER_BACKEND, else {trained}"

    p.add_argument("--encoder-backend", choices=BACKEND_CHOICES, default=None,
                   help="text encoder forward pass: torch, torch-bf16 (transformer in bfloat16: fast where the CPU "
                        "multiplies bfloat16 natively), onnx (ONNX Runtime fp32), onnx-int8 (int8 weights) or auto "
                        "(torch-bf16 where bfloat16 is native, else torch); "
                        f"default {trained}{EncoderSettings.backend}; part of the embedding cache key"
                        # train saves no search index: there the run's config.json is what records it
                        + (f" (shortcut for {setting}, which the run's config.json records)" if setting
                           else " and of the saved index"))
    p.add_argument("--encoder-threads", type=int, default=None,
                   help="text encoder threads (default: torch's, which --threads sets; the ONNX backends too)")


def rerank_backend_flag(p: argparse.ArgumentParser) -> None:
    """``--rerank-backend``: the cross-encoder's forward pass (``search evaluate`` / ``search query`` / ``serve``)."""
    from twotower.text.encoder import RERANK_BACKEND_CHOICES, RerankSettings

    p.add_argument("--rerank-backend", choices=RERANK_BACKEND_CHOICES, default=RerankSettings.backend,
                   help="cross-encoder forward pass (--rerank): torch (float32), torch-bf16 (its transformer in "
                        "bfloat16: fast where the CPU multiplies bfloat16 natively, scores within bfloat16 rounding) "
                        "or auto (torch-bf16 where bfloat16 is native, else torch); default %(default)s")


def rerank_settings(args: argparse.Namespace):  # noqa: ANN201 - RerankSettings
    """``--rerank-backend`` as RerankSettings (validated now, before any work); a warning when there is no
    ``--rerank`` for it to apply to (``--rerank-top`` without one is refused: :func:`_rerank_top`)."""
    from twotower.text.encoder import RerankSettings

    settings = RerankSettings(backend=args.rerank_backend)
    if not getattr(args, "rerank", None) and args.rerank_backend != RerankSettings.backend:
        logging.getLogger(__name__).warning("--rerank-backend %s has no effect without --rerank", args.rerank_backend)
    return settings


def _rerank_top(args: argparse.Namespace) -> None:
    """``--rerank-top`` without ``--rerank`` refused, in POST /search's words for ``rerank_top`` without ``"rerank":
    true`` (it was only a warning, and the list printed was never reranked); unset: SearchConfig's default."""
    from twotower.config import SearchConfig
    from twotower.errors import ConfigError
    from twotower.search.checks import rerank_top_needs_rerank

    if args.rerank_top is None:
        args.rerank_top = SearchConfig.rerank_top
    elif not args.rerank:
        raise ConfigError(rerank_top_needs_rerank("--rerank-top", "--rerank DIR", "--rerank", "give"))


def _encoder_env(args: argparse.Namespace) -> None:
    """Hand --encoder-backend/--encoder-threads to every encoder this command loads (EncoderSettings.from_env)."""
    import os

    from twotower.text.encoder import EncoderSettings

    if getattr(args, "encoder_backend", None):
        os.environ["TWOTOWER_ENCODER_BACKEND"] = args.encoder_backend
    if getattr(args, "encoder_threads", None) is not None:
        from twotower.cli.flags import check_range
        from twotower.config import MAX_THREADS

        # EncoderSettings' own words named no flag ("encoder threads must be a positive integer up to 1024 ...")
        check_range("--encoder-threads", args.encoder_threads, 1, MAX_THREADS)
        os.environ["TWOTOWER_ENCODER_THREADS"] = str(args.encoder_threads)
    EncoderSettings.from_env()  # validates both now, before any work


def _threads(args: argparse.Namespace) -> None:
    from twotower.cli.flags import _threads as set_from_flags

    set_from_flags(args, SEARCH_THREADS_DEFAULT)


def _check_models(args: argparse.Namespace) -> None:
    """``--model`` / ``--rerank`` folders of the right kind, checked before any data is read or model loaded."""
    from twotower.search.artefacts import check_bi_encoder_dir, check_cross_encoder_dir, index_it_hint

    if getattr(args, "model", None) is not None:
        check_bi_encoder_dir(args.model, "--model")
    if getattr(args, "rerank", None) is not None:
        # search query has no --model to point a bi-encoder at: its index holds the one it searches with
        hint = {} if hasattr(args, "model") else {"bi_encoder_hint": index_it_hint(args.rerank)}
        check_cross_encoder_dir(args.rerank, "--rerank", **hint)


def _check_positive(args: argparse.Namespace, *flags: str) -> None:
    """Integer flags that must be >= 1, refused before any data is read or model loaded, naming the flag, in the
    words of `recommend --k 0` (``--max-length: must be at least 1, got 0``)."""
    from twotower.cli.flags import check_range

    for flag in flags:
        check_range(flag, getattr(args, flag.lstrip("-").replace("-", "_"), None), 1)


def _length_flags_named(cmd):  # noqa: ANN001, ANN202 - a command handler, wrapped
    """``cmd`` with a word-piece limit past the model's positions refused under the flag typed (``--max-length: must
    be between 1 and 512 (...), got 600``): the check lies in the model code, which names the Python argument
    (``max_length``, ``query_max_length``) as its callers give it (:class:`~twotower.errors.LengthPastModel`)."""
    import functools

    from twotower.errors import ConfigError, LengthPastModel

    @functools.wraps(cmd)
    def run(args: argparse.Namespace) -> int:
        try:
            return cmd(args)
        except LengthPastModel as e:
            from twotower.pipeline.refusals import range_refusal

            why = range_refusal(e.value, 1, e.limit, why=f"the word pieces the model {e.model} reads")
            raise ConfigError(f"--{e.setting.replace('_', '-')}: {why}") from None

    return run


def _refuse_evaluate_k(args: argparse.Namespace) -> None:
    """``search evaluate --k``: the metrics are measured at fixed depths, so there is no list length to set."""
    from twotower.errors import ConfigError

    if getattr(args, "evaluate_k", None) is not None:
        raise ConfigError("--k: search evaluate measures fixed depths (NDCG@10, Recall@10, Recall@100, MRR@10); "
                          "--k is the list length of `twotower search query` and POST /search")


@_length_flags_named
def cmd_search_evaluate(args: argparse.Namespace) -> int:
    _refuse_evaluate_k(args)
    bm25 = _bm25_config(args)
    _check_beir(args)
    _check_positive(args, "--rerank-top", "--max-length", "--query-max-length")
    _rerank_top(args)
    _check_models(args)
    _check_cache(args)
    _encoder_env(args)
    rerank = rerank_settings(args)
    from twotower.search.evaluate import METRIC_KEYS, search_evaluate

    _threads(args)
    # with --retriever bm25 / dense the unused-flag warning below already names --bm25-weight
    fusion = _fusion_choice(args, warn=args.retriever == "hybrid")
    _warn_unused_evaluate_flags(args)
    _warn_seen_in_training(args)
    m = search_evaluate(args.beir, args.split, args.retriever, args.model, args.rerank,
                        cache_dir=args.cache, rerank_top=args.rerank_top, fusion=fusion,
                        max_length=args.max_length, query_max_length=args.query_max_length,
                        rerank_settings=rerank, keep_unknown=args.keep_unknown, bm25=bm25,
                        keep_unknown_name="--keep-unknown")
    if m["skipped"]:
        print(f"note: {m['skipped']} judged queries have no relevant document (qrels score > 0) and were skipped; "
              f"the metrics average the other {m['queries']}", file=sys.stderr)
    alone = m.get("dense_only")
    if alone and alone["queries"]:  # hybrid: BM25 matched nothing for them, their list is the dense one alone
        print(f"note: {alone['queries']} of {_count(m['queries'], 'query', 'queries')} had no BM25 hit and "
              f"{'was' if alone['queries'] == 1 else 'were'} ranked by dense search alone (e.g. query "
              f"{alone['example']})", file=sys.stderr)
    if args.json:
        out = {k: m[k] for k in METRIC_KEYS}
        if alone is not None:
            out["dense_only"] = alone
        if "without_rerank" in m:  # the first stage alone, beside the reranked metrics (which keep their keys)
            out["without_rerank"] = {k: m["without_rerank"][k] for k in METRIC_KEYS}
            out["rerank_backend"] = m["rerank_backend"]  # resolved (auto never): which forward pass scored
        for key in ("truncation", "rerank_truncation"):  # logged once, and recorded (README) only in the Python dict
            if m.get(key) is not None:
                out[key] = m[key]
        out.update(_evaluate_identity(args, fusion, m, bm25))  # added beside the metrics: scripts read those keys as before
        print(json.dumps(out, allow_nan=False))  # the metrics are defined (never NaN)
        return 0
    from twotower.evaluation.table import format_table

    # the row says which fusion and which bi-encoder it measured: two hybrid rows are otherwise indistinguishable
    what = args.retriever + (f" {fusion.describe()}" if args.retriever == "hybrid" else "")
    if args.retriever != "dense" and bm25.token_pattern != type(bm25).token_pattern:  # two BM25 rows told apart
        what += f" [token pattern {bm25.token_pattern}]"
    if args.retriever != "bm25":
        backend = m.get("encoder_backend")  # int8 and fp32 rows of one model were told apart by nothing
        what += f" [{args.model or 'all-MiniLM-L6-v2 zero-shot'}" + (f", {backend}" if backend else "") + "]"
    rows = []
    if "without_rerank" in m:  # the same retriever unreranked first: whether the cross-encoder helps is read off
        rows.append({"retriever": what, **{k: m["without_rerank"][k] for k in METRIC_KEYS},
                     "queries": m["queries"], "seconds": m["without_rerank"]["seconds"]})
    rows.append({"retriever": what + (f" + rerank [{args.rerank}]" if args.rerank else ""),
                 **{k: m[k] for k in METRIC_KEYS}, "queries": m["queries"], "seconds": m["seconds"]})
    print(format_table(rows, title=f"{args.beir} ({args.split})", formats={"seconds": ".1f"}))
    return 0


def _evaluate_identity(args: argparse.Namespace, fusion, m: dict, bm25) -> dict:  # noqa: ANN001 - FusionChoice, BM25Config
    """What `search evaluate --json` measured, beside its metrics: the BEIR folder and split, the retriever, its fusion
    (hybrid) with RRF's k, BM25's settings (bm25, hybrid: as the saved index's bm25/meta.json records them), the
    bi-encoder (with the resolved encoder backend and word-piece lengths it was read through) and cross-encoder
    (absolute paths, each with the sha256 of its marker, which lists the sha256 of every file of the model) and the
    query counts. The JSON held the four metrics alone, so two
    saved files (BM25 and hybrid, zero-shot and fine-tuned, test and train) could not be told apart."""
    from dataclasses import asdict
    from pathlib import Path

    from twotower.search.artefacts import BI_ENCODER_META, CROSS_ENCODER_META
    from twotower.search.beir import resolve_beir_dir
    from twotower.utils.atomic import sha256_file

    def model(folder: str | None, marker: str) -> dict | None:
        if folder is None:
            return None
        path = Path(folder) / marker
        return {"path": str(Path(folder).resolve()),
                "marker_sha256": sha256_file(path) if path.is_file() else None}  # a plain HF folder has none

    dense = args.retriever != "bm25"
    return {
        "beir": str(resolve_beir_dir(args.beir).resolve()),
        "split": args.split,
        "retriever": args.retriever,
        "fusion": {"name": fusion.name, "params": fusion.params} if args.retriever == "hybrid" else None,
        "bm25": asdict(bm25) if args.retriever != "dense" else None,
        # the zero-shot default by name, as the table's row names it; with the forward pass and the word-piece
        # lengths that encoded it: an onnx-int8 and a torch evaluation of one model printed the same object
        "model": ({**(model(args.model, BI_ENCODER_META) or {"name": "all-MiniLM-L6-v2"}),
                   **{k: m.get(k) for k in ("encoder_backend", "max_length", "query_max_length")}}
                  if dense else None),
        "rerank": None if args.rerank is None else {**model(args.rerank, CROSS_ENCODER_META), "top": args.rerank_top},
        "queries": m["queries"],
        "skipped": m["skipped"],
    }


def _warn_seen_in_training(args: argparse.Namespace) -> None:
    """Warn when the split scored is the one ``--model`` (as the retriever uses it) or ``--rerank`` was trained on:
    `search evaluate --split train --retriever dense --model M` reported NDCG@10 0.9958 for a model fine-tuned on
    those very queries, with nothing saying the figure was not held out."""
    from twotower.search.artefacts import trained_on

    models = {"--rerank": args.rerank, "--model": args.model if args.retriever != "bm25" else None}
    for flag, folder in models.items():
        source = trained_on(folder)
        if source is None or source.get("split") != args.split or not _same_beir(source.get("beir"), args.beir):
            continue
        logging.getLogger(__name__).warning(
            "%s %s was trained on split %r of this BEIR folder (its %s says so): these queries were seen in "
            "training, so the figures are not a held-out measurement; evaluate on a split it was not trained on%s",
            flag, folder, args.split, source["marker"], _other_split(args.beir, args.split))


def _other_split(beir: str, split: str) -> str:
    """`` (e.g. --split dev)``: a split of the BEIR folder other than ``split`` (test first, then dev), or ``""``
    where it judges no other. The warning said "(e.g. --split test)" to a user scoring --split test."""
    from twotower.search.beir import available_splits, resolve_beir_dir

    others = [s for s in available_splits(resolve_beir_dir(beir, arg="--beir")) if s != split]
    others.sort(key=lambda s: (s != "test", s != "dev", s))
    return f" (e.g. --split {others[0]})" if others else ""


def _same_beir(recorded: object, given: str) -> bool:
    """Whether the BEIR folder a marker records (absolute, as --beir was typed then) is the --beir given now."""
    from pathlib import Path

    from twotower.errors import DataError
    from twotower.search.beir import resolve_beir_dir

    if not isinstance(recorded, str):
        return False
    try:  # --beir takes a BEIR folder or the folder holding beir/: either spelling is the same data
        return resolve_beir_dir(recorded).resolve() == resolve_beir_dir(given).resolve()
    except DataError:
        return Path(recorded).resolve() == Path(given).resolve()


def _warn_unused_evaluate_flags(args: argparse.Namespace) -> None:
    """Say which flags the chosen ``--retriever`` ignores: ``search evaluate --model runs/bi`` without
    ``--retriever`` scores BM25 (the default), and ``--json`` prints only the metrics, so nothing showed that the
    fine-tuned model was never used."""
    from twotower.config import SearchConfig

    dense_flags = {"--model": args.model, "--max-length": args.max_length, "--query-max-length": args.query_max_length,
                   "--encoder-backend": getattr(args, "encoder_backend", None)}  # the text encoder's: BM25 reads none
    fusion_flags = {"--fusion": args.fusion if args.fusion != SearchConfig.fusion else None,
                    "--bm25-weight": args.bm25_weight if args.bm25_weight != SearchConfig.bm25_weight else None,
                    "--rrf-k": args.rrf_k if args.rrf_k != SearchConfig.rrf_k else None}
    from twotower.search.bm25 import BM25Config

    bm25_flags = {"--token-pattern": args.token_pattern if args.token_pattern != BM25Config.token_pattern else None}
    unused = {**(dense_flags if args.retriever == "bm25" else {}),
              **(bm25_flags if args.retriever == "dense" else {}),
              **(fusion_flags if args.retriever != "hybrid" else {})}
    given = [flag for flag, value in unused.items() if value is not None]
    if given:
        use = ("dense or hybrid" if any(flag in dense_flags for flag in given) else
               "bm25 or hybrid" if any(flag in bm25_flags for flag in given) else "hybrid")
        logging.getLogger(__name__).warning(
            "%s %s no effect with --retriever %s%s; pass --retriever %s to use %s",
            ", ".join(given), "has" if len(given) == 1 else "have", args.retriever,
            " (the default)" if args.retriever == "bm25" else "", use, "them" if len(given) > 1 else "it")


def _corpus(beir: str):
    from twotower.search.beir import load_corpus, resolve_beir_dir

    return load_corpus(resolve_beir_dir(beir, arg="--beir") / "corpus.jsonl")


def _check_beir(args: argparse.Namespace) -> None:
    """--beir holds a BEIR folder: said now, naming the flag (the library's own message names its argument)."""
    from twotower.search.beir import resolve_beir_dir

    resolve_beir_dir(args.beir, arg="--beir")


def _fusion_choice(args: argparse.Namespace, *, warn: bool = True):  # noqa: ANN202 - FusionChoice
    """``--fusion`` / ``--bm25-weight`` as a FusionChoice (SearchConfig validates both); with ``warn``, a weight that
    the fusion ignores is warned about (:func:`_warn_ignored_weight`)."""
    from twotower.cli.flags import check_range
    from twotower.config import MAX_RRF_K, SearchConfig
    from twotower.errors import ConfigError
    from twotower.search.fusion import fusion_from_config

    # SearchConfig's bounds, said as `--k 0` is ("--rrf-k: must be between 1 and 1000000, got 0")
    check_range("--rrf-k", args.rrf_k, 1, MAX_RRF_K, why="the RRF constant")
    check_range("--bm25-weight", args.bm25_weight, 0, 1)
    try:
        cfg = SearchConfig(fusion=args.fusion, bm25_weight=args.bm25_weight, rrf_k=args.rrf_k)
    except ConfigError as e:  # name the flag the user typed, not the field
        raise ConfigError(str(e).replace("search.bm25_weight", "--bm25-weight").replace("search.fusion", "--fusion")
                          .replace("search.rrf_k", "--rrf-k")) from None
    if warn:
        _warn_ignored_weight(cfg)
    return fusion_from_config(cfg)


def _warn_ignored_weight(cfg) -> None:  # noqa: ANN001 - SearchConfig
    """One warning for every command with --fusion / --bm25-weight (search index, search evaluate): RRF fuses ranks,
    so a weight given with it was dropped without a word."""
    from twotower.config import SearchConfig

    if cfg.fusion == "rrf" and cfg.bm25_weight != SearchConfig.bm25_weight:
        logging.getLogger(__name__).warning("--bm25-weight %g has no effect with --fusion rrf (RRF fuses ranks, not "
                                            "weighted scores); use --fusion minmax or zscore", cfg.bm25_weight)
    if cfg.fusion != "rrf" and cfg.rrf_k != SearchConfig.rrf_k:
        logging.getLogger(__name__).warning("--rrf-k %d has no effect with --fusion %s (it is RRF's constant); use "
                                            "--fusion rrf", cfg.rrf_k, cfg.fusion)


def _cache_arg(args: argparse.Namespace) -> str | None:
    """--cache with "~" expanded (the default is a user cache folder, ~/.cache/twotower/..., which stands for
    $XDG_CACHE_HOME/twotower/... where that is set), None where there is none."""
    import os

    from twotower.utils.cache_home import expand_cache_path

    cache = getattr(args, "cache", None)
    return None if cache is None else os.fspath(expand_cache_path(cache))


def _check_cache(args: argparse.Namespace) -> None:
    """A --cache given must be a folder (or creatable as one): said now, not when the first embeddings are written.
    The default is not checked: a cache the user did not ask for only saves time, so an unwritable one is read as it
    is and the run goes on (text/cache.py's cached_encode), rather than refused naming a flag never typed."""
    from twotower.cli.paths import check_output_dir
    from twotower.config import SearchConfig

    if _cache_arg(args) is not None:
        given = args.cache != SearchConfig.cache_dir
        args.cache = _cache_arg(args)
        if given:
            check_output_dir(args.cache, "--cache")


def _check_out(args: argparse.Namespace, kind: str, is_same_kind, marker: str) -> None:  # noqa: ANN001
    """``--out`` is replaced as a whole once the work is done: refuse a wrong one now, before any work."""
    from twotower.search.artefacts import check_out_folder

    # as the Python calls check theirs (writes_folder's check), with the flags' names
    check_out_folder(args.out, "--out", kind, is_same_kind, marker, {"--beir": args.beir, "--cache": _cache_arg(args)},
                     force=args.force)


@contextlib.contextmanager
def _out_writer(args: argparse.Namespace, what: str) -> Iterator[None]:
    """``--out``'s writer lock for the whole command, as `twotower index build` and `export` hold theirs: a second
    command writing the same ``--out`` is refused at once, naming the folder and the holder's pid.

    Before, two `search train --out X` ran side by side for minutes, each swapping its folder in, and the one that
    finished first printed a summary of a model the other had replaced (`rerank train` read its loss back from the
    other's marker). The lock file lies beside ``--out`` (the folder is swapped in whole); the kernel drops it when
    its holder dies, ``kill -9`` included.

    Once it holds the lock, the temporaries that dead writers (``kill -9`` while saving) left beside ``--out`` are
    removed (``exclusive_writer``'s ``sweep``, as the Python calls inside do: they take the lock again and sweep no
    more).
    """
    from twotower.utils.folder_lock import exclusive_writer

    with exclusive_writer(args.out, what, "wait for it to finish, or give another --out", beside=True, sweep=True):
        yield


def _refuse_index_mode(args: argparse.Namespace) -> None:
    """``search index --mode``: an index answers every mode, chosen per search, so the flag has nothing to set."""
    from twotower.errors import ConfigError

    if getattr(args, "index_mode", None) is not None:
        raise ConfigError(f"--mode: a search index answers bm25, dense and hybrid searches alike (hybrid fused as "
                          f"--fusion says); choose the mode per search: `twotower search query --index {shell_arg(args.out)} "
                          f"--mode {args.index_mode} ...` or POST /search's \"mode\"")


@_length_flags_named
def cmd_search_index(args: argparse.Namespace) -> int:
    from twotower.search.artefacts import INDEX_META, is_search_index

    _refuse_index_mode(args)
    _bm25_config(args)  # a bad --token-pattern is refused before anything is read
    _check_beir(args)
    _check_positive(args, "--max-length", "--query-max-length")
    _check_out(args, "search index", is_search_index, INDEX_META)
    with _out_writer(args, "twotower search index"):
        return _search_index(args)


def _search_index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from twotower.search.artefacts import check_bi_encoder_dir

    _check_cache(args)
    _encoder_env(args)
    if args.model is not None:
        check_bi_encoder_dir(args.model, "--model")
    from twotower.search.pipeline import SearchIndex

    _threads(args)
    choice = _fusion_choice(args)
    index = SearchIndex.build(_corpus(args.beir), model=args.model, max_length=args.max_length,
                              query_max_length=args.query_max_length, cache_dir=args.cache,
                              fusion={"name": choice.name, "params": choice.params},
                              source={"beir": str(Path(args.beir).resolve())}, bm25=_bm25_config(args))
    index.save(args.out, force=args.force)
    print(f"search index over {len(index.corpus)} documents written to {args.out}")
    return 0


def _check_query_args(args: argparse.Namespace) -> None:
    """--k and the query texts, checked before the index is loaded."""
    from twotower.errors import ConfigError

    from twotower.cli.flags import check_k_flag
    from twotower.pipeline.refusals import k_refusal

    # the words of `recommend --k` (--k 0: "--k: must be at least 1, got 0"); the hits are padded to k: a huge one
    # was a numpy TypeError or a MemoryError
    check_k_flag(args.k)
    if args.rerank_top is not None and (why := k_refusal(args.rerank_top)) is not None:
        raise ConfigError(f"--rerank-top: {why}")
    from twotower.search.checks import wordless

    for n, text in enumerate(args.text, start=1):
        where = f"query {n}" if len(args.text) > 1 else "query"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8 reach argv as lone surrogates (PEP 383)
            shown = _printable(text)
            raise ConfigError(f"{where} {shown!r} is not valid UTF-8; pass the query as UTF-8 text") from None
        if not text:
            raise ConfigError(f"{where} is empty; give the text to search for")
        if not text.strip():  # POST /search's word for it: "query: only white space" (here it said "empty")
            raise ConfigError(f"{where} is only white space; give the text to search for")
        if (why := wordless(text)) is not None:  # control characters alone: ranked for, as POST /search did
            raise ConfigError(f"{where} {why}; give the text to search for")
        if len(text) > MAX_QUERY_CHARS:  # as POST /search's 422: no limit here before
            raise ConfigError(f"{where} text is {len(text)} characters long; at most {MAX_QUERY_CHARS} are accepted "
                              "(as by POST /search); shorten it")


def _printable(text: str) -> str:
    """``text`` with its undecodable bytes as U+FFFD (argv's escapes) or "?" (other lone surrogates)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate surrogateescape did not make (e.g. from a Python caller)
        return text.encode("utf-8", "replace").decode("utf-8")


#: `search index` flags whose values the index stores and every search of it uses (`search info` shows them)
_INDEX_SETTINGS = ("--fusion", "--rrf-k", "--bm25-weight", "--token-pattern", "--max-length", "--query-max-length",
                   "--encoder-backend")


class _IndexSetting(argparse.Action):
    """One of :data:`_INDEX_SETTINGS` given to `search query`: kept as ``(flag, value)`` for its refusal."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # noqa: ANN001
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), (option_string, values)])


def _refuse_index_settings(args: argparse.Namespace) -> None:
    """``search query --fusion zscore``: a setting of the saved index, chosen when it is built."""
    from twotower.errors import ConfigError

    given = getattr(args, "index_settings", None)
    if given:
        flag, value = given[0]
        raise ConfigError(f"{flag}: a setting of the search index, stored when it is built and used by every search "
                          f"of it (`twotower search info --index {shell_arg(args.index)}` shows it); build one with another: "
                          f"`twotower search index --beir DIR --out NEW_INDEX {flag} {shell_arg(value)}`")


def _refuse_query_model(args: argparse.Namespace) -> None:
    """``search query --model DIR``: an index is searched with the model it was built with, named in its meta.json."""
    from twotower.errors import ConfigError

    if getattr(args, "query_model", None) is not None:
        raise ConfigError(f"--model: a search index searches with the bi-encoder it was built with (`twotower search "
                          f"info --index {shell_arg(args.index)}` names it); to search with another, build an index with it: "
                          f"`twotower search index --beir DIR --out NEW_INDEX --model {shell_arg(args.query_model)}`")


def cmd_search_query(args: argparse.Namespace) -> int:
    _refuse_query_model(args)
    _refuse_index_settings(args)
    _check_query_args(args)
    _rerank_top(args)
    _check_models(args)
    settings = rerank_settings(args)
    from pathlib import Path

    from twotower.search.checks import FIRST_STAGE_ORDER  # POST /search's schema's words for them
    from twotower.search.pipeline import SearchIndex
    from twotower.serving.search_service import SearchService

    _threads(args)
    # mode bm25 needs no bi-encoder: its folder is checked only by a dense or hybrid search (a moved model refused
    # a BM25 query it plays no part in)
    index = SearchIndex.load(args.index, bm25_only=args.mode == "bm25")
    reranker = None
    if args.rerank:
        from twotower.search.rerank import CrossEncoderReranker

        reranker = CrossEncoderReranker(args.rerank, settings=settings)
    # POST /search's own function builds every answer, a query at a time as the service answers them: the CLI's
    # copy of it printed unrounded scores (3.206866502761841 where /search said 3.206867); one builder cannot drift.
    # Built directly, not by SearchService.load: its warm-up search would only slow a one-shot command down.
    service = SearchService(index=index, reranker=reranker, index_dir=Path(args.index))
    out = []
    for q, text in enumerate(args.text):
        answer = service.search(text, args.k, args.mode, reranker is not None, args.rerank_top)
        _query_notes(answer, f"query {q + 1}" if len(args.text) > 1 else "query")
        out.append(answer)
    if args.json:
        # "hits": the list's older name (README), kept beside the service's "items" for scripts written against it
        blocks = [{**answer, "hits": answer["items"]} for answer in out]
        print(json.dumps(blocks if len(blocks) > 1 else blocks[0]))
        return 0
    from twotower.cli.printing import printable  # a title's line break split the one-hit-per-line list in two

    for answer in out:
        print(f"query: {printable(answer['query'])}")
        for h in answer["items"]:
            if h.get("reranked") is False and h["rank"] == args.rerank_top + 1:
                # as --json's "reranked": false: below, the scores only keep the first-stage order under the reranked
                # hits (the last logit minus 1, 2, ...), which the column passed off as the cross-encoder's
                print(f"  -- past --rerank-top {args.rerank_top}: not rescored by the cross-encoder "
                      f"({FIRST_STAGE_ORDER[answer['mode']]}; the scores only place them below)")
            # the 6 decimals --json and POST /search round to: at 4, RRF's 0.032266 and 0.032258 (ranks 1 and 3, ranks
            # 2 and 2) both read 0.0323, and the order looked arbitrary
            # a corpus without titles (search prepare's default) printed the id and score alone: its text's start then
            shown = h["title"] if h["title"].strip() else " ".join(h.get("text", "").split())
            print(f"  {h['rank']:2d}. {printable(h['doc_id']):>10}  {h['score']:10.6f}  {printable(shown[:90])}")
    return 0


def cmd_search_info(args: argparse.Namespace) -> int:
    """The settings a saved search index was built with, read from its meta.json files (checked against their
    checksums) without loading the bi-encoder: nothing showed BM25's k1, b or token pattern but the JSON files."""
    from twotower.search.bm25 import describe_tokens
    from twotower.search.fusion import as_fusion
    from twotower.search.pipeline import describe_index

    info = describe_index(args.index)
    if args.json:
        print(json.dumps(info, allow_nan=False))
        return 0
    rows: list[tuple[str, object]] = []
    if info["kind"] == "search_index":
        from twotower.config import SearchConfig

        # an index saved before query_max_length was stored is queried at the default (SearchIndex.load)
        lengths = (f"{info['max_length']} word pieces a document, "
                   f"{info['query_max_length'] or SearchConfig.query_max_length} a query")
        rows += [("documents", f"{info['documents']:,}" if isinstance(info["documents"], int) else "unknown"),
                 ("model", info["model"] + (" (missing: moved or deleted; search query --mode bm25 still answers, "
                                            "but dense and hybrid search and serve refuse the index until it is "
                                            "back there)" if info["model_found"] is False else "")
                  if info["model"] else "all-MiniLM-L6-v2 (zero-shot)"),
                 ("query encoder", _query_encoder_line(info)),
                 ("encoder backend", info["encoder_backend"] or "torch"),
                 ("lengths", lengths),
                 # what the stored embeddings saw: the dense side reads only the first max_length word pieces (JSON
                 # held it, the text did not; None: an index saved before it was recorded)
                 ("truncation", _cut_line(info["truncation"])),
                 ("fusion", as_fusion(info["fusion"]).describe())]
        source = info["source"] if isinstance(info["source"], dict) else {}
        if source.get("beir"):
            rows.append(("built from", source["beir"]))
    b = info["bm25"]
    rows += [("BM25", f"{b['method']}, k1 {b['k1']:g}, b {b['b']:g}"),
             ("  token pattern", f"{b['token_pattern']} ({describe_tokens(b['token_pattern'])})"),
             ("  stop words", b["stopwords"] or "none"),
             ("  stemmer", b["stemmer"] or "none"),
             ("  documents", f"{b['documents']:,}"),
             ("  vocabulary", f"{b['vocabulary']:,} terms")]
    print(f"{'search index' if info['kind'] == 'search_index' else 'BM25 index'} {info['path']}")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return 0


def _query_encoder_line(info: dict) -> str:
    """The query tower the index was built with, and whether the model still loads it (describe_index)."""
    recorded = info.get("query_encoder")
    if recorded is None:
        return "unchecked (not recorded when the index was built; rebuild it to record it)"
    if info.get("query_encoder_matches") is False:
        return (f"{recorded} (changed: the model's query tower is now {info['query_encoder_now']}; search query "
                "--mode bm25 still answers, but dense and hybrid search and serve refuse the index until it is "
                "rebuilt)")
    return recorded + (" (the model's query tower)" if info.get("query_encoder_matches") else "")


def _cut_line(report: object) -> str:
    """A search index's ``truncation`` record as `search index` logged it, or "unknown" (older indexes, no
    tokenizer)."""
    from twotower.text.encoder import describe_truncation

    if not isinstance(report, dict) or not all(isinstance(report.get(k), int)
                                               for k in ("cut", "passages", "max_length", "longest")):
        return "unknown (not recorded when the index was built)"
    return describe_truncation(report)


def _query_notes(answer: dict, where: str) -> None:
    """What POST /search answers in fields, said on stderr: a query cut by the query tower, a short list."""
    cut = answer.get("query_cut")
    if cut is not None:  # the query tower reads query_max_length word pieces
        print(f"note: {where}: {cut['word_pieces']} word pieces, dense search read the first {cut['read']}",
              file=sys.stderr)
    lexical = answer.get("dense_only")
    if lexical is not None:  # hybrid with no BM25 hit, as POST /search says it (same wording)
        print(f"note: {where}: {lexical['reason']}", file=sys.stderr)
    short = answer.get("shortfall")
    if short is not None:  # a short list is stated, as POST /search states it (same wording), never printed silently
        print(f"note: {where}: {short['reason']}", file=sys.stderr)


def _train_pairs(args: argparse.Namespace, *, at_least: int = 1):
    """The split's (query, relevant document) pairs; fewer than ``at_least`` is refused now, naming the qrels file,
    not after the model is loaded and the corpus encoded (minutes) with an error about "0 queries and 0 rows"."""
    from twotower.errors import DataError
    from twotower.search.beir import load_beir, pairs_from_qrels, resolve_beir_dir

    data = load_beir(args.beir, args.split, arg="--beir")
    pairs = pairs_from_qrels(data.queries, data.qrels)  # the order a Python caller gets too
    qs, pos = [p.query for p in pairs], [data.corpus.row_of[p.positive_id] for p in pairs]
    if len(qs) < at_least:
        raise DataError(f"{len(qs)} (query, relevant document) pair{'' if len(qs) == 1 else 's'} with a score > 0 in "
                        f"split {args.split!r}; training needs at least {at_least}"
                        + (" (each batch's other positives are the negatives)" if at_least > 1 else ""),
                        file=str(resolve_beir_dir(args.beir) / "qrels" / f"{args.split}.tsv"))
    by_q: dict[str, set[int]] = {}
    for q, r in zip(qs, pos):
        by_q.setdefault(q, set()).add(r)
    return data, qs, pos, by_q


def _source(args: argparse.Namespace) -> dict[str, object]:
    """Where a trained model's pairs came from, recorded in its marker (absolute: read from other folders), with the
    sha256 of the files read (corpus, queries, the split's qrels): a path alone did not tell an edited folder."""
    from pathlib import Path

    from twotower.search.beir import resolve_beir_dir
    from twotower.utils.atomic import sha256_file

    beir = resolve_beir_dir(args.beir)
    files = ("corpus.jsonl", "queries.jsonl", f"qrels/{args.split}.tsv")
    return {"beir": str(Path(args.beir).resolve()), "split": args.split,
            "sha256": {f: sha256_file(beir / f) for f in files if (beir / f).is_file()}}


def _flag_config(build, flags: dict[str, str]):  # noqa: ANN001, ANN202
    """``build()`` with a ConfigError's config field names (``MiningConfig.n``, ``FinetuneConfig.lr``,
    ``BM25Config.token_pattern``) replaced by the flags typed."""
    import re

    from twotower.errors import ConfigError

    try:
        return build()
    except ConfigError as e:
        msg = str(e)
        for field, flag in flags.items():
            # the search configs name their fields with the class (``FinetuneConfig.lr: must be > 0``): the flag
            # replaces both
            named = rf"(?:[A-Z]\w*Config\.)?{field}\b"
            msg = re.sub(rf"^{named}" if len(field) == 1 else rf"\b{named}", flag, msg)
        raise ConfigError(msg) from None


def _check_train_numbers(args: argparse.Namespace, *, batch_min: int, negatives_min: int) -> None:
    """The number flags of `search train` / `rerank train` in the bounds of FinetuneConfig / RerankTrainConfig, said
    as `--k 0` is (``--epochs: must be at least 1, got 0``): the configs' own words, named by their field and then
    re-worded ("--epochs must be >= 1"), read unlike the flags these commands check themselves (--mining-depth).
    ``batch_min``: 2 for the bi-encoder (in-batch negatives), ``negatives_min``: 0 for it (in-batch ones alone)."""
    from twotower.cli.flags import check_range
    from twotower.config import MAX_SEED, MAX_TEMPERATURE

    check_range("--epochs", args.epochs, 1)
    check_range("--batch-size", args.batch_size, batch_min, why="in-batch negatives need company" if batch_min > 1
                else "")
    check_range("--max-length", args.max_length, 1)
    check_range("--query-max-length", getattr(args, "query_max_length", None), 1)
    check_range("--negatives", args.negatives, negatives_min)
    check_range("--lr", args.lr, 0, lo_open=True)
    check_range("--temperature", getattr(args, "temperature", None), 0, MAX_TEMPERATURE, lo_open=True,
                why="above it every scaled score is ~0 and training learns nothing")
    check_range("--seed", args.seed, 0, MAX_SEED, hi_said="2**64 - 1", why="the largest torch takes")
    check_range("--valid-frac", args.valid_frac, 0, 1, hi_open=True, why="0: no validation")
    check_range("--patience", args.patience, 1)


@_length_flags_named
def cmd_search_train(args: argparse.Namespace) -> int:
    from twotower.search.artefacts import BI_ENCODER_META, is_bi_encoder

    # everything checked before any model is loaded or any negative mined
    _check_out(args, "bi-encoder", is_bi_encoder, BI_ENCODER_META)
    with _out_writer(args, "twotower search train"):
        return _search_train(args)


def _search_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from twotower.search.artefacts import check_bi_encoder_dir
    from twotower.search.finetune import FinetuneConfig

    _check_cache(args)
    train_docs = args.train_doc_tower or args.shared
    flags = {"negatives_per_query": "--negatives", "n": "--negatives", "epochs": "--epochs", "lr": "--lr",
             "batch_size": "--batch-size", "temperature": "--temperature", "max_length": "--max-length",
             "query_max_length": "--query-max-length", "shared": "--shared", "train_doc_tower": "--train-doc-tower",
             "seed": "--seed", "valid_frac": "--valid-frac", "patience": "--patience",
             "mining_retriever": "--mining-retriever"}
    bm25_mining = args.mining_retriever == "bm25"
    _check_train_numbers(args, batch_min=2, negatives_min=0)
    cfg = _flag_config(lambda: FinetuneConfig(
        epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, temperature=args.temperature,
        **_lengths_given(args, _BI_LENGTHS), shared=args.shared, train_doc_tower=train_docs,
        negatives_per_query=min(args.negatives, 1) if train_docs else args.negatives,
        seed=args.seed,  # refresh_negatives: the config's null, re-mining where it can (FinetuneConfig.re_mines)
        valid_frac=args.valid_frac, patience=args.patience, mining_retriever=args.mining_retriever), flags)
    bm25 = _bm25_config(args)  # a bad --token-pattern is refused before anything is read, as by search index
    _check_beir(args)  # after the flags' own checks: a wrong --seed is said whatever --beir holds
    if train_docs and args.negatives > 1:
        _say_negatives_cap(args, "--train-doc-tower" if args.train_doc_tower else "--shared")
    # --negatives 0: in-batch negatives only, so there is nothing to mine (MiningConfig needs n >= 1)
    mining = _mining_config(args, args.negatives, "--negatives") if args.negatives > 0 else None
    if mining is None:
        _warn_unused_mining_flags(args)
    elif not bm25_mining:
        _warn_unused_token_pattern(args, "--mining-retriever dense (the default)")
    elif bm25_mining and not train_docs and cfg.epochs > 1:
        # dense mining is done again before every epoch after the first; BM25's is not, and that is said once
        logging.getLogger(__name__).info(
            "--mining-retriever bm25: the hard negatives are mined once, before training, and not again between "
            "epochs (BM25's lists do not change as the model trains; --mining-retriever dense re-mines from the "
            "model being trained)")
    if args.split == "test":  # the split `search evaluate` scores by default: its figures would not be held out
        logging.getLogger(__name__).warning(
            "--split test: training on the queries `search evaluate` scores by default, so its figures for this "
            "model will not be a held-out measurement; train on another split (--split train, the default)")
    if not cfg.valid_frac and cfg.patience != FinetuneConfig.patience:  # no validation, nothing to be patient for
        logging.getLogger(__name__).warning("--patience %d has no effect without --valid-frac (no epoch is "
                                            "validated); pass --valid-frac F to hold out queries", cfg.patience)
    if args.base is not None:
        check_bi_encoder_dir(args.base, "--base")
        cfg = replace(cfg, **_base_lengths(args, _BI_LENGTHS))
    _encoder_env(args)
    _threads(args)

    from twotower.search.dense import DenseRetriever
    from twotower.search.finetune import base_towers, finetune_bi_encoder

    data, qs, pos, by_q = _train_pairs(args, at_least=2)  # in-batch negatives need a second pair
    # held out before mining: no negative is mined for a query that is not trained on
    qs, pos, by_q, validation = _hold_out(args, qs, pos, cfg.valid_frac, at_least=2)
    texts = data.corpus.doc_texts()
    negatives = None
    if mining is not None:
        _check_mining_depth(args, len(texts))
    if mining is None:
        logging.getLogger(__name__).info(
            "--negatives 0: in-batch negatives only (each query's negatives are the batch's other positives); no "
            "hard negatives are mined, so the corpus is not encoded for mining")
    else:
        if bm25_mining:  # rerank train's mining, over the same corpus rows
            retriever = _bm25(data, texts, bm25)
        else:
            q_enc, d_enc, _ = base_towers(args.base)  # a fine-tuned --base mines with its own two towers
            retriever = DenseRetriever(q_enc, doc_encoder=d_enc, cache_dir=args.cache, max_length=cfg.max_length,
                                       query_max_length=cfg.query_max_length).fit(texts)
        neg_of, report = _mine(retriever, by_q, mining)
        if not report.kept:  # BM25 may match only the relevant documents, or nothing (text without spaces)
            logging.getLogger(__name__).warning(
                "no hard negative was mined for any of the %d training queries (%s's top %d held %d candidates, %d of "
                "them known positives, %d too close to the positive): training uses in-batch negatives only",
                report.queries, args.mining_retriever, args.mining_depth, report.candidates, report.dropped_positive,
                report.dropped_too_close)
        negatives = [neg_of[q] for q in qs]
    res = finetune_bi_encoder(qs, pos, texts, args.out, config=cfg, base=args.base,
                              negatives=negatives, mining=mining, cache_dir=args.cache,
                              source=_source(args), mining_names=MINING_FLAGS, validation=validation,
                              bm25=bm25 if bm25_mining else None,
                              setting_names={"lr": "--lr", "temperature": "--temperature"}, force=args.force)
    # the last mining's lists fed the last epoch, whose no-learning loss the summary prints
    mined = (getattr(res, "mining_reports", None) or [report])[-1] if mining is not None else None
    _report_search_training(args, res, cfg, len(qs), mined)
    return 0


def _hold_out(args: argparse.Namespace, qs: list, pos: list, frac: float, *, at_least: int = 1):  # noqa: ANN202
    """``(queries, rows, relevant rows by query, ValidationSet | None)``: the training pairs left once ``frac`` of the
    queries are held out (:func:`~twotower.search.validation.hold_out`); all of them and None when ``frac`` is 0.
    Fewer than ``at_least`` left is refused now, before any model is loaded."""
    from twotower.errors import ConfigError
    from twotower.search.validation import hold_out

    if not frac:
        by_q: dict[str, set[int]] = {}
        for q, r in zip(qs, pos):
            by_q.setdefault(q, set()).add(r)
        return qs, pos, by_q, None
    try:
        keep, valid = hold_out(qs, pos, frac, args.seed, name="--valid-frac")
    except ConfigError as e:
        raise ConfigError(f"{e} (split {args.split!r})") from None  # "--valid-frac: 0.5 needs ...", as flags read
    # pairs as given, so held out + left add up to the split's pairs (valid.pairs counts a query text's pairs once:
    # "holds out 116 of the 120 pairs ..., leaving 1" where two SciFact claims share a text)
    held = len(qs) - keep.size
    if keep.size < at_least:
        raise ConfigError(f"--valid-frac: {frac:g} holds out {held} of the {len(qs)} pairs of split "
                          f"{args.split!r}, leaving {keep.size} to train on; training needs at least {at_least}: "
                          "give a smaller --valid-frac")
    qs, pos = [qs[i] for i in keep], [pos[i] for i in keep]
    logging.getLogger(__name__).info("--valid-frac %g: %d of the queries (%d pairs) held out for validation, %d pairs "
                                     "left to train on", frac, len(valid.queries), held, len(qs))
    return (*_hold_out(args, qs, pos, 0.0)[:3], valid)


def _warn_unused_mining_flags(args: argparse.Namespace) -> None:
    """``--negatives 0`` mines nothing, so ``--mining-depth`` / ``--mining-margin`` were dropped without a word
    (a value other than the default is taken as given, as `search evaluate` does for --fusion)."""
    from twotower.search.negatives import MiningConfig

    from twotower.config import FinetuneConfig

    given = [f"{flag} {value:g}" for flag, value, default in (
        ("--mining-depth", args.mining_depth, MiningConfig.depth),
        ("--mining-margin", args.mining_margin, MiningConfig.relative_margin)) if value != default]
    from twotower.search.bm25 import BM25Config

    if args.token_pattern != BM25Config.token_pattern:
        given.append(f"--token-pattern {shell_arg(args.token_pattern)}")
    if args.mining_retriever != FinetuneConfig.mining_retriever:
        given.append(f"--mining-retriever {args.mining_retriever}")
    if given:
        logging.getLogger(__name__).warning(
            "%s %s no effect with --negatives 0 (in-batch negatives only: nothing is mined); pass --negatives N "
            "to mine N hard negatives per query", ", ".join(given), "has" if len(given) == 1 else "have")


def _say_negatives_cap(args: argparse.Namespace, flag: str) -> None:
    """A trained document tower takes 1 hard negative per query per step, whatever --negatives says: the log's
    "+1 hard negatives/query" was the only sign of it. Said (info, not a warning: --negatives' default gives it
    on every such run, and the negatives mined are all used, taking turns)."""
    logging.getLogger(__name__).info(
        "--negatives %d with %s: 1 hard negative per query per step, the %d mined taking turns epoch by epoch. A "
        "document tower being trained reads every hard negative forward and backward at --max-length word pieces "
        "(a frozen one looks them up in the encoded corpus), so each more per query would add --batch-size such "
        "documents to every step; and they are mined once, as re-mining would encode the corpus again with the "
        "moving tower", args.negatives, flag, args.negatives)


def _report_search_training(args: argparse.Namespace, res, cfg, pairs: int, mined=None) -> None:  # noqa: ANN001 - FinetuneResult, FinetuneConfig, MiningReport | None
    """The first and last epoch's mean loss next to a model's that learned nothing, and rerank train's warning
    (:func:`~twotower.search.rerank.barely_learned`) when the last is close to it. ``mined``: the last mining's
    report, whose lists the last epoch drew its hard negatives from (None: none mined).

    "final loss 0.0123" was the last step's alone: one batch's, and with no reference to read it against.
    """
    from twotower.search.finetune import epoch_losses
    from twotower.search.rerank import against_chance, barely_learned

    epochs = epoch_losses(res.history)
    first, last = epochs[0], epochs[-1]
    # one epoch read "mean loss its one epoch 0.8932"
    span = (f"epoch 1 {first['loss']:.4f}, epoch {len(epochs)} {last['loss']:.4f}" if len(epochs) > 1
            else f"{last['loss']:.4f} over its one epoch")
    print(f"fine-tuned {plural(len(res.history), 'step')} in {res.seconds:.0f}s; mean loss {span}, against "
          f"{last['chance_loss']:.4f} for a model that has learned nothing (ln of the candidates each query is "
          f"scored against: the batch's positives, {_hard_negatives_used(cfg.negatives_per_query, mined)}"
          f"{', the corpus' if cfg.corpus_negatives else ''}); saved to {res.out_dir}")
    validation = getattr(res, "validation", None)  # a FinetuneResult has it; a stand-in may not
    if validation is not None:
        _report_validation(validation)
    if barely_learned(last["loss"], last["chance_loss"]):
        logging.getLogger(__name__).warning(
            "the bi-encoder has barely learned: its last epoch's mean loss %.4f is %s %.4f, the loss of "
            "a model that has learned nothing (epoch 1: %.4f); compare `twotower search evaluate --beir %s "
            "--retriever dense --model %s` with the same command without --model before using it, and train with "
            "more --epochs (now %d), another --lr (now %g) or on more training pairs (%d in split %r)",
            last["loss"], against_chance(last["loss"], last["chance_loss"]), last["chance_loss"],
            first["loss"], shell_arg(args.beir), shell_arg(args.out), args.epochs, args.lr, pairs, args.split)


def _hard_negatives_used(asked: int, mined=None) -> str:  # noqa: ANN001 - MiningReport | None
    """``3 hard negatives per query``, or what the queries really had when the mining (``mined``'s report) left some
    short of the ``asked``: the summary said "3 hard negatives per query" where --mining-depth 2 had mined 0.7."""
    used = [min(asked, k) for k in mined.per_query] if mined is not None and mined.per_query else []
    if not used or min(used) == asked:
        return f"{_count(asked, 'hard negative')} per query"
    return (f"{sum(used) / len(used):.2f} hard negatives per query on average, fewest {min(used)}, of the {asked} "
            "asked (see the warning)")


def _report_validation(v: dict) -> None:
    """The held-out queries' dense NDCG@10 before training and after each epoch, and which weights were saved (the
    starting model's own warning, when no epoch beat it, comes from finetune_bi_encoder)."""
    scores = ", ".join(f"epoch {e['epoch']} {e['ndcg10']:.4f}" for e in v["epochs"])
    kept = ("the starting weights (no epoch beat them)" if v["best_epoch"] == 0
            else f"epoch {v['best_epoch']}'s weights ({v['best']:.4f})")
    stop = f"; stopped early, patience {v['patience']}" if v["stopped_early"] else ""
    print(f"validation NDCG@10 on {v['queries']} held-out queries: before training {v['start']:.4f}, {scores}; saved "
          f"{kept}{stop}")


@_length_flags_named
def cmd_rerank_train(args: argparse.Namespace) -> int:
    from twotower.search.artefacts import CROSS_ENCODER_META, is_cross_encoder

    # everything checked before any model is loaded or any negative mined
    _check_out(args, "cross-encoder", is_cross_encoder, CROSS_ENCODER_META)
    with _out_writer(args, "twotower rerank train"):
        return _rerank_train(args)


def _rerank_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from twotower.search.artefacts import check_cross_encoder_dir
    from twotower.search.rerank import RerankTrainConfig

    flags = {"negatives_per_query": "--negatives", "epochs": "--epochs", "max_length": "--max-length", "seed": "--seed",
             "lr": "--lr", "groups_per_step": "--batch-size", "valid_frac": "--valid-frac", "patience": "--patience"}
    _check_train_numbers(args, batch_min=1, negatives_min=1)
    cfg = _flag_config(lambda: RerankTrainConfig(epochs=args.epochs, negatives_per_query=args.negatives,
                                                 **_lengths_given(args, _CROSS_LENGTHS), seed=args.seed, lr=args.lr,
                                                 groups_per_step=args.batch_size, valid_frac=args.valid_frac,
                                                 patience=args.patience), flags)
    bm25 = _bm25_config(args)  # a bad --token-pattern is refused before anything is read, as by search index
    _check_beir(args)  # after the flags' own checks: a wrong --seed is said whatever --beir holds
    if not cfg.valid_frac and cfg.patience != RerankTrainConfig.patience:  # nothing validated, nothing to wait for
        logging.getLogger(__name__).warning("--patience %d has no effect without --valid-frac (no epoch is "
                                            "validated); pass --valid-frac F to hold out queries", cfg.patience)
    mining = _mining_config(args, args.negatives * args.epochs, "--negatives x --epochs")
    if args.base is not None:
        check_cross_encoder_dir(args.base, "--base", base=True)
        cfg = replace(cfg, **_base_lengths(args, _CROSS_LENGTHS))
    from twotower.config import SearchConfig

    dense = args.mining_retriever == "dense"
    if dense:
        from twotower.search.artefacts import check_bi_encoder_dir

        if args.mining_model is not None:
            check_bi_encoder_dir(args.mining_model, "--mining-model")
        _check_cache(args)
        _warn_unused_token_pattern(args, "--mining-retriever dense")
    else:
        unused = [f for f, v in (("--mining-model", args.mining_model),
                                 ("--cache", None if args.cache == SearchConfig.cache_dir else args.cache)) if v]
        if unused:
            logging.getLogger(__name__).warning("%s has no effect with --mining-retriever bm25 (the default): pass "
                                                "--mining-retriever dense to mine from a bi-encoder", " and ".join(unused))
    _threads(args)

    from dataclasses import asdict

    from twotower.search.rerank import train_cross_encoder

    data, all_qs, all_pos, by_q = _train_pairs(args)
    _check_mining_depth(args, len(data.corpus))
    qs, pos, by_q, valid = _hold_out(args, all_qs, all_pos, cfg.valid_frac)
    seen = _mining_model_saw(args, all_qs, all_pos, valid) if dense and valid is not None else 0
    texts = data.corpus.doc_texts()
    if dense:
        from twotower.search.finetune import load_dense_retriever

        retriever = load_dense_retriever(args.mining_model, cache_dir=args.cache).fit(texts)
    else:
        retriever = _bm25(data, texts, bm25)
    neg_of, report = _mine(retriever, by_q, mining, needed=args.negatives)  # a pool of --negatives x --epochs
    if not report.kept:
        _no_rerank_negatives(args, report)
    extra = {"validation": _rerank_validation(valid, retriever, args.mining_retriever)} if valid is not None else {}
    how = {"retriever": args.mining_retriever,
           **({"model": args.mining_model or "all-MiniLM-L6-v2"} if dense else {"bm25": asdict(bm25)})}
    train_cross_encoder(qs, pos, [neg_of[q] for q in qs], texts, args.out, base=args.base, config=cfg,
                        source={**_source(args), "mining": {**how, **asdict(mining)}}, setting_names={"lr": "--lr"},
                        force=args.force, **extra)
    _report_rerank_training(args, len(qs), seen)
    return 0


def _mining_model_saw(args: argparse.Namespace, qs: list, pos: list, valid) -> int:  # noqa: ANN001 - ValidationSet
    """How many of the held-out queries (``valid``) ``--mining-model`` was trained on, warned about when any.

    `rerank train --mining-retriever dense --mining-model M --valid-frac 0.2` with M fine-tuned (`search train`) on
    the same split reported "dense order 1.0000" on the held-out queries: M had learned their relevant documents, so
    every cross-encoder looked worse than the order it reranks. M's marker records the split and the sha256 of the
    queries and qrels it read (the same queries under another path too); the queries M held out itself (its
    valid_frac and seed, over the same pairs) are the ones it did not see.
    """
    from twotower.search.artefacts import trained_config, trained_on
    from twotower.search.beir import resolve_beir_dir
    from twotower.search.validation import hold_out
    from twotower.utils.atomic import sha256_file

    source = trained_on(args.mining_model)
    if source is None or source.get("split") != args.split:
        return 0
    files = ("queries.jsonl", f"qrels/{args.split}.tsv")
    recorded = source.get("sha256") if isinstance(source.get("sha256"), dict) else {}
    if all(f in recorded for f in files):
        beir = resolve_beir_dir(args.beir)
        if any(recorded[f] != sha256_file(beir / f) for f in files):
            return 0
    elif not _same_beir(source.get("beir"), args.beir):  # a marker from before the checksums: its path
        return 0
    config = trained_config(args.mining_model)
    frac, seed = config.get("valid_frac"), config.get("seed")
    unseen: set[str] = set()
    if isinstance(frac, float) and 0 < frac < 1 and isinstance(seed, int):
        with contextlib.suppress(Exception):  # its own hold-out, as search train drew it from these pairs
            unseen = set(hold_out(qs, pos, frac, seed)[1].queries)
    seen = sum(q not in unseen for q in valid.queries)
    if seen:
        same = (f" (`search train --valid-frac {args.valid_frac:g} --seed {args.seed}` on this split holds out these "
                "same queries)")
        logging.getLogger(__name__).warning(
            "--mining-model %s was trained on %d of the %d queries --valid-frac %g holds out (split %r of the same "
            "queries and qrels: its %s records their checksums): its dense order already ranks their relevant "
            "documents at the top, so the validation's dense order NDCG@10 is inflated and the cross-encoder will "
            "look worse than it is against it. For a fair comparison mine with a bi-encoder that did not see them%s, "
            "or with --mining-retriever bm25, or measure on another split (`twotower search evaluate --split test "
            "--rerank DIR`)", args.mining_model, seen, len(valid.queries), args.valid_frac, args.split,
            source["marker"], same)
    return seen


def _bm25(data, texts, config):  # noqa: ANN001, ANN202 - BeirData, list[str], BM25Config -> BM25Retriever
    """BM25 over the corpus rows with ``--token-pattern`` (``config``), the retriever both train commands can mine
    hard negatives from: it always had BM25Config's defaults, and the marker did not say which settings mined."""
    from twotower.search.bm25 import BM25Retriever

    return BM25Retriever(config).fit(texts, data.corpus.ids)


def _warn_unused_token_pattern(args: argparse.Namespace, why: str) -> None:
    """``--token-pattern`` given where BM25 mines nothing (``why``: the setting that says so) is said to do nothing,
    as `search evaluate --retriever dense` says it."""
    from twotower.search.bm25 import BM25Config

    if args.token_pattern != BM25Config.token_pattern:
        logging.getLogger(__name__).warning("--token-pattern has no effect with %s (BM25 mines nothing); pass "
                                            "--mining-retriever bm25 to mine from BM25", why)


def _mine(retriever, by_q: dict, mining, needed: int | None = None):  # noqa: ANN001, ANN202 - retriever, MiningConfig -> (dict, MiningReport)
    """``({query: hard-negative rows}, MiningReport)`` for every training query, its known positives (``by_q``: every
    relevant row of the query) never among its negatives; mine_hard_negatives logs the summary (shown once).
    ``needed``: the fewest a query needs (rerank train's --negatives, drawn each epoch from a pool of more)."""
    import numpy as np

    from twotower.search.negatives import mine_hard_negatives

    uniq = list(by_q)
    negs, report = mine_hard_negatives(uniq, [np.asarray(sorted(by_q[q])) for q in uniq], retriever, mining,
                                       names=MINING_FLAGS, needed=needed)
    return dict(zip(uniq, negs)), report


def _no_rerank_negatives(args: argparse.Namespace, report) -> None:  # noqa: ANN001 - MiningReport
    """Refuse a `rerank train` whose mining kept no negative, in the command's words: train_cross_encoder's own
    error, after the model had loaded, told a CLI user to "mine some with mine_hard_negatives first"."""
    from twotower.errors import DataError

    hint = []
    if report.dropped_too_close:
        hint.append(f"lower --mining-margin ({args.mining_margin:g}: {report.dropped_too_close} candidates scored too "
                    "close to the positive)")
    if report.candidates >= report.queries * args.mining_depth:
        hint.append(f"raise --mining-depth ({args.mining_depth})")
    bm25 = args.mining_retriever == "bm25"
    why = ("; " + " or ".join(hint)) if hint else (
        ": BM25 retrieves only documents sharing a word with the query, and here those are the relevant ones; "
        "the corpus needs other documents that share words with the queries" if bm25 else
        ": the corpus holds no other document to mine")
    raise DataError(f"no hard negative for any of the {report.queries} training queries: "
                    f"{'BM25' if bm25 else 'the bi-encoder'}'s top "
                    f"{args.mining_depth} held {report.candidates} candidates, {report.dropped_positive} of them known "
                    f"positives and {report.dropped_too_close} too close to the positive; the cross-encoder has "
                    f"nothing to learn against{why}")


def _rerank_validation(valid, retriever, name: str):  # noqa: ANN001, ANN202 - ValidationSet, retriever -> RerankValidation
    """The held-out queries with the mining retriever's lists (``name``: bm25 | dense), the first stage the
    cross-encoder is judged against (and was mined from), its top SearchConfig.rerank_top reranked as `search
    evaluate --rerank` does by default."""
    from twotower.config import SearchConfig
    from twotower.search.rerank import RerankValidation

    first = retriever.search(valid.queries, max(SearchConfig.rerank_top, 10))
    return RerankValidation(valid.queries, first, valid.relevant, top_n=SearchConfig.rerank_top, first_stage_name=name)


def _report_rerank_training(args: argparse.Namespace, judgements: int, seen: int = 0) -> None:
    """The mean loss of the last steps (the marker's ``tail``) next to a model's that learned nothing, and a warning
    when they are close. Not called "final loss": the marker's ``final_loss`` is the last step's alone.

    "cross-encoder saved to DIR" alone ended a training whose loss went 1.389 -> 1.345 against ln(4) = 1.386: the
    model had learned next to nothing, and reranking with it took NDCG@10 from 0.87 to 0.38.
    """
    from pathlib import Path

    from twotower.search.artefacts import CROSS_ENCODER_META
    from twotower.search.rerank import against_chance, barely_learned

    meta = json.loads((Path(args.out) / CROSS_ENCODER_META).read_text(encoding="utf-8"))
    tail, first = meta["tail"], meta["first_loss"]
    loss, chance = tail["loss"], tail["chance_loss"]
    low, high = tail["group_sizes"]
    reference = (f"ln({low}) = {chance:.4f} (1 positive + {_count(low - 1, 'negative')} per query)" if low == high
                 else f"{chance:.4f} (the mean ln of group sizes {low}-{high}: 1 positive + up to "
                      f"{_count(high - 1, 'negative')})")
    name = f"mean loss of the last {tail['steps']} steps" if tail["steps"] > 1 else "loss of its one step"
    steps = f" ({first:.4f} at the first step)" if tail["steps"] > 1 else ""
    saved = meta.get("saved_epoch")  # markers from before had none
    kept = ("" if saved is None or saved["epoch"] == meta.get("last_epoch") else
            f"; the weights saved are epoch {saved['epoch']}'s (the best validated), whose mean loss was "
            f"{saved['mean_loss']:.4f}, not the last steps' (epoch {meta['last_epoch']})")
    print(f"cross-encoder saved to {args.out}: {name} {loss:.4f}{steps}, against {reference} for a model "
          f"that has learned nothing{kept}")
    v = meta.get("validation")
    if v is not None:  # train_cross_encoder warned already when reranking made the held-out lists worse
        epochs = v.get("epochs")  # after each epoch; markers from before had one figure, after training
        kept = "" if not epochs else (
            "; after " + ", ".join(f"epoch {e['epoch']} {e['reranked']:.4f}" for e in epochs)
            + f": saved epoch {v['best_epoch']}'s weights" + (f" (stopped early, patience {v['patience']})"
                                                               if v.get("stopped_early") else ""))
        print(f"validation NDCG@10 on {v['queries']} held-out queries: {v['first_stage']} order {v['without_rerank']:.4f}, "
              f"reranked (top {v['top_n']}) {v['reranked']:.4f}" + (" (WORSE: see the warning)" if v["worse"] else "")
              + kept + (f"; the dense order is inflated: --mining-model was trained on {seen} of these queries "
                        "(see the warning)" if seen else ""))
    if barely_learned(loss, chance):
        logging.getLogger(__name__).warning(
            "the cross-encoder has barely learned: its %s %.4f is %s %.4f, the loss of a model "
            "that has learned nothing (it went from %.4f at the first step to %.4f); reranking with it is likely to "
            "make lists worse, not better. Before using it, compare the rows with and without reranking that "
            "`twotower search evaluate --beir %s --rerank %s` prints, and train with more --epochs (now %d) or on "
            "more training queries (%d judgements in split %r)", name, loss, against_chance(loss, chance), chance,
            first, loss, shell_arg(args.beir), shell_arg(args.out), args.epochs, judgements, args.split)
