"""A saved search index: BM25 + dense embeddings of one corpus, queried as a hybrid.

Layout of ``path/``::

    meta.json        format, model (bi-encoder dir or null), max_length, query_max_length, fusion, sha256 of every file,
                     twotower_version (absent from an older index)
    docs.json        {"ids": [...], "titles": [...], "texts": [...]}
    bm25/            BM25Retriever.save
    embeddings.npy   float32 [N, D] corpus embeddings from the document tower
"""
from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from twotower.config import SearchConfig
from twotower.errors import ConfigError, DataError, IntegrityError
from twotower.results import PAD_ID, Results
from twotower.search.artefacts import INDEX_META, is_search_index, no_index_message, out_check
from twotower.search.beir import Corpus
from twotower.text.encoder import EncoderSettings
from twotower.utils.folder_lock import writes_folder
from twotower.utils.runtime import keeps_caller_state
from twotower.utils.atomic import (
    atomic_dir,
    atomic_write_bytes,
    atomic_write_json,
    read_json,
    sha256_bytes,
    sha256_file,
    verify_files,
)
from twotower.utils.shell import shell_arg
from twotower.utils.version import VERSION_KEY, installed_version

if TYPE_CHECKING:
    from twotower.search.bm25 import BM25Config
    from twotower.search.fusion import FusionChoice

__all__ = ["SearchIndex", "Hit", "shortfall", "describe_index"]

logger = logging.getLogger(__name__)

MODES = ("bm25", "dense", "hybrid")


def _check_fusion(fusion: object, meta_path: Path, fix: str) -> None:
    """The stored fusion must be one this version applies: refused at load, not at the first query."""
    from twotower.search.fusion import FUSIONS, FusionChoice  # noqa: PLC0415

    if not (isinstance(fusion, dict) and fusion.get("name") in FUSIONS and isinstance(fusion.get("params"), dict)):
        name = fusion.get("name") if isinstance(fusion, dict) else fusion
        raise IntegrityError(f"{meta_path}: unknown fusion {name!r} (known: {', '.join(sorted(FUSIONS))}); {fix}")
    # its parameters too (an edited k or weights): fused once on a one-document list, now, not at the first query
    probe = Results(np.zeros((1, 1), dtype=np.int64), np.ones((1, 1), dtype=np.float32))
    try:
        FusionChoice(name=fusion["name"], params=fusion["params"]).apply([probe, probe], top_k=1)
    except (ConfigError, DataError, TypeError, ValueError, KeyError) as e:
        raise IntegrityError(f"{meta_path}: fusion {fusion['name']!r} with params {fusion['params']!r} cannot be "
                             f"applied ({e}); {fix}") from None


def _read_meta(path: Path) -> tuple[dict, Path, str]:
    """``(meta, meta_path, fix)`` of the search index at ``path``, its files checked against their checksums and its
    fusion against what this version applies (:meth:`SearchIndex.load`, :func:`describe_index`)."""
    if not (path / "meta.json").is_file():
        raise DataError(no_index_message(path))
    meta_path = path / "meta.json"
    fix = f"rebuild it with `twotower search index --beir DIR --out {shell_arg(path)}`"
    try:
        meta = read_json(meta_path)
    except IntegrityError as e:  # "...; the file is corrupted or half-written" said nothing of what to do
        raise IntegrityError(f"{e}; {fix} (after removing the folder: a damaged index is not replaced)") from None
    if isinstance(meta, dict) and meta.get("kind") == "bm25":
        # "IDX/bm25/meta.json does not describe a search index": the BM25 half given for the index holding it
        whole = path.resolve().parent
        if is_search_index(whole):
            # (the folder alone: search query takes it as --index, serve as --search-index)
            raise DataError(f"{path} is the BM25 half of the search index {whole}, not a search index; give the "
                            f"index folder {shell_arg(whole)} instead")
        raise DataError(f"{path} is a BM25 index (BM25Retriever.save), not a search index (BM25 + dense); build one "
                        f"with `twotower search index --beir DIR --out {shell_arg(str(path) + '-index')}`")
    if not isinstance(meta, dict) or meta.get("kind") != "search_index":
        raise IntegrityError(f"{meta_path} does not describe a search index")
    files = meta.get("files")
    if meta.get("format", 1) != 1 or "files" in meta:
        # format 2 lists every file's sha256: a missing or empty table would check nothing
        if not isinstance(files, dict) or not files:
            raise IntegrityError(f"{meta_path}: the table of file checksums is missing or empty; {fix}")
        verify_files(path, files, fix=fix)
    elif sha256_file(path / "embeddings.npy") != meta.get("embeddings_sha256"):  # format 1: embeddings only
        raise IntegrityError(f"{path}/embeddings.npy: sha256 mismatch (corrupted, truncated or replaced); {fix}")
    _check_fusion(meta.get("fusion"), meta_path, fix)
    return meta, meta_path, fix


