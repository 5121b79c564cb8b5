"""ONNX Runtime forward pass for a sentence-transformers encoder (fp32, or int8 dynamic quantization).

Legend: ``B`` texts in a batch, ``T`` word pieces, ``H`` hidden size.

The encoder's transformer plus its pooling (mean or CLS) is exported once
per weights fingerprint with ``torch.onnx.export`` into
``$TWOTOWER_ONNX_CACHE`` (default ``$XDG_CACHE_HOME/twotower/onnx`` or ``~/.cache/twotower/onnx``); the int8 file
is ``onnxruntime.quantization.quantize_dynamic`` of it (MatMul weights,
per channel, reduced range: exact enough on CPUs without VNNI, where full
8-bit ranges saturate). Every file is checksummed and checked with
:func:`twotower.utils.atomic.verify_files` before a session is opened, and
a ``files.json`` whose table leaves out a file of the folder is refused
(:func:`read_export`), as a saved index's ``meta.json`` is.
No ``optimum`` is needed (it would pin an older ``transformers``).

Attention is exported from the model's eager implementation: the SDPA export
wraps its softmax in an ``IsNaN``/``Where`` guard that took 15% of an int8
forward pass on a 2-core AVX2 machine (ONNX Runtime's profiler, 64 SciFact
abstracts); without it the pass takes 12% less time. :data:`EXPORT_VERSION`
names the export in the cache folder and in the encoder's ``model_id``, so
vectors of another export are never mixed with these.
"""
from __future__ import annotations

import errno
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from twotower.errors import ConfigError, IntegrityError

__all__ = ["OnnxForward", "onnx_cache_dir", "export_onnx", "read_export", "EXPORT_VERSION", "EXPORTED_FILES"]

#: 1: SDPA attention; 2: eager attention (no NaN guard in the graph).
EXPORT_VERSION = 2

logger = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

#: The files a session may open: files.json must list each, with its sha256, before any is read.
EXPORTED_FILES = ("model-fp32.onnx", "model-int8.onnx")
TABLE = "files.json"


def onnx_cache_dir() -> Path:
    """Where exported encoders live: ``$TWOTOWER_ONNX_CACHE``, else ``onnx`` in the cache folder
    (``$XDG_CACHE_HOME/twotower``, else ``~/.cache/twotower``)."""
    from twotower.utils.cache_home import cache_home

    return Path(os.environ.get("TWOTOWER_ONNX_CACHE") or cache_home() / "onnx")


def _pooling_mode(st_model: Any) -> str:
    """``"mean"`` or ``"cls"`` from the model's Pooling module; anything else is refused."""
    modules = list(st_model)
    names = [type(m).__name__ for m in modules]
    if len(modules) < 2 or names[1] != "Pooling" or any(n not in ("Normalize",) for n in names[2:]):
        raise ConfigError(f"the onnx backend supports Transformer + Pooling (+ Normalize) encoders, not {names}")
    cfg = modules[1].get_config_dict()
    mode = cfg.get("pooling_mode")  # sentence-transformers >= 6; older ones spell one flag per mode
    if mode == "mean" or cfg.get("pooling_mode_mean_tokens"):
        return "mean"
    if mode == "cls" or cfg.get("pooling_mode_cls_token"):
        return "cls"
    raise ConfigError(f"the onnx backend supports mean or CLS pooling, not {cfg}")


def _wrapper(hf_model: Any, names: Sequence[str], mode: str) -> Any:
    import torch

    class _Pooled(torch.nn.Module):
        """Transformer + pooling: ``(input_ids[B, T], attention_mask[B, T], ...) -> [B, H]``."""

        def __init__(self) -> None:
            super().__init__()
            self.m = hf_model

        def forward(self, *args: Any) -> Any:
            kw = dict(zip(names, args))
            h = self.m(**kw).last_hidden_state  # [B, T, H]
            if mode == "cls":
                return h[:, 0]
            w = kw["attention_mask"].unsqueeze(-1).to(h.dtype)  # [B, T, 1]
            return (h * w).sum(1) / w.sum(1).clamp(min=1e-9)

    return _Pooled().eval()


def export_onnx(st_model: Any, folder: Path) -> None:
    """Write ``model-fp32.onnx``, ``model-int8.onnx`` and ``files.json`` (sha256 of each) into ``folder``."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from twotower.utils.atomic import atomic_dir, atomic_write_json, sha256_file

    mode = _pooling_mode(st_model)
    hf_model = st_model[0].auto_model
    tok = st_model[0].tokenizer
    sample = tok(["an example sentence", "two"], padding=True, truncation=True, max_length=32, return_tensors="pt")
    names = [n for n in _INPUTS if n in sample]
    wrapped = _wrapper(hf_model, names, mode)
    logger.info("exporting the text encoder to ONNX (fp32 + int8) in %s", folder)
    with atomic_dir(folder) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"embedding": {0: "batch"}}
        with torch.no_grad(), _eager_attention(hf_model):
            torch.onnx.export(wrapped, tuple(sample[n] for n in names), str(tmp / "model-fp32.onnx"),
                              input_names=names, output_names=["embedding"], dynamic_axes=axes, opset_version=17,
                              dynamo=False)
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # onnxruntime's quantizer logs a pre-processing hint to the root logger
        try:
            _quantize(quantize_dynamic, QuantType, tmp)
        finally:
            root.setLevel(level)
        # every file of the folder (an export over 2 GB writes its weights beside the .onnx): read_export
        # refuses a folder holding a file the table does not list
        files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file() and p.name != TABLE}
        atomic_write_json(tmp / TABLE, {"inputs": names, "pooling": mode, "files": files})


@contextmanager
def _eager_attention(hf_model: Any) -> Iterator[None]:
    """The model's attention switched to its eager implementation for the export, then restored."""
    before = getattr(hf_model.config, "_attn_implementation", None)
    switch = getattr(hf_model, "set_attn_implementation", None)
    if switch is None or before in (None, "eager"):
        yield
        return
    try:
        switch("eager")
    except (ValueError, ImportError, AttributeError):  # a model without an eager path: export as it is
        yield
        return
    try:
        yield
    finally:
        switch(before)


