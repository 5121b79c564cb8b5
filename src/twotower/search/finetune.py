"""Fine-tune a text two-tower (bi-encoder) with in-batch softmax and hard negatives.

Query tower and document tower start as two copies of the same
sentence-transformers model (``shared=True`` ties them). Each step::

    q = normalize(query_tower(queries))            [B, D]
    c = normalize(doc_tower(positives ++ hard))    [B + H, D]
    loss = InBatchSoftmax(q, c)                    row b's positive is column b

Other positives in the batch and the mined hard negatives are the negatives;
a candidate judged relevant to the row's query (its positive, or another relevant document) is masked.

``train_doc_tower=False`` freezes the document tower: the corpus is encoded
once (cached) and only the query tower learns. That is ~10x cheaper on a CPU
(short queries instead of 256-token abstracts, no corpus re-encoding) and
allows ``corpus_negatives=True`` — every corpus document is a negative, i.e.
a full softmax over the corpus.

Saved layout (``save_pretrained``-style, safetensors)::

    out_dir/twotower_bi_encoder.json   config, base, history
    out_dir/query/                     sentence-transformers directory
    out_dir/doc/                       (absent when shared)

The marker's losses: ``final_loss`` is the last step's loss alone (one batch, perhaps the epoch's short remainder:
a batch of one pair and no hard negatives scores 0), also written ``final_step_loss``; ``epoch_losses`` holds each
epoch's mean step loss beside a no-learning model's, and ``final_epoch_mean_loss`` the last epoch's mean, the figure
`twotower search train` prints ("mean loss ..., epoch N 0.6516").
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from twotower.config import FinetuneConfig  # the defaults live with every other config
from twotower.errors import ConfigError, DataError
from twotower.search.artefacts import (
    BI_ENCODER_META,
    base_chain,
    file_table,
    is_bi_encoder,
    out_check,
    trained_backend,
    verify_model_dir,
)
from twotower.search.bm25 import BM25Config, check_bm25_config
from twotower.search.negatives import MiningConfig, MiningReport, mine_hard_negatives
from twotower.search.validation import NDCG_K, ValidationSet, hold_out, ndcg10
from twotower.text.encoder import (
    BACKEND_CHOICES,
    EncoderSettings,
    TextEncoder,
    check_max_length,
    default_model_path,
    load_text_encoder,
    truncation_report,
)
from twotower.utils.atomic import atomic_dir, atomic_write_json
from twotower.utils.folder_lock import writes_folder
from twotower.utils.progress import quiet_offline_hub
from twotower.utils.runtime import keeps_caller_state
from twotower.utils.shell import shell_arg
from twotower.utils.version import VERSION_KEY, installed_version

__all__ = [
    "FinetuneConfig",
    "FinetuneResult",
    "base_towers",
    "encoder_settings",
    "finetune_bi_encoder",
    "load_bi_encoder",
    "load_dense_retriever",
    "evaluate_loss",
    "epoch_losses",
    "META_FILE",
]

logger = logging.getLogger(__name__)

META_FILE = BI_ENCODER_META  # one name, declared with the other markers


@dataclass
class FinetuneResult:
    query_encoder: TextEncoder
    doc_encoder: TextEncoder
    out_dir: Path
    history: list[dict] = field(default_factory=list)  # one row per step
    mining_reports: list[MiningReport] = field(default_factory=list)
    seconds: float = 0.0
    validation: dict | None = None  # the marker's "validation" (None: no queries held out)


def _embed(model, texts: list[str], max_length: int):
    """Differentiable L2-normalised embeddings ``[B, D]`` of ``texts``."""
    import torch.nn.functional as F  # noqa: PLC0415

    model.max_seq_length = max_length
    # newer sentence-transformers deprecate tokenize for preprocess, with a warning in the user's log
    prepare = getattr(model, "preprocess", None) or model.tokenize
    features = prepare(texts)
    return F.normalize(model(features)["sentence_embedding"], dim=-1)


@contextlib.contextmanager
def _eval_mode(model):  # noqa: ANN001, ANN202 - a torch module; a context
    """``model`` in eval mode inside (no dropout, no random draw), its own mode again after."""
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


def _batches(n: int, batch_size: int, keys: list[str], rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches in which no query text appears twice (its other positive would be a negative)."""
    order = list(rng.permutation(n))
    out: list[np.ndarray] = []
    while order:
        batch, seen, rest = [], set(), []
        for i in order:
            if len(batch) < batch_size and keys[i] not in seen:
                batch.append(i)
                seen.add(keys[i])
            else:
                rest.append(i)
        out.append(np.asarray(batch, dtype=np.int64))
        order = rest
    return out