def _encoder_mismatch(path: Path, meta: dict, meta_path: Path, now: str) -> str:
    """Why the index at ``path`` is refused when its model's document tower no longer loads as the encoder its
    embeddings came from (meta.json's ``doc_encoder``), and the command that rebuilds it over the same corpus with
    the same model. "PATH: documents were embedded by st@..., but the model now loads as st@...; rebuild the index"
    named neither the file and field nor the model folder, nor how to rebuild."""
    from twotower.text.encoder import backend_of  # noqa: PLC0415

    model = meta.get("model")
    recorded, backend = meta["doc_encoder"], meta.get("encoder_backend", "torch")
    why = (f"its encoder_backend {backend} does not match it" if backend_of(recorded) != backend
           else "the model's weights changed since the index was built")
    return (f"{meta_path}: doc_encoder {recorded} embedded the index's documents, but its model "
            f"({model or 'the packaged all-MiniLM-L6-v2'}) now loads as {now} ({why}); its embeddings cannot be "
            f"searched with this model: rebuild the index with `{_rebuild_command(path, meta)}`")


def _rebuild_command(path: Path, meta: dict) -> str:
    """The ``twotower search index`` command that rebuilds the index at ``path`` over the same corpus with the same
    model, on the backend it was built with."""
    source = meta.get("source")
    beir = source.get("beir") if isinstance(source, dict) else None
    model, backend = meta.get("model"), meta.get("encoder_backend", "torch")
    command = ["twotower", "search", "index", "--beir", shell_arg(beir) if isinstance(beir, str) else "DIR"]
    if model is not None:
        command += ["--model", shell_arg(model)]
    if backend != "torch":  # rebuilt on the forward pass it was built with, not the default
        command += ["--encoder-backend", shell_arg(backend)]
    command += ["--out", shell_arg(path)]
    return " ".join(command)


def _query_encoder_mismatch(path: Path, meta: dict, meta_path: Path, now: str) -> str:
    """Why the index at ``path`` is refused when its model's query tower no longer loads as the one it was built
    with (meta.json's ``query_encoder``): retraining the query tower in place (``search train --out`` onto the
    model's folder) changed every dense and hybrid list of the index, and nothing said so."""
    model = meta.get("model")
    return (f"{meta_path}: query_encoder {meta['query_encoder']} was the query tower the index was built with, but "
            f"its model ({model or 'the packaged all-MiniLM-L6-v2'}) now loads it as {now} (retrained or replaced "
            f"since), so the index's dense and hybrid results would change without notice: rebuild it with "
            f"`{_rebuild_command(path, meta)}` (the corpus embeddings come from the cache when the document tower "
            f"is unchanged)")


def _tower_ids(model: str | None, settings: EncoderSettings) -> tuple[str, str]:
    """``(query, doc)``: the ``model_id`` each tower of the bi-encoder ``model`` would load as on ``settings``'
    backend (:class:`~twotower.text.encoder.TextEncoder`), from the weights' files, without loading either."""
    from twotower.search.finetune import bi_encoder_dirs  # noqa: PLC0415
    from twotower.text.encoder import encoder_id, weights_fingerprint  # noqa: PLC0415

    backend = settings.resolved().backend
    q_dir, d_dir = bi_encoder_dirs(model)
    q_id = encoder_id(f"st@{weights_fingerprint(q_dir)}", backend)
    return q_id, (q_id if d_dir == q_dir else encoder_id(f"st@{weights_fingerprint(d_dir)}", backend))