def _quantize(quantize_dynamic: Any, QuantType: Any, tmp: Path) -> None:  # noqa: N803 - onnxruntime's name
    """int8 weights of every MatMul, per output channel, 7-bit range (no saturation on AVX2 without VNNI)."""
    quantize_dynamic(str(tmp / "model-fp32.onnx"), str(tmp / "model-int8.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True, reduce_range=True, op_types_to_quantize=["MatMul"],
                     extra_options={"DefaultTensorType": 1})  # 1 = FLOAT, for shapes inference cannot type


def read_export(folder: Path) -> dict[str, Any]:
    """``files.json`` of an exported encoder, after every file of ``folder`` has been checked against it.

    A missing file or a sha256 mismatch raises IntegrityError (:func:`~twotower.utils.atomic.verify_files`),
    and so does a file the table does not list, one of :data:`EXPORTED_FILES` or any other in the folder:
    the check covered only the files the table named, so a files.json without the int8 entry (edited, or
    half-written by another tool) let ONNX Runtime parse model-int8.onnx unchecked, the gap a saved index's
    meta.json had (:func:`twotower.index.load_index`).
    """
    from twotower.utils.atomic import read_json, verify_files

    fix = f"delete {folder} to export the encoder again"
    meta = read_json(folder / TABLE)
    table = meta.get("files") if isinstance(meta, dict) else None
    if (not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values())
            or not isinstance(meta.get("inputs"), list)):
        raise IntegrityError(f"{folder / TABLE}: not an exported encoder's file table (expected \"inputs\" and "
                             f"\"files\": name -> sha256); {fix}")
    present = sorted(p.name for p in folder.iterdir() if p.name != TABLE)
    unlisted = [name for name in dict.fromkeys([*EXPORTED_FILES, *present]) if name not in table]
    if unlisted:
        raise IntegrityError(f"{folder / unlisted[0]}: not listed in the checksums of {folder / TABLE}, so it "
                             f"cannot be verified before it is read; {fix}")
    verify_files(folder, table, fix=fix)
    return meta


#: errnos of a cache folder that cannot be made or written (a read-only or unset HOME, a read-only mount)
_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)
_warned: set[Path] = set()


def _warn_unwritable(cache: Path, e: OSError) -> None:
    """Once a process per cache folder: the export goes to a temporary folder, and how to keep it."""
    if cache in _warned:
        return
    _warned.add(cache)
    logger.warning("ONNX cache %s cannot be written (%s); exporting the text encoder into a temporary folder "
                   "instead, so every run exports it again (set TWOTOWER_ONNX_CACHE, or XDG_CACHE_HOME, to a "
                   "writable folder to keep it)", cache, e.strerror or e)


def _ends_in_normalize(st_model: Any) -> bool:
    """Whether the encoder's last module is Normalize (all-MiniLM-L6-v2's is), which the exported graph leaves out."""
    return type(list(st_model)[-1]).__name__ == "Normalize"


class OnnxForward:
    """An ONNX Runtime session computing pooled (not yet normalised) embeddings ``[B, H]``; ``normalizes`` says
    whether the model's own last module L2-normalises them, as its torch pass does."""

    def __init__(self, st_model: Any, fingerprint: str, *, int8: bool, threads: int | None) -> None:
        import onnxruntime as ort
        import torch

        folder = onnx_cache_dir() / f"{fingerprint}.e{EXPORT_VERSION}"
        self._scratch: tempfile.TemporaryDirectory[str] | None = None  # the export's folder when the cache is unwritable
        if not (folder / TABLE).is_file():
            try:
                export_onnx(st_model, folder)
            except OSError as e:
                if e.errno not in _UNWRITABLE:
                    raise
                # a read-only HOME or mount: the cache only saves the next run the export, so export without it
                # (as the embedding cache does) instead of stopping at "Permission denied"
                _warn_unwritable(folder.parent, e)
                self._scratch = tempfile.TemporaryDirectory(prefix="twotower-onnx-")
                folder = Path(self._scratch.name) / folder.name
                export_onnx(st_model, folder)
        meta = read_export(folder)
        self.names: list[str] = list(meta["inputs"])
        self.tokenizer = st_model[0].tokenizer
        # the graph is transformer + pooling: without the model's Normalize, normalize=False gave vectors of norm 5
        # to 7 where the torch pass of the same model gives unit vectors
        self.normalizes = _ends_in_normalize(st_model)
        opts = ort.SessionOptions()
        # without --encoder-threads, torch's count (what --threads / TWOTOWER_THREADS set, else its all-cores
        # default): ONNX Runtime's own default took every core, so `search evaluate --threads 1` on a shared machine
        # still encoded on all of them when the backend was onnx or onnx-int8
        opts.intra_op_num_threads = int(threads or torch.get_num_threads())
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # errors only: no warnings in redirected logs
        path = folder / ("model-int8.onnx" if int8 else "model-fp32.onnx")
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def __call__(self, texts: Sequence[str], max_length: int) -> np.ndarray:
        """Pooled embeddings of ``texts`` -> float32 ``[B, H]`` (truncated to ``max_length`` word pieces)."""
        enc = self.tokenizer([str(t).strip() for t in texts], padding=True, truncation="longest_first",
                             max_length=max_length, return_tensors="np")
        feed = {n: np.asarray(enc[n], dtype=np.int64) for n in self.names}
        return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
