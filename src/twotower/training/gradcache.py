"""GradCache: a large contrastive batch in small chunks, with exact gradients.

Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory
Limited Setup" (RepL4NLP). The in-batch softmax couples every query with
every candidate, so the batch cannot simply be split into micro-batches. But
the loss depends on the towers only through the embeddings, so by the chain
rule ``dL/dtheta = sum_chunks (dL/de_chunk) . (de_chunk/dtheta)``:

1. embed every chunk under ``no_grad`` (no activations kept), recording the RNG
   state before each chunk;
2. compute the loss on the concatenated, detached embeddings and backprop to
   get ``dL/de`` (the "gradient cache"), one small ``[B, D]`` tensor per side;
3. re-embed each chunk with grad, the RNG restored so dropout draws the same
   masks, and call ``e_chunk.backward(dL/de_chunk)``, accumulating parameter
   gradients chunk by chunk.

Peak activation memory is one chunk's; the price is a second forward pass.
Under DDP, wrap all but the last re-embedding backward in ``model.no_sync()``
or gradients are all-reduced once per chunk (correct, but slow).

Shape legend: ``B`` batch, ``C`` chunk size, ``D`` dim.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from twotower.errors import ConfigError, DataError

__all__ = ["gradcache_step", "chunked", "RngState"]


class RngState:
    """Snapshot of the CPU generator and, once CUDA is in use, every CUDA generator."""

    def __init__(self) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = (
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        )

    def restore(self) -> None:
        """Set the global generators back to this snapshot."""
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)

    def _devices(self) -> list[int]:
        return list(range(len(self.cuda))) if self.cuda is not None else []


def _embed_no_grad(fn: Callable[[Any], Tensor], chunks: Sequence[Any], side: str) -> tuple[list[Tensor], list[RngState]]:
    embs, states = [], []
    for i, chunk in enumerate(chunks):
        states.append(RngState())
        with torch.no_grad():
            emb = fn(chunk)
        if not isinstance(emb, Tensor) or emb.dim() != 2:
            raise DataError(f"{side}_fn must return a 2-D [C, D] embedding tensor; chunk {i} gave {type(emb).__name__}")
        embs.append(emb)
    return embs, states


def _replay(fn: Callable[[Any], Tensor], chunks: Sequence[Any], states: Sequence[RngState], grads: Sequence[Tensor]) -> None:
    for chunk, state, grad in zip(chunks, states, grads):
        # fork_rng: the replay must not rewind the caller's generators, which
        # stay where the first pass left them (as after one ordinary forward).
        with torch.random.fork_rng(devices=state._devices()):
            state.restore()
            emb = fn(chunk)
        if emb.requires_grad:
            emb.backward(grad)


def gradcache_step(
    query_fn: Callable[[Any], Tensor],
    item_fn: Callable[[Any], Tensor],
    query_chunks: list[Any],
    item_chunks: list[Any],
    loss_fn: Callable[[Tensor, Tensor], Tensor],
) -> Tensor:
    """One GradCache forward/backward; parameter ``.grad`` accumulate as for ``loss.backward()``.

    ``query_fn(chunk) -> [C_q, D]`` and ``item_fn(chunk) -> [C_i, D]`` embed one
    chunk (any input type, e.g. a dict of tensors from :func:`chunked`);
    ``loss_fn(queries[B_q, D], items[B_i, D]) -> scalar`` sees the chunks
    concatenated in order, exactly as if the whole batch had been embedded at
    once. The towers must be deterministic given the RNG state (dropout is
    fine; batch norm is not chunk-invariant). Query chunks are embedded before
    item chunks. Returns the loss, detached. Does not zero or step anything.
    """
    if not query_chunks or not item_chunks:
        raise DataError("gradcache_step needs at least one query chunk and one item chunk")
    q_embs, q_states = _embed_no_grad(query_fn, query_chunks, "query")
    i_embs, i_states = _embed_no_grad(item_fn, item_chunks, "item")
    q_all = torch.cat(q_embs).detach().requires_grad_(True)  # [B_q, D]
    i_all = torch.cat(i_embs).detach().requires_grad_(True)  # [B_i, D]
    loss = loss_fn(q_all, i_all)
    if not isinstance(loss, Tensor) or loss.dim() != 0:
        raise DataError("loss_fn must return a scalar tensor")
    loss.backward()
    zeros = torch.zeros_like
    q_grad = q_all.grad if q_all.grad is not None else zeros(q_all)
    i_grad = i_all.grad if i_all.grad is not None else zeros(i_all)
    _replay(query_fn, query_chunks, q_states, q_grad.split([e.shape[0] for e in q_embs]))
    _replay(item_fn, item_chunks, i_states, i_grad.split([e.shape[0] for e in i_embs]))
    return loss.detach()


def chunked(inputs: Any, size: int) -> list[Any]:
    """Split a batch into chunks of ``size`` rows along dim 0 (the last may be smaller).

    ``inputs`` is a tensor, a list/tuple (sliced as a sequence of rows) or a
    mapping whose values are any of these (split together; all must have the
    same number of rows). Non-sequence mapping values (e.g. a scalar flag) are
    copied into every chunk.
    """
    if int(size) != size or size < 1:
        raise ConfigError(f"size: must be an integer >= 1 (rows per chunk), got {size!r}")
    n = _n_rows(inputs)
    if n is None:
        raise DataError(f"cannot chunk {type(inputs).__name__}: expected a tensor, list or mapping of them")
    return [_slice(inputs, start, min(start + size, n)) for start in range(0, n, size)]


def _n_rows(x: Any) -> int | None:
    if isinstance(x, Tensor):
        return x.shape[0] if x.dim() > 0 else None
    if isinstance(x, (list, tuple)):
        return len(x)
    if isinstance(x, Mapping):
        counts = {k: r for k, v in x.items() if (r := _n_rows(v)) is not None}
        if len(set(counts.values())) > 1:
            raise DataError(f"all batch fields must have the same number of rows to chunk, got {counts}")
        return next(iter(counts.values()), None)
    return None


def _slice(x: Any, start: int, stop: int) -> Any:
    if isinstance(x, Tensor):
        return x[start:stop] if x.dim() > 0 else x
    if isinstance(x, (list, tuple)):
        return x[start:stop]
    if isinstance(x, Mapping):
        return {k: _slice(v, start, stop) for k, v in x.items()}
    return x