def _check_model(path: Path, meta: dict, meta_path: Path, settings: EncoderSettings) -> None:
    """Refuse the index at ``path`` when the bi-encoder its meta.json names is gone (moved or deleted) or no longer
    loads as the towers its embeddings and queries came from: what its dense side needs, and BM25 does not."""
    from twotower.text.encoder import same_encoder_id  # noqa: PLC0415

    model = meta.get("model")
    if model is not None and not Path(model).exists():
        raise DataError(f"{meta_path}: the index's model {model} does not exist (moved or deleted); put it "
                        f"back there, or rebuild the index with `twotower search index --beir DIR --model DIR "
                        f"--out {shell_arg(path)}`")
    # the towers' fingerprints, from their files (~0.1 s), without loading the models
    query_now, doc_now = _tower_ids(model, settings)
    if meta.get("doc_encoder") is not None and not same_encoder_id(meta["doc_encoder"], doc_now):
        raise IntegrityError(_encoder_mismatch(path, meta, meta_path, doc_now))
    if meta.get("query_encoder") is None:  # saved before the query tower was recorded: loads as before
        logger.info("%s: the index records no query_encoder (built before it was recorded): whether the query "
                    "tower is still the one it was built with is unchecked (rebuild it to record it)", meta_path)
    elif not same_encoder_id(meta["query_encoder"], query_now):
        raise IntegrityError(_query_encoder_mismatch(path, meta, meta_path, query_now))


#: the fields of a search index's meta.json that describe it (:func:`describe_index`), beside its BM25 settings
DESCRIBED = ("documents", "model", "doc_encoder", "query_encoder", "encoder_backend", "max_length",
             "query_max_length", "fusion", "source", "truncation", "twotower_version")


def describe_index(path: str | os.PathLike[str]) -> dict[str, object]:
    """What the saved search index at ``path`` was built with (``twotower search info``), checked as
    :meth:`SearchIndex.load` checks it but without loading the bi-encoder: ``kind`` ("search_index"), ``path``
    (absolute), the :data:`DESCRIBED` fields of its meta.json (None where an older index has none), ``model_found``
    (whether the bi-encoder folder ``model`` names exists: the index cannot be searched without it; None for the
    packaged model) and ``bm25``:
    :meth:`~twotower.search.bm25.BM25Retriever.settings` (k1, b, method, stopwords, stemmer, token_pattern,
    documents, vocabulary). A folder saved by ``BM25Retriever.save`` gives ``kind`` "bm25" and ``bm25`` alone."""
    from twotower.search.bm25 import BM25Retriever  # noqa: PLC0415
    from twotower.text.encoder import same_encoder_id  # noqa: PLC0415

    path = Path(path)
    try:
        probe = read_json(path / "meta.json") if (path / "meta.json").is_file() else None
    except IntegrityError:  # not JSON: said by _read_meta, with how to rebuild a search index
        probe = None
    if isinstance(probe, dict) and probe.get("kind") == "bm25":
        return {"kind": "bm25", "path": str(path.resolve()), "bm25": BM25Retriever.load(path).settings()}
    meta, _, _ = _read_meta(path)
    model = meta.get("model")
    # whether the bi-encoder the index names is still there (None: the packaged model): info printed a moved
    # model's path as if the index could be searched, and `search query` then refused it
    found = Path(model).exists() if isinstance(model, str) else None
    # whether the model's query tower is still the one the index was built with (from its files, not loaded; None:
    # not recorded by an older index, or the model is gone)
    query_now = None
    if meta.get("query_encoder") is not None and found is not False:
        query_now = _tower_ids(model, EncoderSettings(backend=meta.get("encoder_backend", "torch")))[0]
    return {"kind": "search_index", "path": str(path.resolve()), **{k: meta.get(k) for k in DESCRIBED},
            "model_found": found, "query_encoder_now": query_now,
            # as SearchIndex.load matches them: `==` said an id recorded with the older fingerprint of the same weights
            # had "changed", that dense and hybrid search refuse the index, while search query answered from it
            "query_encoder_matches": None if query_now is None else same_encoder_id(meta["query_encoder"], query_now),
            "bm25": BM25Retriever.load(path / "bm25").settings()}


