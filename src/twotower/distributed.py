"""Every distributed helper in one place: process group, rank queries, collectives, gathers.

A ground-floor module (it imports nothing from the rest of the package except
errors, config and utils.runtime), so losses, training and the index build all read it without
running against the layers.

Every helper works without a process group (single process): ``rank() == 0``,
``world_size() == 1``, ``barrier()`` and ``cleanup()`` do nothing,
``all_reduce_mean`` returns its input and the gathers return their input.
Environment variables are read only in :func:`init_from_env`, the edge.

Gradient convention of :func:`gather_with_grad`. ``torch.distributed.all_gather``
returns tensors with no autograd history; :func:`gather_with_grad` keeps the
local slice attached *and* routes the gradient that other ranks' losses put on
this rank's slice back here (its backward all-reduces the gradient of the
gathered tensor and keeps the local slice), so summed over ranks the gradients
equal those of one process on the global batch.

Shape legend: ``B`` local batch, ``W`` world size, ``D`` dim.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Collection, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor

from twotower.errors import ConfigError, DataError
from twotower.utils.runtime import resolve_device

if TYPE_CHECKING:
    from twotower.config import TrainConfig

__all__ = [
    "init_from_env", "init_distributed", "is_initialized", "is_main", "rank", "world_size", "barrier",
    "all_reduce_mean", "cleanup", "distributed_world", "gather_with_grad", "gather_no_grad", "broadcast_value",
    "lost_peer", "timed_out", "silent_ranks", "rank_device", "torchrun_kill_grace_s", "other_ranks_quiet",
]

logger = logging.getLogger(__name__)

_BACKENDS = ("gloo", "nccl")


def is_initialized() -> bool:
    """Whether a default process group exists."""
    return dist.is_available() and dist.is_initialized()


def init_from_env(backend: str | None = None, timeout_s: float | None = None) -> bool:
    """Join the process group described by torchrun's environment variables.

    Reads ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
    ``MASTER_PORT``. ``backend`` defaults to ``"nccl"`` when CUDA is available
    (and then pins this process to ``cuda:LOCAL_RANK``), else ``"gloo"``.
    Returns True when a process group is (already or now) initialised, False
    when ``WORLD_SIZE`` is unset or 1 -- plain single-process training. ``timeout_s``: how long a collective
    waits for the other ranks (None: torch's default, 30 minutes for gloo).
    """
    if is_initialized():
        return True
    world = int(os.environ.get("WORLD_SIZE", "1") or "1")
    if world <= 1:
        return False
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise ConfigError(
            f"WORLD_SIZE={world} but {', '.join(missing)} not set; launch with "
            "`torchrun --nproc_per_node=N ...`, which sets them"
        )
    _stop_with_launcher()
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in _BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(_BACKENDS)} (or None to choose), got {backend!r}")
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise ConfigError("backend 'nccl' needs CUDA; use 'gloo' on CPU")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    timeout = {} if timeout_s is None else {"timeout": timedelta(seconds=timeout_s)}  # torch 2.2 takes no None
    dist.init_process_group(backend=backend, init_method="env://", **timeout)
    logger.info("joined process group: backend=%s rank=%d world_size=%d", backend, dist.get_rank(), world)
    return True


def _stop_with_launcher() -> None:
    """Have the kernel send this rank SIGTERM when torchrun dies (Linux; elsewhere nothing changes).

    torchrun starts every rank in a session of its own, so a ``kill -9`` of torchrun, or of its process group,
    or the OOM killer taking it, left the ranks training on together, writing checkpoints into the run folder
    and holding its writer lock (a ``--resume`` was refused: "another twotower train (pid N) is writing this
    folder"). With the signal a rank stops as on a scheduler's SIGTERM: the checkpoint is left for ``--resume``.
    Only under torchrun (its ``TORCHELASTIC_RUN_ID``): another launcher, such as a script that starts the ranks
    in the background and exits, may well leave them running on purpose.
    """
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux") or not os.environ.get("TORCHELASTIC_RUN_ID"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl to call (another libc): run as before
        return
    if os.getppid() != parent:  # the launcher died before the request was made: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)


def rank() -> int:
    """This process's global rank (0 without a process group)."""
    return dist.get_rank() if is_initialized() else 0


def world_size() -> int:
    """Number of processes (1 without a process group)."""
    return dist.get_world_size() if is_initialized() else 1


def is_main() -> bool:
    """True on rank 0: the process that logs, evaluates and writes artefacts."""
    return rank() == 0


@contextlib.contextmanager
def other_ranks_quiet() -> Iterator[None]:
    """On ranks > 0 of a process group: twotower's log lines below ERROR left out while the block runs, as the
    commands log under torchrun (cli/main.py). Every rank reads the same data, so a script calling ``tt.train_run``
    printed rank 0's lines and warnings again, once per rank and untagged. A ``twotower`` logger at DEBUG (the
    commands' ``-v``) still logs on every rank; the logger's own level is put back after the block, so the
    caller's logging is its own again."""
    package = logging.getLogger("twotower")
    if rank() == 0 or package.getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    level = package.level
    package.setLevel(logging.ERROR)
    try:
        yield
    finally:
        package.setLevel(level)


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    if is_initialized():
        dist.barrier()


def all_reduce_mean(values: Mapping[str, float]) -> dict[str, float]:
    """Average a dict of floats over ranks; every rank must pass the same keys.

    Keys are sorted so that every rank packs them in the same order; the values
    travel in one float64 tensor (on the current CUDA device under NCCL).
    """
    out = {k: float(v) for k, v in values.items()}
    if not is_initialized() or world_size() == 1 or not out:
        return out
    keys = sorted(out)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    packed = torch.tensor([out[k] for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(packed, op=dist.ReduceOp.SUM)
    packed /= world_size()
    return dict(zip(keys, packed.tolist()))


#: What gloo's and the TCP store's errors say when the other end of a collective went away (its process ended).
_PEER_GONE = ("connection closed by peer", "connection reset by peer", "broken pipe", "connection refused")


def lost_peer(e: BaseException) -> bool:
    """True for the error a collective raises on this rank when another rank has ended (killed, failed).

    gloo raises a plain RuntimeError ("[.../gloo/transport/tcp/pair.cc] Connection closed by peer ..."), not
    always a ``torch.distributed.DistError``, so its text is read too; only with a process group of 2 or more.
    """
    if not is_initialized() or world_size() < 2 or not isinstance(e, RuntimeError):
        return False
    return isinstance(e, dist.DistError) or any(s in str(e).lower() for s in _PEER_GONE)


def timed_out(e: BaseException) -> bool:
    """True for the error a collective raises on this rank when another rank did not take part in it within the
    group's timeout (``train.dist_timeout_s``): gloo's "Timed out waiting 2000ms for recv operation to complete",
    a plain RuntimeError; only with a process group of 2 or more."""
    if not is_initialized() or world_size() < 2 or not isinstance(e, RuntimeError):
        return False
    return "timed out" in str(e).lower()


def silent_ranks(wait_s: float, frozen: Collection[int] = ()) -> list[int] | None:
    """After a collective timed out on this rank: the other ranks that did not time out too within ``wait_s``
    seconds, in order. A rank that hangs never reaches the collective while the others reach it and give up on it
    at about the same moment; each that gives up marks itself in the launcher's TCP store (``MASTER_ADDR``,
    ``MASTER_PORT``), which answers from a thread of its own even while its process hangs. None when the store
    cannot be reached (its process ended); gloo's error names no rank. The ranks in ``frozen`` (named by the
    heartbeat: their process is stopped) cannot mark themselves: they are not waited for, and are silent unless
    marked already."""
    me, world = rank(), world_size()
    tag = f"twotower/timed_out/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    missing: list[int] | None = None
    try:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=timedelta(seconds=max(wait_s, 1.0)))
        store.set(f"{tag}/{me}", "1")
        deadline = time.monotonic() + wait_s
        while True:
            missing = [r for r in range(world) if r != me and not store.check([f"{tag}/{r}"])]
            if all(r in frozen for r in missing) or time.monotonic() >= deadline:
                return missing
            time.sleep(0.1)
    except (RuntimeError, KeyError, ValueError):  # the store went with its process: what was seen before
        return missing


def torchrun_kill_grace_s() -> int | None:
    """The seconds torchrun's agent waits for its workers after SIGTERM, when one of them failed, before it sends
    SIGKILL: the default of the installed torch's ``PContext.close`` (30 in torch 2.13; no setting changes it on
    this path). None if this torch has no such default."""
    import inspect

    try:
        from torch.distributed.elastic.multiprocessing.api import PContext

        grace = inspect.signature(PContext.close).parameters["timeout"].default
    except (ImportError, AttributeError, KeyError, TypeError, ValueError):
        return None
    return grace if isinstance(grace, (int, float)) and not isinstance(grace, bool) else None


def cleanup() -> None:
    """Leave the process group, if any."""
    if is_initialized():
        dist.destroy_process_group()


def init_distributed(train: "TrainConfig") -> bool:
    """Join torchrun's process group for a training run when ``WORLD_SIZE > 1``; False for one process.

    The backend is ``train.distributed_backend``, else NCCL when
    ``train.device`` is CUDA (each process then computes on
    ``cuda:LOCAL_RANK``) and gloo on CPU. NCCL with CPU tensors is refused with a
    clear message rather than failing inside a collective. Idempotent: a second
    call finds the group joined and returns True.
    """
    on_cuda = train.device.startswith("cuda")
    rank_device(train.device, int(os.environ.get("WORLD_SIZE", "1") or "1"), int(os.environ.get("LOCAL_RANK", "0") or "0"))
    if on_cuda:
        # the missing device first, in one process's words: the backend's "needs CUDA; use 'gloo'" blamed a setting
        # its user never made, and gloo would not have trained on the GPU asked for
        resolve_device(train.device)
    backend = train.distributed_backend or ("nccl" if on_cuda else "gloo")
    if backend == "nccl" and not on_cuda:
        raise ConfigError(
            "train.distributed_backend=nccl reduces CUDA tensors only; set train.device=cuda (each rank then "
            "uses cuda:LOCAL_RANK) or use gloo (the default on CPU)"
        )
    joined = init_from_env(backend, train.dist_timeout_s)
    if joined and on_cuda:
        # one GPU per process: rank r on this node computes on cuda:LOCAL_RANK
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return joined


def rank_device(device: str, world: int, local_rank: int) -> str:
    """The device a rank computes on for ``train.device``: under torchrun (``world > 1``) each process has the GPU
    of its ``LOCAL_RANK``, so ``cuda`` is ``cuda:LOCAL_RANK``; another GPU named (``cuda:1`` on local rank 0) is
    refused, where it was replaced by ``cuda:LOCAL_RANK`` without a word. One process keeps the device as given."""
    if world <= 1 or not device.startswith("cuda"):
        return device
    assigned = f"cuda:{local_rank}"
    if device not in ("cuda", assigned):
        raise ConfigError(
            f"train.device={device} under torchrun: each process computes on the GPU torchrun assigns it, "
            f"cuda:LOCAL_RANK ({assigned} for this one, LOCAL_RANK={local_rank}); set train.device=cuda, and choose "
            "the GPUs with CUDA_VISIBLE_DEVICES (CUDA_VISIBLE_DEVICES=1 makes GPU 1 the cuda:0 of LOCAL_RANK 0)")
    return assigned


def broadcast_value(value: float, device: torch.device | None = None) -> float:
    """``value`` as rank 0 has it (unchanged in one process)."""
    if world_size() == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(t, src=0)
    return float(t.item())


def distributed_world(group: dist.ProcessGroup | None = None) -> tuple[int, int]:
    """``(rank, world_size)``, or ``(0, 1)`` when no process group is initialised."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def _gather_sizes(x: Tensor, group: dist.ProcessGroup | None) -> list[int]:
    """Every rank's ``x.shape[0]``, in rank order."""
    size = torch.tensor([x.shape[0]], dtype=torch.long, device=x.device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size(group))]
    dist.all_gather(sizes, size, group=group)
    return [int(s.item()) for s in sizes]


def _gather_padded(x: Tensor, group: dist.ProcessGroup | None, sizes: list[int] | None = None) -> list[Tensor]:
    """All-gather tensors whose first dim differs across ranks; one tensor per rank.

    Sizes are gathered first (unless known); every rank pads to the largest,
    gathers, and strips the padding.
    """
    if sizes is None:
        sizes = _gather_sizes(x, group)
    largest = max(sizes)
    if largest == 0:
        return [x.new_empty((0, *x.shape[1:])) for _ in sizes]
    padded = x.detach()
    if x.shape[0] < largest:
        pad = x.new_zeros((largest - x.shape[0], *x.shape[1:]))
        padded = torch.cat([padded, pad], dim=0)  # [B_max, ...]
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded.contiguous(), group=group)
    return [p[:s] for p, s in zip(parts, sizes)]


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, group: dist.ProcessGroup | None, sizes: list[int] | None) -> Tensor:  # type: ignore[override]
        if sizes is None:
            sizes = _gather_sizes(x, group)
        parts = _gather_padded(x, group, sizes)
        rank = dist.get_rank(group)
        ctx.group = group
        ctx.start = sum(sizes[:rank])
        ctx.size = sizes[rank]
        parts[rank] = x  # the local slice is exactly the input
        return torch.cat(parts, dim=0)  # [sum_r B_r, ...]

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:  # type: ignore[override]
        # Every rank's loss may depend on this rank's slice: sum their grads.
        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=ctx.group)
        return total[ctx.start : ctx.start + ctx.size], None, None


