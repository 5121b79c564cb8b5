"""Process-wide runtime settings: seeds and thread counts, set at the edge only."""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import numbers
import os
import random
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from twotower.config import MAX_THREADS
from twotower.errors import ConfigError

if TYPE_CHECKING:
    import torch

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["seed_everything", "epoch_seed", "set_threads", "scoped_threads", "restored_threads", "keeps_caller_state", "preserved_rng",
           "threads_from_env", "auto_threads", "run_threads", "flush_denormals", "flushes_denormals", "native_bf16",
           "resolve_device", "retain_freed_memory", "release_freed_memory", "freed_memory_retained", "available_memory",
           "trains_alone"]


#: third-party loggers that log at INFO or DEBUG on their own (faiss.loader: every CPU variant it tries); the CLI
#: keeps them at WARNING unless --verbose, in its process and in the workers of ``serve --workers N``
CHATTY_LOGGERS = ("bm25s", "sentence_transformers", "transformers", "faiss.loader", "httpx")


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch; return a NumPy Generator for local use."""
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def epoch_seed(seed: int, epoch: int) -> int:
    """The torch seed of ``epoch`` of a run seeded ``seed``: ``seed * 1000 + epoch``, wrapped into the 64 bits
    ``torch.Generator.manual_seed`` takes. Unwrapped, any train.seed above ~1.8e16 (the config allows up to
    2**64 - 1) failed the first epoch with "Overflow when unpacking long long"; every seed below it keeps its
    epochs' seeds, so runs made before train the same."""
    return (seed * 1000 + epoch) % 2**64


def threads_from_env(default: int | None = None) -> int | None:
    """``TWOTOWER_THREADS`` if set (blank counts as unset), else ``default``; ValueError naming the variable for
    anything but an integer from 1 to MAX_THREADS (the CLI checks it through here before any work)."""
    value = os.environ.get("TWOTOWER_THREADS", "")
    if not value.strip():
        return default
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"TWOTOWER_THREADS must be an integer from 1 to {MAX_THREADS}, got {value!r}")
    return n


def run_threads(setting: int | None) -> int:
    """The one rule for a run's thread count: ``setting`` (``train.threads``, ``--threads``), else
    ``TWOTOWER_THREADS``, else :func:`auto_threads` (half the idle cores)."""
    return setting or threads_from_env() or auto_threads()