def _read_docs(docs_path: Path, fix: str) -> Corpus:
    """docs.json as a Corpus; ids, titles and texts must be lists of strings of one length."""
    docs = read_json(docs_path)
    cols = [docs.get(key) if isinstance(docs, dict) else None for key in ("ids", "titles", "texts")]
    if not all(isinstance(c, list) for c in cols) or len({len(c) for c in cols}) != 1:
        lengths = ", ".join(f"{k} {len(c) if isinstance(c, list) else 'missing'}"
                            for k, c in zip(("ids", "titles", "texts"), cols))
        raise IntegrityError(f"{docs_path}: ids, titles and texts must be lists of one length ({lengths}); {fix}")
    ids, titles, texts = cols
    return Corpus(ids, titles, texts, {d: i for i, d in enumerate(ids)})


def shortfall(k: int, got: int, mode: str, n_docs: int) -> dict[str, object] | None:
    """Why a search answered ``got`` < ``k`` hits (``{"missing", "reason"}``), or None for a full list.

    One wording for ``POST /search`` and ``twotower search query``: a small corpus, or (BM25) few documents
    sharing a term with the query.
    """
    if got >= k:
        return None
    # the corpus size explains the shortfall only when every document came back: a BM25 query of k=10 over 5
    # documents that matched none said "the search index holds 5 documents" beside an empty list
    if n_docs < k and got >= n_docs:
        why = f"the search index holds {n_docs} documents"
    elif mode == "bm25":
        # "only 0 documents share a term" for "the of and": say that such words are not indexed at all
        shared = ((f"only {got} documents share a term with the query" if got > 1 else
                   "only 1 document shares a term with the query") if got else
                  "no document shares a term with the query (stop words such as \"the\" are not indexed)")
        why = f"{shared}; mode \"dense\" or \"hybrid\" also ranks the documents that share none"
    else:
        why = f"only {got} documents were found"
    return {"missing": k - got, "reason": f"fewer than k={k} hits: {why}"}


#: why a hybrid list is the dense retriever's alone (:meth:`SearchIndex.dense_only`)
DENSE_ONLY_REASON = ("BM25 matched no document: no document shares a term with the query (stop words such as \"the\" "
                     "are not indexed, and text written without spaces, such as Chinese, is matched only as whole "
                     "runs), so the hybrid list is the dense retriever's alone")


def _no_check() -> None:
    """The default ``check``: nothing abandons the work."""


@dataclass(frozen=True)
class Hit:
    doc_id: str
    score: float
    title: str


