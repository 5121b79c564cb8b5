"""The service's thread counts (``ServiceSettings.threads``, ``serve --threads``), in force while the service works.

A service's count is its own setting, not its host's: ``RecommenderService.load``, a ``create_app`` start and the
first request of each thread set torch's, FAISS's and the BLAS pools' counts for the rest of the host's process
(``torch.set_num_threads(2)``, a load with the default ``threads=1``, then ``torch.get_num_threads()`` gave 1).
`twotower serve` sets them for its whole process itself.

OpenBLAS (numpy's and scipy's, 0.3.30) keeps a count its process's main thread has set whichever other thread asks
for another: a ``TestClient`` starts an app off the main thread, so there the BLAS pools stay at such a count.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["service_threads"]

_lock = threading.Lock()
_local = threading.local()


@dataclass
class _Held:
    """The host's counts, recorded by the first block under way in the process."""

    torch: int
    blas: Any  # threadpoolctl's limiter, which puts the BLAS pools' counts back


_held: _Held | None = None
_holders = 0  # blocks under way, every thread together
_blas: Any = None  # threadpoolctl's controller of the BLAS pools: made once (0.9 ms), then 20 us to set them


@contextmanager
def service_threads(n: int) -> Iterator[None]:
    """Torch's, FAISS's and the BLAS pools' counts at ``n`` for the block, the host's put back after it.

    The BLAS pools are the process's: the first block under way sets them, the last puts them back, so concurrent
    requests neither pay a switch each nor race to put them back; a started app holds a block for its whole life,
    so its requests switch only the OpenMP counts, which are each thread's own (a few microseconds)."""
    with _process_pools(n), _thread_pools(n):
        yield


@contextmanager
def _process_pools(n: int) -> Iterator[None]:
    global _held, _holders
    import torch

    with _lock:
        if not _holders:
            _held = _Held(torch=torch.get_num_threads(), blas=_blas_pools().limit(limits=n))
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if not _holders and _held is not None:
                _held.blas.restore_original_limits()
                _held = None


@contextmanager
def _thread_pools(n: int) -> Iterator[None]:
    """torch's and FAISS's OpenMP counts of the calling thread, set by its outermost block."""
    import torch

    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    if depth:
        try:
            yield
        finally:
            _local.depth = depth
        return
    faiss = _faiss()
    faiss_before = faiss.omp_get_max_threads() if faiss is not None else None
    torch_before = _held.torch if _held is not None else torch.get_num_threads()
    torch.set_num_threads(n)
    if faiss is not None:
        faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        _local.depth = 0
        if faiss is not None:
            faiss.omp_set_num_threads(faiss_before)
        # torch's count is one number for the process (each thread takes it up): the host's, as the first block
        # found it, not this thread's view of it, which another thread's block may have set meanwhile
        torch.set_num_threads(torch_before)


def _blas_pools() -> Any:
    """The BLAS pools numpy, scipy and FAISS load (utils.runtime.set_threads's), found once: libraries loaded later
    than the first block are left as they are."""
    global _blas
    if _blas is None:
        import scipy.linalg  # noqa: F401  -- loads scipy's own OpenBLAS, so that the controller finds it
        from threadpoolctl import ThreadpoolController

        _faiss()
        _blas = ThreadpoolController().select(user_api="blas")
    return _blas


def _faiss() -> Any:
    try:
        import faiss  # noqa: PLC0415
    except ImportError:
        return None
    return faiss