def _other_known_positives(batch_queries: Sequence[str], cand_rows: np.ndarray,
                           known: Mapping[str, set[int]]) -> np.ndarray:
    """``[B, N]`` True where candidate ``j`` is a document judged relevant to row ``b``'s query, except column ``b``
    (the row's own positive).

    The loss's accidental-hit mask compares a candidate with the row's *own* positive only: a query with two relevant
    documents, in a batch holding the other one (another pair's positive or hard negative, or any corpus row with
    ``corpus_negatives``), was pushed away from a document it is judged relevant to.
    """
    mask = np.zeros((len(batch_queries), cand_rows.size), dtype=bool)
    for b, q in enumerate(batch_queries):
        rel = known.get(q)
        if rel:
            mask[b] = np.isin(cand_rows, np.fromiter(rel, dtype=np.int64, count=len(rel)))
            mask[b, b] = False  # column b is the positive the row is trained towards
    return mask


def _as_encoder(model, name: str, settings: EncoderSettings) -> TextEncoder:
    """An encoder over a model being trained, on the torch backend ``settings`` name (torch or torch-bf16):
    an ONNX backend would export the moving weights again at every re-mining, so it gets plain torch."""
    backend = settings.backend if settings.backend in ("torch", "torch-bf16") else "torch"
    return TextEncoder(model, model_id=f"{name}@in-memory-{id(model):x}-{time.time_ns()}",
                       settings=replace(settings, backend=backend))


def encoder_settings(model: str | os.PathLike[str] | None, backend: str | None = None,
                     threads: int | None = EncoderSettings.threads) -> EncoderSettings | None:
    """The :class:`~twotower.text.EncoderSettings` the Python API's ``encoder_backend`` / ``encoder_threads`` name,
    as ``--encoder-backend`` / ``--encoder-threads`` do: each one given wins; one not given is read as the commands
    read it (``TWOTOWER_ENCODER_BACKEND``, else the backend ``model`` was fine-tuned through, else
    ``EncoderSettings.backend``; ``TWOTOWER_ENCODER_THREADS``, else ``EncoderSettings.threads``). None when neither
    is given: :func:`load_bi_encoder` resolves them so (and says which backend a fine-tuned model brings).
    Checked now, before any data is read."""
    if backend is None and threads is None:
        return None
    if backend is not None and backend not in BACKEND_CHOICES:
        # EncoderSettings' own message sent a Python caller to --encoder-backend or TWOTOWER_ENCODER_BACKEND
        raise ConfigError(f"encoder_backend must be one of {', '.join(BACKEND_CHOICES)}, got {backend!r}")
    if threads is not None:
        try:
            EncoderSettings(threads=threads)
        except ConfigError as e:
            raise ConfigError(str(e).replace("encoder threads", "encoder_threads", 1)) from None
    # the environment is read only for what is not given: TWOTOWER_ENCODER_BACKEND=onx refused an explicit
    # encoder_backend="torch" (EncoderSettings.from_env checked both variables whatever the call gave)
    return EncoderSettings(backend=EncoderSettings.env_backend(trained_backend(model)) if backend is None else backend,
                           threads=EncoderSettings.env_threads() if threads is None else threads)


def base_towers(base: str | os.PathLike[str] | None,
                settings: EncoderSettings | None = None) -> tuple[TextEncoder, TextEncoder, Path]:
    """``(query encoder, document encoder, document tower folder)`` that a fine-tuning from ``base`` starts with.

    ``base``: None (the packaged MiniLM), a sentence-transformers folder (both towers start from it), or a
    :func:`finetune_bi_encoder` output, whose towers go on training: read as one sentence-transformers folder it was a
    transformers "Unrecognized model" traceback, though ``--base`` accepts it. Encoded on the environment's backend,
    as a plain base is.
    """
    if base is None or not is_bi_encoder(base):
        enc = load_text_encoder(base, settings=settings)
        return enc, enc, Path(base) if base is not None else default_model_path()
    q, d = load_bi_encoder(base, settings=settings or EncoderSettings.from_env())
    doc_dir = Path(base) / "doc"
    return q, d, doc_dir if doc_dir.is_dir() else Path(base) / "query"


@writes_folder("out_dir", "finetune_bi_encoder",
               check=out_check("bi-encoder", is_bi_encoder, BI_ENCODER_META, inputs=("cache_dir",)))