def auto_threads(max_threads: int = 4) -> int:
    """Training threads when none is set: half the cores no other process is using, 1 to ``max_threads``.

    Why so few: the recommender's ops are small, and OpenMP threads that share
    a core with other work wait for each other at every op. Measured on 2
    shared cores (load 4-5; ML-1M, default model, batch 512): 1 thread trained
    13-17K examples/s, 2 threads 1.3-2.9K. On an idle 2-core machine this
    gives 1 thread, which loses little there and never collapses when
    something else starts; a big idle machine gets up to ``max_threads``.
    """
    cores = usable_cores()
    try:
        busy = os.getloadavg()[0]
    except (OSError, AttributeError):
        busy = 0.0
    free = max(cores - math.ceil(busy), 0)
    return max(1, min(max_threads, free // 2))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; the machine's count off Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def spare_core(threads: int) -> bool:
    """Whether a core is left beside ``threads`` OpenMP threads in each of this machine's processes of a run
    (``LOCAL_WORLD_SIZE`` under torchrun): a helper thread on a core the OpenMP threads use makes them wait for
    each other at every op (ML-1M, default model, 2 idle cores, 2 torch threads: an epoch took 30 s with the
    training's helper threads against 19 s without)."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    return usable_cores() > max(1, threads) * max(1, local)


def set_threads(n: int | None) -> None:
    """Set torch's intra-op thread count, FAISS's and the BLAS pools numpy/scipy use.

    Small torch ops run far slower with 2 contended threads than with 1 on
    shared cores, so the count is a setting rather than torch's guess. The
    BLAS pools follow it for the same reason: EASE's Cholesky solves took 5x
    longer with OpenBLAS's default 2 threads while another process held one of
    the 2 cores (the demo's baseline tuning: 16.6 s instead of 3.2 s).
    ``None`` leaves the library defaults alone.
    """
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:  # torch's own refusal names no setting
        raise ConfigError(f"threads: expected a whole number >= 1, got {n!r}")
    if n > MAX_THREADS:  # torch's own refusal of a huge count is a bare OverflowError-like ValueError
        raise ConfigError(f"threads: expected at most {MAX_THREADS}, got {n!r}")
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(int(n))
    try:
        import faiss  # noqa: PLC0415

        faiss.omp_set_num_threads(int(n))
    except ImportError:
        pass
    import scipy.linalg  # noqa: F401  -- loads scipy's own OpenBLAS (EASE's solves), so that the limit reaches it

    threadpool_limits(int(n), user_api="blas")  # numpy's, scipy's and FAISS's OpenBLAS, process-wide until changed


@contextmanager
def restored_threads() -> Iterator[None]:
    """Torch's, FAISS's and every BLAS and OpenMP pool's thread counts put back after the block as they were before.

    For the Python API (``train_run``, ``build_index``, the search functions' ``threads=``): a library call
    left the counts it set changed for the rest of the caller's process (``torch.set_num_threads(2)``, a
    ``train_run`` with ``train.threads=1``, then ``torch.get_num_threads()`` gave 1). The commands set them
    for their whole process themselves (:func:`set_threads`).
    """
    import scipy.linalg  # noqa: F401  -- the libraries set_threads reaches, loaded before their counts are read
    import torch
    from threadpoolctl import threadpool_limits

    try:
        import faiss  # noqa: PLC0415
    except ImportError:
        faiss = None
    before_torch = torch.get_num_threads()
    before_faiss = faiss.omp_get_max_threads() if faiss is not None else None
    pools = threadpool_limits(None)  # records every BLAS and OpenMP pool's count now, changes nothing
    try:
        yield
    finally:
        pools.restore_original_limits()
        if faiss is not None:
            faiss.omp_set_num_threads(before_faiss)
        torch.set_num_threads(before_torch)


@contextmanager
def scoped_threads(n: int | None) -> Iterator[None]:
    """:func:`set_threads` for the block, the counts put back after it (:func:`restored_threads`); None: no change."""
    if n is None:
        yield
        return
    with restored_threads():
        set_threads(n)
        yield


def keeps_caller_state(*, rng: bool = False) -> Callable[[F], F]:
    """Decorator for a Python API function whose ``threads=`` argument (when not None) sets the thread counts
    (:func:`set_threads`) and, with ``rng``, which seeds the global generators (:func:`seed_everything`): both
    are put back as the caller had them when the function returns or raises."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                threads = signature.bind(*args, **kwargs).arguments.get("threads")
            except TypeError:  # the function's own TypeError, raised by the call below
                threads = None
            with contextlib.ExitStack() as stack:
                if rng:  # it seeds the global generators: alone, as train_run is
                    stack.enter_context(trains_alone(fn.__name__))
                if threads is not None:
                    stack.enter_context(restored_threads())
                if rng:
                    stack.enter_context(preserved_rng())
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


#: the call training in this process now: (thread id, thread name, what it is), or None (:func:`trains_alone`)
_training: dict[str, tuple[int, str, str] | None] = {"now": None}
_training_lock = threading.Lock()


@contextmanager
def trains_alone(what: str) -> Iterator[None]:
    """The block as this process's one training (``what``: the call, e.g. ``"tt.train_run"``); ConfigError at once
    when another thread's training is running. The same thread may train further in (its outer call holds it).

    A training sets process-wide state for its call and puts it back after (thread counts, the seeded global random
    generators, glibc's malloc thresholds): two ``train_run`` calls side by side drew from each other's seeded
    streams (one model differed from the same run trained alone) and put back each other's state (the caller's
    random stream was left at ``train.seed``'s).
    """
    me = threading.get_ident()
    with _training_lock:
        holder = _training["now"]
        if holder is not None and holder[0] != me:
            _, thread, running = holder
            raise ConfigError(f"{what}: {running} is already running in this process (thread {thread!r}); a training "
                              "sets process-wide state (thread counts, the global random generators) for its call, so "
                              "run them one after another, or in separate processes")
        if holder is None:
            _training["now"] = (me, threading.current_thread().name, what)
    try:
        yield
    finally:
        if holder is None:
            with _training_lock:
                _training["now"] = None


@contextmanager
def preserved_rng() -> Iterator[None]:
    """Python's, NumPy's and torch's global random generators put back after the block as they were before it.

    ``train_run`` and the search trainers seed them (:func:`seed_everything`) so a run is reproducible; a caller's
    own random stream, drawn after the call, was no longer the one it had seeded.
    """
    import torch

    py, npy, cpu = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


#: the mmap threshold glibc's dynamic rule rises to, at most, as large blocks are freed (<malloc.h>:
#: DEFAULT_MMAP_THRESHOLD_MAX on 64-bit), and the trim threshold it pairs with it (twice the mmap threshold). A
#: process that set neither starts at 128 KiB and moves up as it frees blocks; set by hand, the thresholds stay
GLIBC_MMAP_THRESHOLD_MAX = 32 * 2**20
GLIBC_TRIM_THRESHOLD_AT_MAX = 2 * GLIBC_MMAP_THRESHOLD_MAX
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>


def _glibc() -> Any | None:
    """This process's glibc (for ``mallopt`` and ``malloc_trim``), None off Linux or under another libc."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018  -- musl has neither
    except (OSError, AttributeError):
        return None
    return libc


def retain_freed_memory(limit_bytes: int = 1 << 30) -> bool:
    """Keep freed blocks up to ``limit_bytes`` in the process heap (glibc); True when it was set.

    glibc serves blocks above its mmap threshold (dynamically at most 32 MB)
    with fresh pages from the kernel and unmaps them on free, so a training step
    that allocates the same large tensors every step (a catalogue's embeddings
    and their gradient, a sampled softmax's logits) pays a page fault per 4 KB
    for each of them, every step. Measured on one core: a full-softmax step over
    a 33.5K-item catalogue spent 6.3 s of 22 s in the kernel (system time) and
    ran 1.27x faster with this set; an ML-1M run with 3,000 sampled negatives
    spent 30% of its CPU time there. Raising the mmap and trim thresholds keeps
    those blocks for reuse. The cost is the usual one: the heap keeps its peak
    size while this holds. ``train_run`` sets it for the call only
    (:func:`freed_memory_retained`); a no-op off glibc.
    """
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(limit_bytes)) and libc.mallopt(_M_TRIM_THRESHOLD, 2 * int(limit_bytes)))


def release_freed_memory() -> bool:
    """glibc's mmap and trim thresholds put back as the process started with them, and the heap's free pages
    handed back to the kernel (``malloc_trim``); True when it was done, a no-op off glibc.

    glibc has no getter for the thresholds, so "as it started" is read where it is set at start:
    ``GLIBC_TUNABLES`` (``glibc.malloc.mmap_threshold``, ``glibc.malloc.trim_threshold``), else
    ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``. Without them, what cannot come back is glibc's
    dynamic mmap threshold (128 KiB at start, rising on its own, up to 32 MiB, as large blocks are freed): setting
    a threshold turns it off and glibc has no call that turns it on again. So they are set where that rule
    settles, 32 MiB and a 64 MiB trim threshold: put back at 128 KiB and left there, every allocation over 128
    KiB became an mmap and its pages faulted in again (a 1 MiB array allocated and freed 3,000 times: 1.21 s
    against 0.10 s in a fresh process; the test suite 1,207 s against 666 s), while at 32 MiB a freed array
    larger than that goes back to the kernel at once, and the heap keeps at most ~64 MiB of free pages.
    """
    libc = _glibc()
    if libc is None:
        return False
    mmap = _startup_malloc_threshold("mmap_threshold", "MALLOC_MMAP_THRESHOLD_", GLIBC_MMAP_THRESHOLD_MAX)
    trim = _startup_malloc_threshold("trim_threshold", "MALLOC_TRIM_THRESHOLD_", GLIBC_TRIM_THRESHOLD_AT_MAX)
    done = bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap) and libc.mallopt(_M_TRIM_THRESHOLD, trim))
    libc.malloc_trim(0)  # the blocks the thresholds kept: the caller's process gets its own size back
    return done


def _startup_malloc_threshold(tunable: str, variable: str, default: int) -> int:
    """The malloc threshold glibc read at start: ``GLIBC_TUNABLES``' ``glibc.malloc.<tunable>``, else the
    ``variable`` (``MALLOC_..._``), else ``default`` (where glibc's own dynamic rule would settle)."""
    tunables = dict(item.partition("=")[::2] for item in os.environ.get("GLIBC_TUNABLES", "").split(":"))
    for value in (tunables.get(f"glibc.malloc.{tunable}"), os.environ.get(variable)):
        try:
            return int(value or "", 0)
        except ValueError:  # unset or not a number: glibc ignores it too
            continue
    return default


@contextmanager
def freed_memory_retained(limit_bytes: int = 1 << 30) -> Iterator[None]:
    """:func:`retain_freed_memory` for the block, :func:`release_freed_memory` after it: a ``train_run`` left
    glibc keeping up to 1-2 GiB of freed memory for the rest of the caller's process (a 300 MB array freed after
    the call stayed in its RSS)."""
    retained = retain_freed_memory(limit_bytes)
    try:
        yield
    finally:
        if retained:
            release_freed_memory()


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes the kernel says can be allocated without swapping (``MemAvailable``); None off Linux.

    Before a dense ``[I, I]`` computation (EASE) this tells a slow fit from one
    that ends in the kernel killing the process.
    """
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


@contextmanager
def flush_denormals() -> Iterator[None]:
    """Subnormal floats read and written as zero inside the block (this thread), the caller's setting after.

    Softmax probabilities of far-off items are subnormal, and x86 cores multiply
    those up to 10x more slowly (measured: a full-softmax step with raw
    dot-product scores 3x slower); flushing them changes nothing a float32 loss
    can represent. Scoped, because the flag is process state that other code
    (property-based tests, numerics libraries) expects as it set it: IEEE by
    default, flushed where a caller chose ``torch.set_flush_denormal(True)``.
    """
    import torch

    before = flushes_denormals()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


def flushes_denormals() -> bool:
    """Whether this thread reads and writes subnormal floats as zero now; torch has no getter for the flag
    ``torch.set_flush_denormal`` sets, so a subnormal float32 is multiplied by one and read back."""
    import torch

    return float(torch.tensor(1e-40, dtype=torch.float32) * 1.0) == 0.0


@functools.lru_cache(maxsize=1)
def native_bf16() -> bool:
    """True when this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16; read from /proc/cpuinfo)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        return False
    return False


def resolve_device(name: str) -> "torch.device":
    """``train.device`` as a torch device; a clear error when CUDA is asked for but absent."""
    import torch  # noqa: PLC0415 - the ground floor imports torch only where it is needed

    from twotower.errors import ConfigError  # noqa: PLC0415

    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"train.device: {name!r} is not a device (use cpu, cuda or cuda:N)") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device={name!r} but this torch build sees no CUDA device; use train.device=cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"train.device: {name!r} is not supported (use cpu, cuda or cuda:N)")
    return dev