def gather_with_grad(x: Tensor, group: dist.ProcessGroup | None = None, *, sizes: list[int] | None = None) -> Tensor:
    """Concatenate ``x[B_r, ...]`` from every rank in rank order: ``[sum_r B_r, ...]``.

    The slice at this rank's offset *is* ``x`` (gradient flows to it), and the
    backward pass sums, over all ranks, the gradient each rank's loss puts on
    that slice (see the module docstring). ``B_r`` may differ across ranks
    (``sizes``, when every rank already knows them, saves one collective);
    trailing dims and dtype must agree. Every rank must call it (a collective),
    and every rank must run backward through it if one does. Without an
    initialised process group, or with world size 1, returns ``x`` unchanged.
    """
    _, world = distributed_world(group)
    if world == 1:
        return x
    if x.dim() == 0:
        raise DataError("gather_with_grad needs a tensor with a batch dimension, got a scalar")
    return _GatherWithGrad.apply(x, group, sizes)


def gather_no_grad(x: Tensor, group: dist.ProcessGroup | None = None, *, sizes: list[int] | None = None) -> Tensor:
    """Like :func:`gather_with_grad` for tensors that need no gradient (ids, log_q)."""
    _, world = distributed_world(group)
    if world == 1:
        return x
    return torch.cat(_gather_padded(x, group, sizes), dim=0)