@keeps_caller_state(rng=True)
@quiet_offline_hub()  # the models' saves: no "Writing model shards" bar (their loads hold it themselves)
def finetune_bi_encoder(
    queries: Sequence[str],
    positive_rows: Sequence[int],
    doc_texts: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    config: FinetuneConfig | None = None,
    base: str | os.PathLike[str] | None = None,
    negatives: Sequence[np.ndarray] | None = None,
    mining: MiningConfig | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    source: Mapping[str, Any] | None = None,
    mining_names: Mapping[str, str] | None = None,
    validation: ValidationSet | None = None,
    encoder_backend: str | None = None,
    encoder_threads: int | None = EncoderSettings.threads,
    threads: int | None = None,
    bm25: BM25Config | None = None,
    setting_names: Mapping[str, str] | None = None,
    force: bool = False,
) -> FinetuneResult:
    """Train on ``(queries[i], doc_texts[positive_rows[i]])`` pairs and save to ``out_dir``.

    ``negatives[i]`` are mined hard-negative rows for pair ``i`` (see
    :func:`~twotower.search.negatives.mine_hard_negatives`, hardest first); the epochs
    use them round-robin from the hardest on (with ``refresh_negatives``, each
    re-mined list from its hardest). ``base`` is the starting model (default all-MiniLM-L6-v2). Seeded by ``config.seed``. ``source`` (e.g. ``{"beir": DIR, "split": "train"}``)
    is recorded in the saved marker with the pair and document counts and the mining settings. ``mining_names``:
    what the re-mining summaries call the settings that fill a short query (``mine_hard_negatives``'s ``names``).
    ``setting_names``: what a divergence's error calls ``lr`` and ``temperature`` (default ``FinetuneConfig.lr``,
    ``FinetuneConfig.temperature``; ``search train`` passes its flags).

    ``validation``: held-out queries scored by dense NDCG@10 before training (epoch 0) and after each epoch; the best
    epoch's towers are saved (the starting ones, with a warning, when no epoch beat them) and training stops after
    ``config.patience`` epochs without a new best. ``None`` with ``config.valid_frac > 0``: that share of the
    queries is held out here (:func:`~twotower.search.validation.hold_out`) and not trained on. Both at once are
    refused, unless ``validation`` is the hold-out of that very share (``hold_out(..., config.valid_frac, ...)``,
    as ``search train`` draws it): one of them would be ignored.

    ``encoder_backend`` / ``encoder_threads``: the towers' forward pass (``--encoder-backend`` /
    ``--encoder-threads``; :func:`encoder_settings`: None reads ``TWOTOWER_ENCODER_BACKEND``, else
    ``EncoderSettings.backend``; a model being trained runs on torch, or torch-bf16). ``threads``: torch's, FAISS's
    and the BLAS pools' thread count during the call (``--threads``; None: left as they are). The thread counts and
    the global random generators it seeds with ``config.seed`` are put back as the caller had them when it returns.

    ``bm25``: with ``config.mining_retriever='bm25'``, the BM25 settings the ``negatives`` were mined with
    (``search train --token-pattern``), recorded in the marker's ``mining``; None: BM25Config's defaults.

    ``out_dir`` is replaced whole: an earlier bi-encoder there holding files it did not write is refused, before any
    work, unless ``force`` (``search train --force``): they would be removed with it.
    """
    import torch  # noqa: PLC0415

    from twotower.losses import InBatchSoftmax, LossBatch  # noqa: PLC0415
    from twotower.losses.base import temperature_suspect  # noqa: PLC0415
    from twotower.training.diagnostics import check_finite_output  # noqa: PLC0415
    from twotower.training.loop import TrainLoop  # noqa: PLC0415
    from twotower.utils.runtime import seed_everything, set_threads  # noqa: PLC0415

    from twotower.search.checks import check_corpus_rows, check_query_texts  # noqa: PLC0415

    cfg = config or FinetuneConfig()
    cfg = replace(cfg, refresh_negatives=cfg.re_mines)  # null resolved, so the marker records what was done
    check_bm25_config(bm25)
    if bm25 is not None and cfg.mining_retriever != "bm25":  # recorded as the mining's settings, it would be false
        raise ConfigError(f"bm25= gives the settings of BM25 mining, and FinetuneConfig.mining_retriever is "
                          f"{cfg.mining_retriever!r}: pass bm25 with mining_retriever='bm25', or leave it out")
    settings = encoder_settings(base, encoder_backend, encoder_threads)
    if validation is not None and cfg.valid_frac > 0 and validation.valid_frac != cfg.valid_frac:
        # valid_frac was ignored without a word: the pairs it should have held out were trained on. Named as
        # FinetuneConfig names its own refusals ("config.valid_frac=0.25 and ..." read unlike them); `search train`
        # never gets here: the validation set it passes is the one its --valid-frac held out
        raise ConfigError(
            f"FinetuneConfig.valid_frac: {cfg.valid_frac:g} and validation= are both given, and only one can choose "
            f"the held-out queries: pass validation= with FinetuneConfig.valid_frac=0 to score your own set (all the "
            f"pairs are trained on), or FinetuneConfig.valid_frac without validation= to hold that share of the "
            f"queries out here")
    t0 = time.perf_counter()
    queries = check_query_texts(queries)  # one string was trained on as one query per character
    pos = np.asarray(positive_rows, dtype=np.int64)
    n_docs = len(doc_texts)
    if len(queries) != pos.size or not queries:
        raise DataError(f"need one positive row per query; got {len(queries)} queries and {pos.size} rows")
    if pos.min() < 0 or pos.max() >= n_docs:
        raise DataError(f"positive rows must lie in [0, {n_docs}), the corpus rows")
    if negatives is not None and len(negatives) != len(queries):
        raise DataError(f"negatives needs one array per pair ({len(queries)}), got {len(negatives)}")
    for i, rows in enumerate(() if negatives is None else negatives):
        check_corpus_rows(rows, n_docs, f"negatives[{i}]")
    if validation is not None and max(int(r.max()) for r in validation.relevant) >= n_docs:
        # such a row is never retrieved: validation scored 0 at every epoch, without a word
        raise DataError(f"validation.relevant rows must lie in [0, {n_docs}), the corpus rows")
    if validation is None and cfg.valid_frac > 0:
        keep, validation = hold_out(queries, pos, cfg.valid_frac, cfg.seed, name="FinetuneConfig.valid_frac")
        queries, pos = [queries[i] for i in keep], pos[keep]
        negatives = [negatives[i] for i in keep] if negatives is not None else None
    if len(queries) < 2:
        held = f" once {validation.pairs} were held out for validation" if validation is not None else ""
        raise DataError(f"need at least 2 pairs for in-batch negatives; {len(queries)} left{held}")
    rng = seed_everything(cfg.seed)
    set_threads(threads)

    base_enc, doc_enc, doc_dir = base_towers(base, settings)
    # the queries are short: a query_max_length past the positions trained without an error, and every search of
    # the model refused it (DenseRetriever checks both lengths)
    check_max_length(doc_enc, cfg.max_length)
    check_max_length(base_enc, cfg.query_max_length, "query_max_length")
    # recorded in the marker: how many documents the towers read only in part (cut at cfg.max_length)
    truncation = truncation_report(doc_enc, doc_texts, cfg.max_length, cache_dir=cache_dir)
    q_model = base_enc.model
    if cfg.shared:
        d_model = q_model
    elif doc_enc is base_enc:  # one model to start both towers from: the document tower is a copy
        d_model = copy.deepcopy(q_model)
    else:  # a fine-tuned bi-encoder's own document tower
        d_model = doc_enc.model
    frozen_docs = None
    if not cfg.train_doc_tower:
        from twotower.text.cache import cached_encode  # noqa: PLC0415

        d_model.eval()
        for p in d_model.parameters():
            p.requires_grad_(False)
        emb = cached_encode(doc_enc, doc_texts, cache_dir, max_length=cfg.max_length, show_progress=show_progress)
        frozen_docs = torch.from_numpy(emb)  # [N_docs, D]
    params = list(q_model.parameters()) + ([] if cfg.shared or not cfg.train_doc_tower else list(d_model.parameters()))
    # a Python caller set FinetuneConfig's fields, not `search train`'s flags: the error names what they typed
    names = {"lr": "FinetuneConfig.lr", "temperature": "FinetuneConfig.temperature", **(setting_names or {})}
    n_params = sum(p.numel() for p in params)
    # every epoch's batches drawn now, the same draws in the same order as drawing them epoch by epoch, so the
    # schedule's total is the steps taken: packing around repeated query texts gives a count that depends on the
    # shuffle (SciFact train, batch 32: 29 or 30), and one counted on another shuffle ran the last step at learning
    # rate 0, or stopped before the decay ended
    epoch_batches = [_batches(len(queries), cfg.batch_size, queries, rng) for _ in range(cfg.epochs)]
    total = sum(len(b) for b in epoch_batches)
    # AdamW, linear warm-up then linear decay, clipping and progress: the one training loop
    loop = TrainLoop(params, lr=cfg.lr, weight_decay=cfg.weight_decay, grad_clip=cfg.grad_clip, total_steps=total,
                     warmup_frac=cfg.warmup_frac, decay="linear", progress=show_progress,
                     lr_setting=names["lr"],
                     # a tiny --temperature makes the loss NaN whatever the rate: the error named --lr alone
                     suspect=temperature_suspect(cfg.temperature, names["temperature"],
                                                 default=FinetuneConfig.temperature))
    loss_fn = InBatchSoftmax(cfg.temperature, logq=False, mask_accidental_hits=True)
    logger.info(
        "fine-tuning %s: %d pairs, batch %d (+%d hard negatives/query%s), %d steps, %d trainable parameters, "
        "doc tower %s",
        base_enc.model_id, len(queries), cfg.batch_size, cfg.negatives_per_query,
        f", +{n_docs} corpus negatives" if cfg.corpus_negatives else "", total, n_params,
        "trained" if cfg.train_doc_tower else "frozen",
    )
    history: list[dict] = []
    reports: list[MiningReport] = []
    neg = [np.asarray(n, dtype=np.int64) for n in negatives] if negatives is not None else None
    all_pos: dict[str, set[int]] = {}
    for q, p in zip(queries, pos):
        all_pos.setdefault(q, set()).add(int(p))

    def closure(batch: np.ndarray, turn: int, stats: dict) -> tuple[float, int]:
        """Forward + backward of one batch of pair rows ``batch[B]``; ``stats`` receives the loss's stats.

        ``turn``: epochs since the negatives were mined (0: the epoch that mined them uses the hardest)."""
        b_pos = pos[batch]  # [B]
        hard: list[int] = []
        if neg is not None and cfg.negatives_per_query:
            for i in batch:  # round-robin over each pair's mined negatives, a new slice every epoch
                cand = neg[i]
                for j in range(min(cfg.negatives_per_query, cand.size)):
                    hard.append(int(cand[(turn * cfg.negatives_per_query + j) % cand.size]))
        cand_rows = np.concatenate([b_pos, np.asarray(hard, dtype=np.int64)])  # [B + H]
        qv = _embed(q_model, [queries[i] for i in batch], cfg.query_max_length)  # [B, D]
        if frozen_docs is None:
            cv = _embed(d_model, [doc_texts[r] for r in cand_rows], cfg.max_length)  # [B + H, D]
        else:
            if cfg.corpus_negatives:
                cand_rows = np.concatenate([b_pos, np.arange(n_docs)])  # [B + N_docs]
            cv = frozen_docs[torch.from_numpy(cand_rows)]  # [B + H, D] or [B + N_docs, D]
        # every document judged relevant to a row's query is left out of its negatives, not only the row's positive
        known = _other_known_positives([queries[i] for i in batch], cand_rows, all_pos)  # [B, B + H] or [B, B + N_docs]
        stats["chance_loss"] = _chance_loss(b_pos, cand_rows, known)
        others = torch.from_numpy(known)
        loss, st = loss_fn(qv, cv, LossBatch(positive_ids=torch.from_numpy(b_pos), candidate_ids=torch.from_numpy(cand_rows),
                                             column_mask=others))
        loss.backward()
        stats.update(st)
        return float(loss.detach()), len(batch)

    val = _Validator(validation, q_model, d_model, frozen_docs, doc_texts, cfg, base_enc.settings) if validation is not None else None
    mined_at = 0  # the epoch the negatives in ``neg`` were mined for
    for epoch in range(cfg.epochs):
        if epoch > 0 and cfg.refresh_negatives and cfg.negatives_per_query:  # none used: nothing to re-mine
            neg = _remine(q_model, d_model, frozen_docs, queries, all_pos, doc_texts, cfg, mining, reports,
                          base_enc.settings, mining_names)
            # the round-robin starts again at the head of the fresh lists: counted from epoch 0 it skipped their
            # hardest negatives (with 1 a query and 3 mined, epoch 1 used the second hardest, epoch 2 the third)
            mined_at = epoch
        q_model.train()
        if cfg.train_doc_tower:
            d_model.train()
        batches = epoch_batches[epoch]
        with loop.epoch(epoch + 1, n_batches=len(batches), n_examples=len(queries), desc=f"fine-tune epoch {epoch + 1}") as run:
            for batch in batches:
                stats: dict = {}
                loss = run.step(lambda b=batch, st=stats: closure(b, epoch - mined_at, st))
                history.append({"epoch": epoch, "step": loop.global_step - 1, "loss": loss,
                                "accuracy": stats["accuracy"], "chance_loss": stats["chance_loss"], "lr": loop.lr})
        # the towers' vectors of the epoch's last batch: an update can leave finite weights that compute NaN
        # (--lr 1e12), which the next mining refused as "queries contain NaN or inf", or with one epoch was saved
        probe = batches[-1]
        towers = [("the query tower's embeddings", q_model, [queries[i] for i in probe], cfg.query_max_length)]
        if cfg.train_doc_tower and not cfg.shared:
            towers.append(("the document tower's embeddings", d_model, [doc_texts[r] for r in pos[probe]], cfg.max_length))
        for what, tower, texts, length in towers:
            with _eval_mode(tower), torch.no_grad():
                check_finite_output(_embed(tower, texts, length), what, epoch + 1, cfg.lr, loop.suspect,
                                    lr_setting=loop.lr_setting)
        if val is not None and val.after_epoch(epoch + 1):
            break  # patience ran out: the best epoch's weights are restored below
    step = loop.global_step
    q_model.eval()
    d_model.eval()
    record = val.finish() if val is not None else None
    out = Path(out_dir)
    # absolute, as the marker's data.beir: the marker is read from other folders than the one training ran in
    base_dir = Path(base).resolve() if base is not None else default_model_path()
    chain = base_chain(base_dir)  # before the swap: retrained in place, base_dir's marker is the one replaced
    losses = epoch_losses(history)
    with atomic_dir(out) as tmp:
        q_model.save(str(tmp / "query"), create_model_card=False, safe_serialization=True)
        if not cfg.shared:
            if not cfg.train_doc_tower and doc_dir.is_dir():
                # identical files keep the base model's fingerprint, so its cached corpus embeddings are reused
                shutil.copytree(doc_dir, tmp / "doc")
            else:
                d_model.save(str(tmp / "doc"), create_model_card=False, safe_serialization=True)
        atomic_write_json(tmp / META_FILE, {
            "format": 2, "kind": "bi_encoder", "base": str(base_dir), "base_chain": chain[1:],
            VERSION_KEY: installed_version(),  # absent from a marker written before it was recorded
            "config": asdict(cfg),
            "steps": step, "final_loss": history[-1]["loss"] if history else None,
            # final_loss beside the printed epoch mean read as the same figure (0.00145 vs 0.6516): both named
            "final_step_loss": history[-1]["loss"] if history else None,
            "final_epoch_mean_loss": losses[-1]["loss"] if losses else None,
            "epoch_losses": losses,  # first and last read against chance_loss by search train
            "seconds": round(time.perf_counter() - t0, 1),
            # what it was trained on and how its negatives were mined: the config alone cannot say
            "data": {**dict(source or {}), "pairs": len(queries), "documents": n_docs},
            "truncation": truncation,  # documents cut at config.max_length (as the search index's meta.json)
            # which retriever mined them (config.mining_retriever), named as rerank train's marker names it
            # and, mined by BM25, with which settings (as `search evaluate --json` and `rerank train` name them)
            "mining": _mining_record(cfg, mining, bm25),
            # which negatives each query's softmax saw: "mining": null alone did not say whether none were wanted
            "negatives": _negatives_record(cfg, neg is not None),
            # the frozen document vectors and every mined negative come from this forward pass (auto resolved):
            # torch-bf16 trains other weights than torch from the same settings above
            "encoder_backend": base_enc.backend,
            # dense NDCG@10 of the held-out queries at the start (epoch 0) and after each epoch; the best is saved
            "validation": record,
            "files": file_table(tmp, META_FILE),  # every file's sha256, checked by load_bi_encoder
        })
    if record is not None and record["best_epoch"] == 0:
        logger.warning(
            "fine-tuning did not beat the starting model on the %d validation queries: dense NDCG@10 %.4f before "
            "training, at best %.4f after an epoch; the starting weights were saved to %s, so the model is no worse "
            "than the one training started from. Train with another learning rate, more epochs or more pairs",
            record["queries"], record["start"], max(e["ndcg10"] for e in record["epochs"]), out)
    q_enc, d_enc = load_bi_encoder(out)
    return FinetuneResult(q_enc, d_enc, out, history, reports, time.perf_counter() - t0, record)