class SearchIndex:
    """BM25 and dense retrieval over one corpus, fused (RRF by default) and optionally reranked."""

    def __init__(self, corpus: Corpus, bm25, dense, *, model: str | None, fusion: "FusionChoice | dict | None" = None,
                 source: dict | None = None) -> None:
        from twotower.search.fusion import as_hybrid_fusion  # noqa: PLC0415

        self.corpus = corpus
        self.bm25 = bm25
        # a DenseRetriever, or a function that loads one (SearchIndex.load): the bi-encoder is loaded at the first
        # use of the dense side, so a BM25 search (`search query --mode bm25`) does not wait ~15 s for a text
        # encoder it never uses
        self._dense = dense
        self.model = model
        # stored as meta.json writes it; a FusionChoice (what tune_fusion and fusion_from_config return) was kept
        # as given, and the first query failed on fusion["name"], save on "not JSON serialisable"
        choice = as_hybrid_fusion(fusion or {"name": "rrf", "params": {"k": SearchConfig.rrf_k}})
        self.fusion = {"name": choice.name, "params": dict(choice.params)}
        self.source = source  # where the corpus was read from (e.g. {"beir": DIR}), recorded in meta.json

    @property
    def dense(self):  # noqa: ANN201 - DenseRetriever (imported lazily: dense.py is the heavier module)
        """The dense retriever (query tower + stored document embeddings), loaded the first time it is used."""
        if callable(self._dense):
            self._dense = self._dense()
        return self._dense

    @property
    def dense_loaded(self) -> bool:
        """Whether the bi-encoder has been loaded (a BM25-only use of a loaded index never loads it)."""
        return not callable(self._dense)

    @classmethod
    @keeps_caller_state()
    def build(cls, corpus: Corpus, *, model: str | os.PathLike[str] | None = None, max_length: int | None = None,
              cache_dir: str | os.PathLike[str] | None = None, fusion: "FusionChoice | dict | None" = None,
              source: dict | None = None, query_max_length: int | None = None, encoder_backend: str | None = None,
              encoder_threads: int | None = EncoderSettings.threads, threads: int | None = None,
              bm25: "BM25Config | None" = None) -> "SearchIndex":
        """``max_length`` / ``query_max_length``: word pieces the encoders read of a document / query, saved with
        the index and used by every query it answers; ``None``: the lengths ``model`` was fine-tuned with (its
        marker), else ``SearchConfig``'s. ``fusion``: a :class:`~twotower.search.FusionChoice` (``tune_fusion``,
        ``fusion_from_config``) or its ``{"name", "params"}`` dict; ``None``: RRF with ``SearchConfig.rrf_k``.
        ``encoder_backend`` / ``encoder_threads``: the encoders' forward pass, as ``search index --encoder-backend``
        / ``--encoder-threads`` (:func:`~twotower.search.finetune.encoder_settings`: None reads
        ``TWOTOWER_ENCODER_BACKEND``, else the backend ``model`` was fine-tuned through, else ``EncoderSettings``');
        the backend is saved with the index, whose queries are encoded on it. ``threads``: torch's, FAISS's and the
        BLAS pools' thread count while it builds (``--threads``; the caller's counts are put back when it returns;
        None: left as they are). ``bm25``: the BM25 half's :class:`~twotower.search.bm25.BM25Config` (k1, b, token
        pattern, ..., as ``search index --token-pattern``), saved with the index in ``bm25/meta.json``; None: its
        defaults."""
        from twotower.search.finetune import encoder_settings  # noqa: PLC0415
        from twotower.search.fusion import as_hybrid_fusion  # noqa: PLC0415
        from twotower.utils.runtime import set_threads  # noqa: PLC0415

        as_hybrid_fusion(fusion or {"name": "rrf"})  # a bad fusion is refused before the corpus is encoded
        from twotower.search.bm25 import BM25Retriever, check_bm25_config  # noqa: PLC0415

        check_bm25_config(bm25)  # so are BM25 settings that are not a BM25Config
        encoder_settings(model, encoder_backend, encoder_threads)  # so are a bad backend and thread count
        set_threads(threads)
        from twotower.search.finetune import load_dense_retriever  # noqa: PLC0415

        texts = corpus.doc_texts()
        bm25 = BM25Retriever(bm25).fit(texts, corpus.ids)
        dense = load_dense_retriever(model, cache_dir=cache_dir, max_length=max_length,
                                     query_max_length=query_max_length, encoder_backend=encoder_backend,
                                     encoder_threads=encoder_threads).fit(texts)
        # stored absolute: an index is loaded from other folders (a service, another shell) than it was built in
        return cls(corpus, bm25, dense, model=str(Path(model).resolve()) if model is not None else None, fusion=fusion,
                   source=source)

    @writes_folder("path", "SearchIndex.save", check=out_check("search index", is_search_index, INDEX_META))
    def save(self, path: str | os.PathLike[str], *, force: bool = False) -> None:
        """Write the index to the folder ``path`` atomically (layout in the module docstring, every file's sha256
        in ``meta.json``); the bi-encoder folder is named by its path, not copied. An earlier index ``path`` holding
        files it did not write is refused unless ``force``: they would be removed with it."""
        buf = io.BytesIO()
        np.save(buf, self.dense.doc_embeddings, allow_pickle=False)
        with atomic_dir(path) as tmp:
            self.bm25.save_into(tmp / "bm25")
            atomic_write_bytes(tmp / "embeddings.npy", buf.getvalue())
            atomic_write_json(tmp / "docs.json", {"ids": self.corpus.ids, "titles": self.corpus.titles,
                                                  "texts": self.corpus.texts})
            # every file's sha256, checked on load by verify_files like runs, checkpoints and vector indexes
            files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
            atomic_write_json(tmp / "meta.json", {
                "format": 2, "kind": "search_index", "model": self.model, "max_length": self.dense.max_length,
                "query_max_length": self.dense.query_max_length,
                "fusion": self.fusion, "embeddings_sha256": sha256_bytes(buf.getvalue()), "files": files,
                # the exact encoder (weights + forward-pass backend) the stored embeddings came from
                "doc_encoder": self.dense.doc_encoder.model_id, "encoder_backend": self.dense.doc_encoder.backend,
                # and the query tower that encodes its queries: retrained in place, it changed the results silently
                "query_encoder": self.dense.encoder.model_id,
                "source": self.source, "documents": len(self.corpus),  # what the index was built from
                # passages longer than max_length, cut by the encoder (text_encoder.truncation_report; null: unknown)
                "truncation": self.dense.truncation,
                VERSION_KEY: installed_version(),  # absent from an index saved before it was recorded
            })

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, bm25_only: bool = False) -> "SearchIndex":
        """An index saved by :meth:`save` (``twotower search index``), checked against its checksums and its towers'
        fingerprints; queries are encoded by the bi-encoder it names, on the backend its documents were encoded with,
        loaded at the first dense or hybrid search (a BM25 search never loads it).

        ``bm25_only``: the caller searches in mode bm25 alone (``search query --mode bm25``), which needs no model, so
        whether the bi-encoder is still there and still the one the index was built with is checked at the first
        dense or hybrid search instead of now: an index whose model was moved or deleted answers BM25 queries. Every
        file's checksum is checked either way."""
        from twotower.search.bm25 import BM25Retriever  # noqa: PLC0415
        from twotower.search.dense import DenseRetriever  # noqa: PLC0415

        path = Path(path)
        meta, meta_path, fix = _read_meta(path)
        corpus = _read_docs(path / "docs.json", fix)
        emb = np.load(path / "embeddings.npy", allow_pickle=False)
        if emb.shape[0] != len(corpus):
            raise IntegrityError(f"{path}: {emb.shape[0]} embeddings for {len(corpus)} documents")
        model = meta.get("model")
        from twotower.text.encoder import EncoderSettings  # noqa: PLC0415

        # queries are encoded with the backend the documents were (an int8 corpus gets int8 queries)
        # (TWOTOWER_ENCODER_BACKEND is not read: a wrong one refused the load, though the index's own is used)
        settings = EncoderSettings(backend=meta.get("encoder_backend", "torch"), threads=EncoderSettings.env_threads())
        if not bm25_only:  # refused now, before anything is searched (serve refuses at start)
            _check_model(path, meta, meta_path, settings)

        def load_dense() -> DenseRetriever:
            from twotower.search.finetune import load_bi_encoder  # noqa: PLC0415

            if bm25_only:  # deferred from load: checked at the first use of the model
                _check_model(path, meta, meta_path, settings)
            q_enc, d_enc = load_bi_encoder(model, settings=settings)
            # indexes saved before query_max_length was stored were built and queried at the default
            return DenseRetriever(q_enc, doc_encoder=d_enc, max_length=meta["max_length"],
                                  query_max_length=meta.get("query_max_length", SearchConfig.query_max_length)
                                  ).fit_embeddings(emb)

        # loaded at the first dense or hybrid search (SearchService.load's warm-up loads it before a service is ready)
        return cls(corpus, BM25Retriever.load(path / "bm25"), load_dense, model=model, fusion=meta["fusion"],
                   source=meta.get("source"))

    def query_cuts(self, queries: Sequence[str], mode: str = "hybrid") -> list[dict[str, int] | None]:
        """Per query, ``{"word_pieces": n, "read": limit}`` when the dense query tower read only the first ``limit``
        of its ``n`` word pieces, else None (BM25 reads every word; a model without a tokenizer cannot tell).

        One answer for ``twotower search query`` (a note) and ``POST /search`` (the ``query_cut`` field): a long
        query is not refused, but never cut silently.
        """
        if mode == "bm25":
            return [None] * len(queries)
        pieces = self.dense.encoder.word_pieces(list(queries))
        limit = self.dense.query_max_length
        if pieces is None:
            return [None] * len(queries)
        return [{"word_pieces": int(n), "read": limit} if n > limit else None for n in pieces]

    def dense_only(self, queries: Sequence[str], mode: str = "hybrid") -> list[dict[str, str] | None]:
        """Per query, ``{"reason": ...}`` when mode hybrid's BM25 half matched no document, so the fused list is the
        dense retriever's alone, else None (other modes: None).

        One answer for ``twotower search query`` (a note) and ``POST /search`` (the ``dense_only`` field), as
        :meth:`query_cuts` and :func:`shortfall`: a query no word of which is in the corpus (stop words, a language
        written without spaces such as Chinese) became a dense search without a word.
        """
        if mode != "hybrid":
            return [None] * len(queries)
        lexical = self.bm25.search(list(queries), 1)
        return [None if (lexical.ids[q] != PAD_ID).any() else {"reason": DENSE_ONLY_REASON}
                for q in range(len(queries))]

    def search(self, queries: Sequence[str], k: int = SearchConfig.k, *, mode: str = "hybrid", reranker=None,
               rerank_top: int | None = None, check: Callable[[], None] | None = None,
               remaining: Callable[[], float] | None = None) -> Results:
        """Top-``k`` corpus rows per query; the cross-encoder re-scores only the first ``rerank_top``
        (default ``SearchConfig.rerank_top``; given without a ``reranker`` it is refused, as ``--rerank-top``
        without ``--rerank`` and POST /search's ``rerank_top`` without ``"rerank": true`` are: it was ignored).

        ``check`` (e.g. a service's :meth:`~twotower.serving.budget.WorkBudget.check`) is called between the
        stages and between cross-encoder batches, so it can abandon the work by raising; ``remaining()`` (seconds
        left, e.g. :meth:`~twotower.serving.budget.WorkBudget.remaining`) makes the batches near the deadline smaller.
        """
        from twotower.search.fusion import FusionChoice, fuse_with_head  # noqa: PLC0415

        from twotower.search.checks import (  # noqa: PLC0415
            check_depth, check_query_texts, rerank_top_needs_rerank, wordless)

        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        queries = check_query_texts(queries)
        blank = next((n for n, q in enumerate(queries) if wordless(q)), None)
        if blank is not None:  # as `search query` and POST /search: dense search ranked the corpus for no words
            raise ConfigError(f"queries[{blank}] {wordless(queries[blank])}; give the text to search for")
        # checked here, not only by the CLI and POST /search: k=-1 sliced the list to every hit but the last
        k = check_depth(k, "k", len(self.corpus))
        given = rerank_top is not None
        rerank_top = check_depth(rerank_top if given else SearchConfig.rerank_top, "rerank_top", len(self.corpus))
        if given and reranker is None:
            raise ConfigError(rerank_top_needs_rerank("rerank_top", "a reranker", "one", "pass"))
        check = check or _no_check
        depth = max(k, rerank_top if reranker is not None else k, SearchConfig.depth if mode == "hybrid" else k)
        check()
        if mode == "bm25":
            res = self.bm25.search(queries, depth)
        elif mode == "dense":
            res = self.dense.search(queries, depth)
        else:
            choice = FusionChoice(name=self.fusion["name"], params=self.fusion["params"])
            lexical = self.bm25.search(queries, depth)
            check()
            # fused at the depth `search evaluate` measures whatever k: a deeper fusion re-ranks the head
            res = fuse_with_head(choice, [lexical, self.dense.search(queries, depth)], top_k=depth)
        check()
        if reranker is not None:
            res = reranker.rerank(queries, res, self.corpus.doc_texts(), top_n=rerank_top, check=check,
                                  remaining=remaining)
        return Results(res.ids[:, :k], res.scores[:, :k])

    def hits(self, results: Results, q: int) -> list[Hit]:
        """Row ``q`` of :meth:`search`'s ``results`` as :class:`Hit` records (document id, score, title), padding
        left out."""
        ids, scores = results.row(q)
        return [Hit(self.corpus.ids[i], float(s), self.corpus.titles[i]) for i, s in zip(ids, scores) if i != PAD_ID]
