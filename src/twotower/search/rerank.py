"""Cross-encoder reranking of a first stage's top candidates, and its training.

No cross-encoder with weights ships on PyPI here, so :func:`train_cross_encoder`
starts from the MiniLM bi-encoder weights with a fresh one-logit head and
trains it listwise: for each query, a group ``[positive, hard negatives...]``
scored jointly, loss ``-log softmax(scores)[positive]``
(:class:`~twotower.losses.ListwiseSoftmax`), on :class:`~twotower.training.loop.TrainLoop`.

The marker's losses (``twotower_cross_encoder.json``): ``first_loss`` and ``final_loss`` are the first and the last
step's alone (one step's groups), ``final_loss`` also written ``final_step_loss``; ``final_epoch_mean_loss`` is the
last epoch's mean step loss; ``tail`` the mean of the last steps (``tail.steps``, at most 10) beside a constant
scorer's, the figure `twotower rerank train` prints as "mean loss of the last 10 steps"; ``saved_epoch`` the mean of
the epoch whose weights were saved.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from twotower.config import RerankTrainConfig, SearchConfig  # the defaults live with every other config
from twotower.errors import ConfigError, DataError, LengthPastModel
from twotower.results import PAD_ID, Results
from twotower.search.bm25 import BM25Config, check_bm25_config
from twotower.search.artefacts import (
    CROSS_ENCODER_META,
    base_chain,
    check_cross_encoder_dir,
    file_table,
    is_cross_encoder,
    out_check,
    recorded_worse_validation,
    trained_lengths,
    verify_model_dir,
)
from twotower.text.encoder import RerankSettings, readable_positions, warn_if_bf16_is_emulated
from twotower.utils.atomic import atomic_dir, atomic_write_json
from twotower.utils.folder_lock import writes_folder
from twotower.utils.extras import require
from twotower.utils.progress import RateLog, quiet_offline_hub
from twotower.utils.runtime import keeps_caller_state
from twotower.utils.shell import shell_arg
from twotower.utils.version import VERSION_KEY, installed_version

__all__ = ["CrossEncoderReranker", "RerankTrainConfig", "RerankValidation", "train_cross_encoder", "validate_reranking",
           "NO_LEARNING_SHARE", "against_chance", "barely_learned"]

logger = logging.getLogger(__name__)

#: pairs in the first batch scored under a time budget (``score(remaining=...)``) before any pair has been timed
FIRST_BUDGETED_BATCH = 4

#: a final loss this close (as a share) to the loss of a scorer that learned nothing is taken for no learning: a
#: cross-encoder that went 1.389 -> 1.345 against ln(4) = 1.386 took the NDCG@10 of its lists from 0.87 to 0.38
NO_LEARNING_SHARE = 0.05


def barely_learned(loss: float, chance: float) -> bool:
    """True when ``loss`` is within :data:`NO_LEARNING_SHARE` of ``chance``, the loss of a model that learned nothing
    (one rule for ``rerank train`` and ``search train``)."""
    return loss >= chance * (1.0 - NO_LEARNING_SHARE)


def against_chance(loss: float, chance: float) -> str:
    """``"within 1.2% of"`` or ``"118.2% above"``: how the warnings of :func:`barely_learned` place ``loss`` against
    ``chance``. A loss past chance (a diverged run, e.g. too high an lr) was said to be "within 118.2% of" it."""
    share = abs(chance - loss) / chance * 100
    return f"{share:.1f}% above" if loss > chance else f"within {share:.1f}% of"


#: steps whose mean loss is the "final loss" compared with chance: one step is only groups_per_step groups, whose
#: loss swings by more than the gap that tells learning from none
_TAIL_STEPS = 10


class CrossEncoderReranker:
    """Rerank with a sentence-transformers ``CrossEncoder`` directory.

    After :meth:`rerank`, ``last_seconds`` holds the wall time of the scoring
    and ``last_pairs`` the number of (query, document) pairs scored.
    ``settings.backend`` (:class:`~twotower.text.encoder.RerankSettings`) is the forward pass: ``torch`` (float32),
    ``torch-bf16`` (the transformer body of a copy in bfloat16, the bi-encoder's
    :mod:`twotower.text.bf16_backend`; the head and the logits stay float32) or ``auto`` (``torch-bf16`` where the
    CPU multiplies bfloat16 natively), resolved here once; ``backend`` is the resolved name. ``model`` stays the
    float32 model either way.
    """

    def __init__(self, model_path: str | os.PathLike[str], *, max_length: int | None = None,
                 batch_size: int = 32, settings: RerankSettings | None = None) -> None:
        """``max_length``: word pieces of each (query, document) pair; ``None``: the length the model was trained
        with (its marker), else ``RerankTrainConfig.max_length``."""
        settings = (settings or RerankSettings()).resolved()
        if settings.backend == "torch-bf16":
            warn_if_bf16_is_emulated("rerank", "--rerank-backend")
        CrossEncoder = require("sentence_transformers", "the cross-encoder reranker (--rerank)").CrossEncoder

        # a bi-encoder, an index or an empty folder is one line here, not a transformers traceback
        # named as the argument: the CLI (--rerank) and the service check the folder under their own names first
        p = check_cross_encoder_dir(model_path, "model_path")
        if is_cross_encoder(p):  # a plain transformers folder has no checksums to check
            verify_model_dir(p, CROSS_ENCODER_META, "cross_encoder",
                             fix=f"train it again with `twotower rerank train --out {shell_arg(p)}`")
        if (worse := recorded_worse_validation(p)) is not None:
            logger.warning("%s", worse)
        if max_length is None:
            max_length = trained_lengths(p).get("max_length", RerankTrainConfig.max_length)
        with quiet_offline_hub():  # no "Loading weights" bar in logs
            model = CrossEncoder(str(p), num_labels=1, max_length=int(max_length), device="cpu")
        self._init(model, batch_size, settings)
        logger.info("loaded cross-encoder %s (max_length %d, backend %s)", p, int(max_length), self.backend)

    def _init(self, model, batch_size: int, settings: RerankSettings | None) -> None:
        self.model = model
        self.settings = (settings or RerankSettings()).resolved()
        self._bf16: Any = None  # twotower.text.bf16_backend.Bf16Copy, made on first use
        #: word pieces of a (query, document) pair the model reads (None: unknown, a test double)
        length = getattr(model, "max_length", None)
        self.max_length: int | None = length if isinstance(length, int) else None
        self.batch_size = int(batch_size)
        self.last_seconds = 0.0
        self.last_pairs = 0
        self.last_truncation: dict[str, int] | None = None

    def truncation(self, pairs: Sequence[tuple[str, str]]) -> dict[str, int] | None:
        """``{"pairs", "cut", "max_length", "longest"}``: how many pairs the model reads only in part (it cuts
        the longer text of a pair at ``max_length`` word pieces, special tokens included); None when the model has
        no tokenizer or length to ask."""
        tok = getattr(self.model, "tokenizer", None)
        if tok is None or not callable(tok) or self.max_length is None:
            return None
        lengths = [0]
        for s in range(0, len(pairs), 1024):  # bounded memory for the ids, as TextEncoder.word_pieces
            part = pairs[s : s + 1024]
            ids = tok([q for q, _ in part], [d for _, d in part], truncation=False, verbose=False,
                      return_attention_mask=False, return_token_type_ids=False)["input_ids"]
            lengths.extend(len(x) for x in ids)
        return {"pairs": len(pairs), "cut": sum(n > self.max_length for n in lengths), "max_length": self.max_length,
                "longest": max(lengths)}

    @classmethod
    def from_model(cls, model, *, batch_size: int = 32,
                   settings: RerankSettings | None = None) -> "CrossEncoderReranker":
        """Wrap an in-memory model exposing ``predict(pairs, ...)`` (a CrossEncoder or a test double; torch-bf16
        needs a CrossEncoder)."""
        self = cls.__new__(cls)
        self._init(model, batch_size, settings)
        return self

    @property
    def backend(self) -> str:
        """The forward pass that scores pairs, resolved (``torch`` or ``torch-bf16``; never ``auto``)."""
        return self.settings.backend

    def _scoring_model(self):  # noqa: ANN202 - a CrossEncoder (or a test double)
        """The model that scores: ``model`` itself, or its bfloat16 copy (torch-bf16), remade if ``model``'s
        weights changed."""
        if self.backend != "torch-bf16":
            return self.model
        if self._bf16 is None:
            from twotower.text.bf16_backend import Bf16Copy, cross_encoder_body  # noqa: PLC0415

            self._bf16 = Bf16Copy(self.model, cross_encoder_body)
        return self._bf16.model()

    def score(self, pairs: Sequence[tuple[str, str]], *, show_progress: bool = False,
              check: Callable[[], None] | None = None,
              remaining: Callable[[], float] | None = None) -> np.ndarray:
        """Relevance logits ``[P]`` for (query, document) pairs.

        With ``check``, pairs are scored one batch at a time and ``check()`` runs before each batch, so a caller
        over its time budget (or whose client left) stops after at most one more batch. ``remaining()`` (seconds
        left of that budget, e.g. :meth:`~twotower.serving.budget.WorkBudget.remaining`) makes the batches near the
        deadline smaller, sized by the seconds a pair has taken, so the work runs past it by about one pair, not one
        whole batch; the first batch of a reranker that has scored nothing yet is at most
        :data:`FIRST_BUDGETED_BATCH` pairs. With ``show_progress``,
        one log line every ``EncoderSettings.progress_seconds`` (as text encoding reports), never a tqdm bar:
        reranking an evaluation split is minutes of CPU.
        """
        from twotower.text.encoder import EncoderSettings  # noqa: PLC0415

        if not pairs:
            return np.zeros(0, dtype=np.float32)
        pairs = list(pairs)
        model = self._scoring_model()
        step = len(pairs) if check is None and not show_progress else self.batch_size
        progress = RateLog(logger, "reranking", len(pairs), "pairs",
                           EncoderSettings.progress_seconds if show_progress else None, rate_unit="pairs", rate_digits=1)
        parts = []
        # seconds per pair, for sizing the batches near the deadline: the last call's, then this call's own
        rate = self.last_seconds / self.last_pairs if self.last_pairs and self.last_seconds > 0 else None
        start = 0
        while start < len(pairs):
            if check is not None:
                check()
            chunk, left = step, float("inf")
            if remaining is not None and np.isfinite(left := remaining()):
                # a whole batch begun just before the deadline ran past it by that batch's time (32 pairs of 256
                # word pieces: seconds of CPU past a 2 s --time-budget); near it, only what fits (at least a pair)
                chunk = min(step, FIRST_BUDGETED_BATCH) if rate is None else min(step, max(1, int(left / rate)))
            s = model.predict(pairs[start : start + chunk], batch_size=self.batch_size,
                                   show_progress_bar=False, convert_to_numpy=True, activation_fn=_identity())
            parts.append(np.asarray(s, dtype=np.float32).reshape(-1))
            if np.isfinite(left):
                took = left - remaining()
                rate = took / min(chunk, len(pairs) - start) if took > 0 else rate
            start += chunk
            progress.update(min(start, len(pairs)))
        return np.concatenate(parts)

    def rerank(
        self,
        queries: Sequence[str],
        results: Results,
        doc_texts: Sequence[str],
        *,
        top_n: int = SearchConfig.rerank_top,
        show_progress: bool = False,
        check: Callable[[], None] | None = None,
        count_cut: bool = False,
        remaining: Callable[[], float] | None = None,
    ) -> Results:
        """Reorder the first ``top_n`` hits of each row by cross-encoder score.

        Hits past ``top_n`` keep their first-stage order after the reranked
        ones (their scores are set below the lowest reranked score), so the
        output has the same width ``K`` as ``results`` and recall@K is unchanged.
        ``check`` runs between scoring batches, ``remaining`` sizes them near a deadline (see :meth:`score`). With ``count_cut``, ``last_truncation`` says
        how many (query, document) pairs were longer than ``max_length`` (:meth:`truncation`).
        """
        if len(queries) != len(results):
            raise DataError(f"{len(queries)} queries but {len(results)} result rows")
        if top_n < 1:
            raise ConfigError(f"top_n must be >= 1, got {top_n}")
        n = min(top_n, results.shape[1])
        head = results.ids[:, :n]  # [Q, n]
        pairs, where = [], []
        for q in range(len(queries)):
            for j in range(n):
                if head[q, j] != PAD_ID:
                    pairs.append((queries[q], doc_texts[int(head[q, j])]))
                    where.append((q, j))
        if count_cut:
            self.last_truncation = self.truncation(pairs)
        t0 = time.perf_counter()
        s = self.score(pairs, show_progress=show_progress, check=check, remaining=remaining)
        self.last_seconds = time.perf_counter() - t0
        self.last_pairs = len(pairs)
        ids = results.ids.copy()
        scores = np.full(results.shape, -np.inf, dtype=np.float32)  # [Q, K]
        head_scores = np.full((len(queries), n), -np.inf, dtype=np.float32)
        for (q, j), v in zip(where, s):
            head_scores[q, j] = v
        for q in range(len(queries)):
            order = np.lexsort((head[q], -head_scores[q]))  # by CE score, ties by row id
            ids[q, :n] = head[q, order]
            scores[q, :n] = head_scores[q, order]
            valid = np.isfinite(scores[q, :n])
            floor = float(scores[q, :n][valid].min()) if valid.any() else 0.0
            tail = np.arange(results.shape[1] - n, dtype=np.float32)
            scores[q, n:] = np.where(ids[q, n:] != PAD_ID, floor - 1.0 - tail, -np.inf)
        return Results(ids, scores)


def _freeze_bottom(model, n: int) -> None:
    """Freeze the embeddings and the first ``n`` transformer layers of a BERT-style cross-encoder."""
    if n == 0:
        return
    base = model.model.base_model  # e.g. BertModel inside BertForSequenceClassification
    layers = base.encoder.layer
    if n > len(layers):
        raise ConfigError(f"freeze_layers={n} but the model has {len(layers)} layers")
    for module in [base.embeddings, *layers[:n]]:
        for p in module.parameters():
            p.requires_grad_(False)


def _tail_summary(history: Sequence[float], chance: Sequence[float], sizes: Sequence[Sequence[int]]) -> dict[str, Any]:
    """``{"steps", "loss", "chance_loss", "group_sizes": [min, max]}`` over the last ``_TAIL_STEPS`` steps."""
    n = min(_TAIL_STEPS, len(history))
    seen = [g for step in sizes[-n:] for g in step]
    return {"steps": n, "loss": float(np.mean(history[-n:])), "chance_loss": float(np.mean(chance[-n:])),
            "group_sizes": [min(seen), max(seen)]}


def _load_fresh_head(base_dir: Path, max_length: int):  # noqa: ANN202 - sentence_transformers.CrossEncoder
    """The base model with a new one-output relevance head. transformers reports the head's weights as MISSING
    in a (coloured, on a terminal) LOAD REPORT table that reads like an error; for a new head it is the
    expected state, so the report is silenced for this load and one plain line says what happened. So is
    sentence-transformers' "WARNING ... Converting SentenceTransformer model ... to CrossEncoder": that is the
    point of this load, and the line below says it."""
    CrossEncoder = require("sentence_transformers", "training a cross-encoder").CrossEncoder
    from transformers.utils import logging as hf_logging  # noqa: PLC0415 - installed with sentence-transformers

    before = hf_logging.get_verbosity()
    st_logger = logging.getLogger("sentence_transformers")
    st_before = st_logger.level
    hf_logging.set_verbosity_error()
    st_logger.setLevel(logging.ERROR)
    try:
        model = CrossEncoder(str(base_dir), num_labels=1, max_length=max_length, device="cpu")
    finally:
        hf_logging.set_verbosity(before)
        st_logger.setLevel(st_before)
    logger.info("cross-encoder from %s: a new relevance head (one output), initialised at random, learns with "
                "the transformer", base_dir)
    return model


@dataclass(frozen=True)
class RerankValidation:
    """Held-out queries with the first stage's lists for them (``Results``, corpus rows) and their relevant rows: the
    order reranking is judged against. ``top_n``: the candidates reranked, as ``search evaluate --rerank-top``."""

    queries: list[str]
    first_stage: Results
    relevant: list[np.ndarray]
    top_n: int = SearchConfig.rerank_top
    first_stage_name: str = "bm25"

    def __post_init__(self) -> None:
        # built by hand (train_cross_encoder(validation=...)), a mismatch was found only when the first epoch had
        # trained and its lists were reranked: "3 queries but 2 result rows", naming neither this set nor the fix
        from twotower.search.validation import checked_relevant  # noqa: PLC0415

        relevant = checked_relevant(self.queries, self.relevant, "RerankValidation")
        if not isinstance(self.first_stage, Results) or len(self.first_stage) != len(self.queries):
            got = f"{len(self.first_stage)} rows" if isinstance(self.first_stage, Results) else type(self.first_stage).__name__
            raise ConfigError(f"RerankValidation.first_stage must be Results with one row per query "
                              f"({len(self.queries)}), got {got}")
        if isinstance(self.top_n, bool) or not isinstance(self.top_n, (int, np.integer)) or self.top_n < 1:
            raise ConfigError(f"RerankValidation.top_n: must be a positive integer, got {self.top_n!r}")
        object.__setattr__(self, "queries", list(self.queries))
        object.__setattr__(self, "relevant", relevant)


def _check_validation_rows(validation: RerankValidation, n_docs: int) -> None:
    """The corpus rows ``validation`` names lie in ``doc_texts``, checked before training: a first-stage row past it
    failed with an IndexError once the first epoch had trained, and a relevant row past it, never retrieved, scored
    every epoch 0 without a word (as finetune_bi_encoder refuses it)."""
    for what, rows in (("first_stage", validation.first_stage.ids[validation.first_stage.ids != PAD_ID]),
                       ("relevant", np.concatenate(validation.relevant))):
        if rows.size and int(rows.max()) >= n_docs:
            raise DataError(f"validation.{what} rows must lie in [0, {n_docs}), the corpus rows")


def validate_reranking(reranker: "CrossEncoderReranker", val: RerankValidation,
                       doc_texts: Sequence[str]) -> dict[str, Any]:
    """NDCG@10 of the held-out queries in the first stage's order and reranked (its top ``val.top_n``), and whether
    reranking made it worse: a loss below chance did not say it (9.8% below, and test NDCG@10 0.8962 -> 0.2055)."""
    from twotower.search.validation import NDCG_K, ndcg10  # noqa: PLC0415

    t0 = time.perf_counter()
    reranked = reranker.rerank(val.queries, val.first_stage, doc_texts, top_n=val.top_n)
    before, after = ndcg10(val.first_stage.ids, val.relevant), ndcg10(reranked.ids, val.relevant)
    return {"queries": len(val.queries), "pairs": int(sum(r.size for r in val.relevant)), "metric": f"NDCG@{NDCG_K}",
            "first_stage": val.first_stage_name, "top_n": val.top_n, "without_rerank": before, "reranked": after,
            "worse": after < before, "seconds": round(time.perf_counter() - t0, 1)}


def _holdout_validation(queries: Sequence[str], positive_rows: Sequence[int], negatives: Sequence[np.ndarray],
                       doc_texts: Sequence[str], valid_frac: float, seed: int,
                       bm25: BM25Config | None) -> tuple[list[str], list[int], list[np.ndarray], RerankValidation]:
    """``(queries, positive_rows, negatives, validation)``: the pairs left once ``valid_frac`` of the queries are held
    out (:func:`~twotower.search.validation.hold_out`, seeded by ``seed``), and the held-out queries with BM25's lists
    over ``doc_texts`` (``bm25``'s settings; None: BM25Config's defaults), the first stage ``rerank train
    --valid-frac`` judges reranking against."""
    from twotower.search.bm25 import BM25Retriever  # noqa: PLC0415
    from twotower.search.validation import hold_out  # noqa: PLC0415

    keep, held = hold_out(queries, positive_rows, valid_frac, seed, name="RerankTrainConfig.valid_frac")
    if keep.size < 1:
        raise ConfigError(f"RerankTrainConfig.valid_frac: {valid_frac:g} holds out all {len(queries)} pairs; give a "
                          "smaller RerankTrainConfig.valid_frac")
    logger.info("valid_frac %g: %d of the queries (%d pairs) held out for validation, %d pairs left to train on",
                valid_frac, len(held.queries), held.pairs, keep.size)
    retriever = BM25Retriever(bm25).fit(list(doc_texts), [str(i) for i in range(len(doc_texts))])
    first = retriever.search(held.queries, max(SearchConfig.rerank_top, 10))
    return ([queries[i] for i in keep], [int(positive_rows[i]) for i in keep], [negatives[i] for i in keep],
            RerankValidation(held.queries, first, held.relevant, top_n=SearchConfig.rerank_top))


def _with_bm25(source: Mapping[str, Any] | None, bm25: BM25Config | None) -> Mapping[str, Any] | None:
    """``source`` with ``bm25``'s settings in its ``mining`` (as `rerank train` records them), checked as
    finetune_bi_encoder checks its ``bm25``; ``source`` itself when ``bm25`` is None."""
    check_bm25_config(bm25)
    if bm25 is None:
        return source
    mining = dict((source or {}).get("mining") or {})
    if mining.setdefault("retriever", "bm25") != "bm25":  # recorded as the mining's settings, it would be false
        raise ConfigError(f"bm25= gives the settings of BM25 mining, and source's mining retriever is "
                          f"{mining['retriever']!r}: pass bm25 with negatives mined by BM25, or leave it out")
    return {**dict(source or {}), "mining": {**mining, "bm25": asdict(bm25)}}


def _identity():
    import torch  # noqa: PLC0415

    return torch.nn.Identity()


@writes_folder("out_dir", "train_cross_encoder",
               check=out_check("cross-encoder", is_cross_encoder, CROSS_ENCODER_META))
@keeps_caller_state(rng=True)
@quiet_offline_hub()  # the base model's load and the trained model's save: no "Loading weights" / "Writing model shards"
def train_cross_encoder(
    queries: Sequence[str],
    positive_rows: Sequence[int],
    negatives: Sequence[np.ndarray],
    doc_texts: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    config: RerankTrainConfig | None = None,
    base: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    source: Mapping[str, Any] | None = None,
    validation: RerankValidation | None = None,
    threads: int | None = None,
    bm25: BM25Config | None = None,
    setting_names: Mapping[str, str] | None = None,
    force: bool = False,
) -> CrossEncoderReranker:
    """Train a cross-encoder from ``base`` (default MiniLM) and save it to ``out_dir``.

    ``negatives[i]`` are hard-negative rows for pair ``i`` (mined, e.g. from
    BM25 with a false-negative filter); pairs with no negatives are skipped. ``source`` (e.g. the BEIR folder,
    split and mining settings) is recorded in the saved marker with the pair and document counts. ``validation``:
    held-out queries whose NDCG@10 reranked is set against the first stage's order after each epoch
    (:func:`validate_reranking`); the best epoch's weights are saved, training stops after ``config.patience``
    epochs without a better one, and the best epoch's figures (with every epoch's, ``best_epoch``,
    ``stopped_early``) are recorded in the marker's ``"validation"``, warned about when reranking is worse.
    ``None`` with ``config.valid_frac > 0``: that share of the queries is held out here
    (:func:`~twotower.search.validation.hold_out`, as ``rerank train --valid-frac`` does) and not trained on, judged
    against BM25's order over ``doc_texts`` (its top ``SearchConfig.rerank_top`` reranked).

    ``threads``: torch's, FAISS's and the BLAS pools' thread count during the call (``rerank train --threads``; None:
    left as they are). The thread counts and the global random generators it seeds with ``config.seed`` are put back
    as the caller had them when it returns.

    ``bm25``: the BM25 settings the ``negatives`` were mined with (``rerank train --token-pattern``), recorded in the
    marker's ``data.mining`` under ``"bm25"``, and those of the BM25 the queries held out by ``config.valid_frac`` are
    judged against; None: BM25Config's defaults (nothing recorded). Refused when ``source``'s ``mining`` names
    another retriever. ``setting_names``: what a divergence's error calls ``lr`` (default ``RerankTrainConfig.lr``;
    ``rerank train`` passes ``--lr``). ``out_dir`` is replaced whole: an earlier cross-encoder there holding files it
    did not write is refused, before any work, unless ``force`` (``rerank train --force``).
    """

    import torch  # noqa: PLC0415

    from twotower.losses import ListwiseSoftmax, LossBatch  # noqa: PLC0415
    from twotower.search.checks import check_corpus_rows  # noqa: PLC0415
    from twotower.text.encoder import default_model_path  # noqa: PLC0415
    from twotower.training.diagnostics import check_finite_output  # noqa: PLC0415
    from twotower.training.loop import TrainLoop  # noqa: PLC0415
    from twotower.utils.runtime import seed_everything, set_threads  # noqa: PLC0415

    cfg = config or RerankTrainConfig()
    if not (len(queries) == len(positive_rows) == len(negatives)):
        raise DataError("queries, positive_rows and negatives need the same length")
    check_corpus_rows(positive_rows, len(doc_texts), "positive_rows")
    for i, rows in enumerate(negatives):
        check_corpus_rows(rows, len(doc_texts), f"negatives[{i}]")
    source = _with_bm25(source, bm25)
    if validation is not None:
        _check_validation_rows(validation, len(doc_texts))
    if validation is None and cfg.valid_frac > 0:
        # valid_frac was ignored without a word from Python (the marker's validation null), as the CLI holds out
        queries, positive_rows, negatives, validation = _holdout_validation(queries, positive_rows, negatives,
                                                                           doc_texts, cfg.valid_frac, cfg.seed, bm25)
    rng = seed_everything(cfg.seed)
    set_threads(threads)
    t0 = time.perf_counter()
    # absolute, as the marker's data.beir: the marker is read from other folders than the one training ran in
    base_dir = Path(base).resolve() if base is not None else default_model_path()
    model = _load_fresh_head(base_dir, cfg.max_length)
    # past the position embeddings the first forward pass failed with a tensor-size RuntimeError (as
    # text.encoder.check_max_length says for the bi-encoder): refused here, before any step
    limit = readable_positions(model.model)
    if limit is not None and limit < cfg.max_length:
        raise LengthPastModel("max_length", cfg.max_length, limit, str(base or "all-MiniLM-L6-v2"))
    _freeze_bottom(model, cfg.freeze_layers)
    usable = [i for i in range(len(queries)) if len(negatives[i])]
    if not usable:
        raise DataError("no pair has a hard negative; mine some with mine_hard_negatives first")
    per_epoch = min(len(usable), cfg.max_groups or len(usable))
    steps_per_epoch = int(np.ceil(per_epoch / cfg.groups_per_step))
    total = steps_per_epoch * cfg.epochs
    params = [p for p in model.parameters() if p.requires_grad]
    head = {id(p) for name, p in model.model.named_parameters() if "classifier" in name or "pooler" in name}
    # AdamW (a larger lr for the fresh head), linear warm-up then decay, clipping, progress: the one training loop
    loop = TrainLoop([{"params": [p for p in params if id(p) not in head], "lr": cfg.lr},
                      {"params": [p for p in params if id(p) in head], "lr": cfg.head_lr}],
                     lr=cfg.lr, weight_decay=cfg.weight_decay, grad_clip=cfg.grad_clip, total_steps=total,
                     warmup_frac=cfg.warmup_frac, decay="linear", progress=show_progress,
                     # a Python caller set RerankTrainConfig.lr, not `rerank train`'s flag: the error names it
                     lr_setting={"lr": "RerankTrainConfig.lr", **(setting_names or {})}["lr"])
    loss_fn = ListwiseSoftmax(cfg.temperature)
    # the pairs mining left without a negative are not trained on: said with the count, as mining said its shortfall
    skipped = len(queries) - len(usable)
    left_out = f" of {len(queries)} pairs ({skipped} with no hard negative left out)" if skipped else ""
    logger.info("training cross-encoder from %s: %d groups%s x (1 + %d) per epoch, %d steps, max_length %d, "
                "%d trainable parameters", base_dir, per_epoch, left_out, cfg.negatives_per_query, total,
                cfg.max_length, sum(p.numel() for p in params))

    # per step, the loss of a constant scorer on its groups (mean ln of the group sizes): a group short of
    # negatives is easier, so the reference is counted on the groups actually scored
    chance: list[float] = []
    sizes_seen: list[list[int]] = []
    last_pairs: list[tuple[str, str]] = []  # the latest step's (query, document) pairs, scored again after its epoch

    def closure(group_rows: np.ndarray, epoch: int) -> tuple[float, int]:
        """Score the groups ``[positive, negatives...]`` of pairs ``group_rows[G]`` jointly; listwise loss; backward."""
        pairs, sizes = [], []
        for i in group_rows:
            negs = np.asarray(negatives[i])
            take = [int(negs[(epoch * cfg.negatives_per_query + j) % negs.size])
                    for j in range(min(cfg.negatives_per_query, negs.size))]
            group = [positive_rows[i]] + take
            pairs.extend((queries[i], doc_texts[r]) for r in group)
            sizes.append(len(group))
        chance.append(float(np.mean(np.log(sizes))))
        sizes_seen.append(sizes)
        last_pairs[:] = pairs
        scores = model(model.preprocess(pairs))["scores"].view(-1, 1)  # [P, 1]
        loss, _ = loss_fn(scores, None, LossBatch(group_sizes=sizes))
        loss.backward()
        return float(loss.detach()), len(group_rows)

    history: list[float] = []
    val = _EpochValidator(model, validation, doc_texts, cfg) if validation is not None else None
    model.train()
    for epoch in range(cfg.epochs):
        order = rng.permutation(usable)[:per_epoch]
        with loop.epoch(epoch + 1, n_batches=steps_per_epoch, n_examples=len(order),
                        desc=f"cross-encoder epoch {epoch + 1}") as run:
            for s0 in range(0, len(order), cfg.groups_per_step):
                history.append(run.step(lambda g=order[s0 : s0 + cfg.groups_per_step]: closure(g, epoch)))
        # the last step's pairs scored again: an update can leave finite weights that score NaN (--lr 1e12), and the
        # cross-encoder was saved so, said to have "barely learned"
        model.eval()
        with torch.no_grad():
            check_finite_output(model(model.preprocess(last_pairs))["scores"], "the cross-encoder's scores", epoch + 1,
                                cfg.lr, lr_setting=loop.lr_setting)
        model.train()
        if val is not None and val.after_epoch(epoch + 1):
            break  # patience ran out: the best epoch's weights are restored below
        model.train()
    model.eval()
    checked = None
    last_epoch = saved_epoch = len(history) // steps_per_epoch  # the epochs trained (patience may stop early)
    if val is not None:
        checked = val.finish()
        _log_validation(checked)
        saved_epoch = checked["best_epoch"]
    # the saved epoch's own steps: "final_loss" and "tail" are the last epoch's, which per-epoch validation may not keep
    saved = slice((saved_epoch - 1) * steps_per_epoch, saved_epoch * steps_per_epoch)
    chain = base_chain(base_dir)  # before the swap: retrained in place, base_dir's marker is the one replaced
    with atomic_dir(out_dir) as tmp:
        model.save(str(tmp), create_model_card=False, safe_serialization=True)
        atomic_write_json(tmp / CROSS_ENCODER_META, {
            "format": 2, "kind": "cross_encoder", "base": str(base_dir), "base_chain": chain[1:],
            VERSION_KEY: installed_version(),  # absent from a marker written before it was recorded
            "config": asdict(cfg),
            "steps": len(history), "first_loss": history[0], "final_loss": history[-1],
            # "final_loss" alone read as the printed "final loss", the tail's mean: the last step's, named so
            "final_step_loss": history[-1],
            "final_epoch_mean_loss": float(np.mean(history[(last_epoch - 1) * steps_per_epoch:])),
            # the mean loss of the last steps next to a constant scorer's on the same groups (what "no learning"
            # would give), so a cross-encoder that learned nothing is told apart before it reorders any list
            "tail": _tail_summary(history, chance, sizes_seen),
            # the epoch final_loss, final_epoch_mean_loss and tail describe, and the epoch whose weights are saved (the
            # best validated one)
            "last_epoch": last_epoch,
            "saved_epoch": {"epoch": saved_epoch, "steps": len(history[saved]),
                            "mean_loss": float(np.mean(history[saved])), "chance_loss": float(np.mean(chance[saved]))},
            "seconds": round(time.perf_counter() - t0, 1),
            "data": {**dict(source or {}), "pairs": len(queries), "groups_used": len(usable),
                     "documents": len(doc_texts)},
            # held-out NDCG@10 reranked against the first stage's own order (None: no queries held out)
            "validation": checked,
            "files": file_table(tmp, CROSS_ENCODER_META),  # every file's sha256, checked when it is loaded
        })
    return CrossEncoderReranker(out_dir, max_length=cfg.max_length)


class _EpochValidator:
    """The held-out queries reranked after each epoch (:func:`validate_reranking`), the best epoch's weights kept in
    memory, and early stopping after ``cfg.patience`` epochs without a better NDCG@10.

    There is no "before training" to fall back on, unlike the bi-encoder's: the relevance head starts at random, so
    the model before the first epoch ranks by noise. The best epoch is kept, and the warning of :func:`_log_validation`
    says when even it reranks worse than the first stage's own order."""

    def __init__(self, model, validation: RerankValidation, doc_texts: Sequence[str], cfg: RerankTrainConfig) -> None:  # noqa: ANN001
        from twotower.training.loop import EarlyStopping  # noqa: PLC0415

        self.model, self.validation, self.doc_texts, self.cfg = model, validation, doc_texts, cfg
        self.stopper = EarlyStopping(cfg.patience)
        self.epochs: list[dict[str, float]] = []
        self.best_check: dict[str, Any] | None = None
        self.best_state: dict | None = None

    def after_epoch(self, epoch: int) -> bool:
        """Score the epoch just trained; keep its weights if best; True when training should stop."""
        self.model.eval()
        v = validate_reranking(CrossEncoderReranker.from_model(self.model, batch_size=32), self.validation,
                               self.doc_texts)
        self.epochs.append({"epoch": epoch, "reranked": v["reranked"], "seconds": v["seconds"]})
        s = self.stopper
        if s.update(v["reranked"], epoch):
            self.best_check = v
            self.best_state = {k: t.detach().clone() for k, t in self.model.state_dict().items()}
        logger.info("epoch %d: validation NDCG@10 reranked %.4f (%s; %s order %.4f)", epoch, v["reranked"],
                    "new best" if s.best_epoch == epoch else f"best {s.best:.4f} at epoch {s.best_epoch}",
                    v["first_stage"], v["without_rerank"])
        if s.stop and epoch < self.cfg.epochs:
            logger.info("early stopping after epoch %d: %d epochs without a better validation NDCG@10 than epoch "
                        "%d's %.4f (patience %d)", epoch, s.bad, s.best_epoch, s.best, self.cfg.patience)
        return s.stop

    def finish(self) -> dict[str, Any]:
        """Load the best epoch's weights into the model; the marker's "validation": the best epoch's
        :func:`validate_reranking` record, with every epoch's score, which was kept and whether training stopped
        early."""
        self.model.load_state_dict(self.best_state)
        return {**self.best_check, "epochs": self.epochs, "best_epoch": self.stopper.best_epoch,
                "patience": self.cfg.patience, "stopped_early": len(self.epochs) < self.cfg.epochs,
                "seconds": round(sum(e["seconds"] for e in self.epochs), 1)}


def _log_validation(v: Mapping[str, Any]) -> None:
    """One line for the held-out NDCG@10 with and without reranking; a warning when reranking lowers it."""
    line = (f"validation NDCG@10 on {v['queries']} held-out queries: {v['first_stage']} order {v['without_rerank']:.4f}, "
            f"reranked (top {v['top_n']}) {v['reranked']:.4f}")
    if "best_epoch" in v:  # validated after each epoch: the weights kept are the best epoch's
        line += f" (epoch {v['best_epoch']} of {len(v['epochs'])}, the best, kept)"
    if not v["worse"]:
        logger.info("%s", line)
        return
    logger.warning("%s: reranking with this cross-encoder makes the held-out lists WORSE than the %s order it "
                   "reranks; do not use it as it is. Train with more epochs, another learning rate or on more "
                   "training queries", line, v["first_stage"])