def _chance_loss(b_pos: np.ndarray, cand_rows: np.ndarray, known: np.ndarray) -> float:
    """Mean over the batch's rows of ln(candidates the row's softmax spans): the loss of a model that scores them all
    alike. A row spans every column but the ones the loss masks: other copies of its positive (accidental hits) and
    the other documents judged relevant to its query (``known``, :func:`_other_known_positives`)."""
    dropped = known | (cand_rows[None, :] == b_pos[:, None])  # [B, N]
    dropped[np.arange(b_pos.size), np.arange(b_pos.size)] = False  # column b is the row's own positive
    return float(np.mean(np.log(cand_rows.size - dropped.sum(axis=1))))


def epoch_losses(history: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """``[{"epoch", "loss", "chance_loss"}]``: each epoch's mean step loss and mean no-learning loss (history rows)."""
    by_epoch: dict[int, list[Mapping[str, Any]]] = {}
    for row in history:
        by_epoch.setdefault(int(row["epoch"]), []).append(row)
    return [{"epoch": e + 1, "loss": float(np.mean([r["loss"] for r in rows])),
             "chance_loss": float(np.mean([r["chance_loss"] for r in rows]))} for e, rows in sorted(by_epoch.items())]


def _negatives_record(cfg: FinetuneConfig, mined: bool) -> dict[str, Any]:
    """The marker's account of the negatives: the batch's other positives always, plus hard or corpus ones."""
    hard = cfg.negatives_per_query if mined else 0
    return {"in_batch": True, "hard_per_query": hard, "corpus": cfg.corpus_negatives,
            "in_batch_only": not hard and not cfg.corpus_negatives}


def _current_retriever(q_model, d_model, frozen_docs, doc_texts, cfg, settings):  # noqa: ANN001, ANN202
    """A DenseRetriever over the towers as they are now (encoded as ``settings``): the frozen corpus vectors, or the
    corpus encoded again by a document tower being trained (one corpus pass)."""
    from twotower.search.dense import DenseRetriever  # noqa: PLC0415

    q_model.eval()
    d_model.eval()
    d_enc = _as_encoder(d_model, "doc", settings)
    retr = DenseRetriever(_as_encoder(q_model, "query", settings), doc_encoder=d_enc,
                          max_length=cfg.max_length, query_max_length=cfg.query_max_length, show_progress=False)
    if frozen_docs is not None:
        return retr.fit_embeddings(frozen_docs.numpy())
    # encoded directly, not by fit: no truncation count logged again at every re-encoding, nothing cached
    return retr.fit_embeddings(d_enc.encode(list(doc_texts), max_length=cfg.max_length, show_progress=False))


class _Validator:
    """Dense NDCG@10 of held-out queries before training and after each epoch, the best towers' weights kept in
    memory (the starting ones first), and early stopping after ``cfg.patience`` epochs without a new best."""

    def __init__(self, valid: ValidationSet, q_model, d_model, frozen_docs, doc_texts, cfg, settings) -> None:  # noqa: ANN001
        from twotower.training.loop import EarlyStopping  # noqa: PLC0415

        self.valid, self.cfg = valid, cfg
        self.score = lambda: self._ndcg(q_model, d_model, frozen_docs, doc_texts, settings)
        # the towers that learn: a frozen or shared document tower needs no copy
        self.models = [q_model] + ([d_model] if cfg.train_doc_tower and not cfg.shared else [])
        self.stopper = EarlyStopping(cfg.patience)
        self.seconds = 0.0
        self.epochs: list[dict[str, float]] = []
        self.start = self._timed()
        self.stopper.update(self.start, 0)
        self.best = self._snapshot()
        logger.info("validation: %d held-out queries (%d pairs), dense NDCG@10 %.4f before training%s",
                    len(valid.queries), valid.pairs, self.start,
                    "" if frozen_docs is not None else
                    f" ({self.seconds:.1f}s: the document tower is trained, so the corpus is encoded again at every "
                    "validation)")

    def _ndcg(self, q_model, d_model, frozen_docs, doc_texts, settings) -> float:  # noqa: ANN001
        retr = _current_retriever(q_model, d_model, frozen_docs, doc_texts, self.cfg, settings)
        return ndcg10(retr.search(self.valid.queries, min(NDCG_K, len(doc_texts))).ids, self.valid.relevant)

    def _timed(self) -> float:
        t = time.perf_counter()
        value = self.score()
        self.seconds += time.perf_counter() - t
        return value

    def _snapshot(self) -> list[dict]:
        return [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in self.models]

    def after_epoch(self, epoch: int) -> bool:
        """Score the epoch just trained; keep its weights if best; True when training should stop."""
        value = self._timed()
        self.epochs.append({"epoch": epoch, "ndcg10": value})
        if self.stopper.update(value, epoch):
            self.best = self._snapshot()
        s = self.stopper
        logger.info("epoch %d: validation NDCG@10 %.4f (%s)", epoch, value,
                    "new best" if s.best_epoch == epoch else f"best {s.best:.4f} at epoch {s.best_epoch}"
                    + (", 0 = before training" if s.best_epoch == 0 else ""))
        if s.stop and epoch < self.cfg.epochs:
            logger.info("early stopping after epoch %d: %d epochs without a better validation NDCG@10 than epoch "
                        "%d's %.4f (patience %d)", epoch, s.bad, s.best_epoch, s.best, self.cfg.patience)
        return s.stop

    def finish(self) -> dict[str, Any]:
        """Load the best weights into the towers; the marker's account of the validation."""
        for m, state in zip(self.models, self.best):
            m.load_state_dict(state)
        last = self.epochs[-1]["epoch"] if self.epochs else 0
        return {"queries": len(self.valid.queries), "pairs": self.valid.pairs, "metric": f"NDCG@{NDCG_K}",
                "valid_frac": self.cfg.valid_frac, "start": self.start, "epochs": self.epochs,
                "best_epoch": self.stopper.best_epoch, "best": self.stopper.best, "patience": self.cfg.patience,
                "stopped_early": last < self.cfg.epochs, "seconds": round(self.seconds, 1),
                "corpus_reencoded": self.cfg.train_doc_tower}


def _mining_record(cfg: FinetuneConfig, mining: MiningConfig | None, bm25: BM25Config | None) -> dict | None:
    """The marker's ``mining``: the retriever, the MiningConfig and, for BM25, its settings (None: nothing mined)."""
    if mining is None:
        return None
    extra = {"bm25": asdict(bm25 or BM25Config())} if cfg.mining_retriever == "bm25" else {}
    return {"retriever": cfg.mining_retriever, **asdict(mining), **extra}


def _remine(q_model, d_model, frozen_docs, queries, all_pos, doc_texts, cfg, mining, reports, settings, names):
    """Re-mine hard negatives for every pair from the model's own current dense index (encoded as ``settings``)."""
    retr = _current_retriever(q_model, d_model, frozen_docs, doc_texts, cfg, settings)
    uniq = list(all_pos)
    negs, report = mine_hard_negatives(uniq, [np.asarray(sorted(all_pos[q])) for q in uniq], retr, mining,
                                       names=names)
    reports.append(report)
    by_q = dict(zip(uniq, negs))
    return [by_q[q] for q in queries]


def bi_encoder_dirs(path: str | os.PathLike[str] | None) -> tuple[Path, Path]:
    """``(query_dir, doc_dir)``: the sentence-transformers folders :func:`load_bi_encoder` loads the two towers from
    (the packaged MiniLM for ``None``, ``path`` itself for a plain sentence-transformers folder), found without
    loading them."""
    from twotower.text.encoder import default_model_path  # noqa: PLC0415

    if path is None:
        return default_model_path(), default_model_path()
    p = Path(path)
    if not (p / META_FILE).is_file():
        return p, p
    return p / "query", (p / "doc" if (p / "doc").is_dir() else p / "query")


def load_bi_encoder(
    path: str | os.PathLike[str] | None, *, settings: EncoderSettings | None = None
) -> tuple[TextEncoder, TextEncoder]:
    """``(query_encoder, doc_encoder)`` from a :func:`finetune_bi_encoder` directory.

    A plain sentence-transformers directory (or ``None`` for the default
    MiniLM) gives the same encoder for both sides. ``settings``
    (:class:`twotower.text.EncoderSettings`) picks the forward-pass backend; ``None``: the environment's
    (``--encoder-backend``), else the backend the model was fine-tuned through (its marker), as its lengths are.
    """
    if settings is None and path is not None:
        trained = trained_backend(path)
        settings = EncoderSettings.from_env(trained)
        if trained is not None and not os.environ.get("TWOTOWER_ENCODER_BACKEND"):
            logger.info("encoding on %s, the backend %s was fine-tuned through (--encoder-backend to choose "
                        "another)", trained, path)
    if path is None:
        enc = load_text_encoder(None, settings=settings)
        return enc, enc
    p = Path(path)
    if not p.exists():
        raise DataError(f"no model at {p}; train one with 'twotower search train' or give a sentence-transformers directory")
    if not (p / META_FILE).is_file():
        enc = load_text_encoder(p, settings=settings)
        return enc, enc
    verify_model_dir(p, META_FILE, "bi_encoder", fix=f"train it again with `twotower search train --out {shell_arg(p)}`")
    q = load_text_encoder(p / "query", settings=settings)
    d = load_text_encoder(p / "doc", settings=settings) if (p / "doc").is_dir() else q
    return q, d


def load_dense_retriever(
    model: str | os.PathLike[str] | None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    max_length: int | None = None,
    query_max_length: int | None = None,
    encoder_backend: str | None = None,
    encoder_threads: int | None = EncoderSettings.threads,
):  # noqa: ANN201 - DenseRetriever (imported lazily: dense.py is the heavier module)
    """An unfitted :class:`~twotower.search.dense.DenseRetriever` over ``model``'s towers (as :func:`load_bi_encoder`),
    reading documents / queries at ``max_length`` / ``query_max_length`` word pieces; ``None``: the lengths the model
    was fine-tuned with (its marker), else ``SearchConfig``'s — a model is measured and served as it was trained.
    ``encoder_backend`` / ``encoder_threads``: the encoders' forward pass, as ``--encoder-backend`` /
    ``--encoder-threads`` (:func:`encoder_settings`; None: the environment's, else the backend ``model`` was
    fine-tuned through, else ``EncoderSettings``')."""
    from twotower.config import SearchConfig  # noqa: PLC0415
    from twotower.search.artefacts import trained_lengths  # noqa: PLC0415
    from twotower.search.dense import DenseRetriever  # noqa: PLC0415

    trained = trained_lengths(model)
    # None, not any falsy value, means "as trained": max_length=0 was read as None and the default used silently
    if max_length is None:
        max_length = trained.get("max_length", SearchConfig.max_length)
    if query_max_length is None:
        query_max_length = trained.get("query_max_length", SearchConfig.query_max_length)
    for name, value in (("max_length", max_length), ("query_max_length", query_max_length)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{name}: must be a positive integer or None, got {value!r}")
    q_enc, d_enc = load_bi_encoder(model, settings=encoder_settings(model, encoder_backend, encoder_threads))
    return DenseRetriever(q_enc, doc_encoder=d_enc, cache_dir=cache_dir, max_length=max_length,
                          query_max_length=query_max_length)


def evaluate_loss(
    query_encoder: TextEncoder,
    doc_encoder: TextEncoder,
    queries: Sequence[str],
    positive_texts: Sequence[str],
    *,
    temperature: float = FinetuneConfig.temperature,
    max_length: int = FinetuneConfig.max_length,
    query_max_length: int = FinetuneConfig.query_max_length,
) -> float:
    """In-batch softmax loss of one batch without dropout or gradients (for checks)."""
    import torch  # noqa: PLC0415

    from twotower.losses.softmax import InBatchSoftmax  # noqa: PLC0415

    q = torch.from_numpy(query_encoder.encode(list(queries), max_length=query_max_length, show_progress=False))
    d = torch.from_numpy(doc_encoder.encode(list(positive_texts), max_length=max_length, show_progress=False))
    ids = torch.arange(len(queries))
    with torch.no_grad():
        return float(InBatchSoftmax(temperature, logq=False)(q, d, positive_ids=ids, candidate_ids=ids))
