"""The in-batch kernel's work shared with the training step's side thread (losses/fused_xent.py, SideGradient): the
second half of a block's rows and the candidates' gradient computed there give the numbers of one thread, bit for
bit, and a failure there is raised in the step."""
from __future__ import annotations

import pytest
import torch

import twotower.losses.fused_xent as fx
from twotower.losses.side_gradient import SideGradient
from twotower.losses.fused_xent import fused_softmax_xent
from twotower.training.side_worker import SideWorker


def _inputs(b: int, n: int) -> dict:
    g = torch.Generator().manual_seed(b * 1000 + n)
    q = torch.nn.functional.normalize(torch.randn(b, 16, generator=g), dim=1).requires_grad_()
    c = torch.nn.functional.normalize(torch.randn(n, 16, generator=g), dim=1).requires_grad_()
    ids = torch.randint(0, n // 3, (n,), generator=g)  # repeated ids: accidental hits
    rows = torch.arange(b)
    pos = ids[:b]
    hit = (pos[:, None] == ids[None, :]) & (rows[:, None] != torch.arange(n)[None, :])
    drop = hit.nonzero().unbind(1)
    return {"q": q, "c": c, "cols": rows, "bias": torch.rand(n, generator=g), "drop": drop, "ids": (pos, ids)}


def _run(x: dict, side: SideWorker | None, scale: float = 1.0) -> tuple[float, float, torch.Tensor, torch.Tensor]:
    q, c = x["q"].detach().clone().requires_grad_(), x["c"].detach().clone().requires_grad_()
    deferred = SideGradient(side.submit) if side is not None else None
    loss, st = fused_softmax_xent(q, c, x["cols"], 20.0, bias=x["bias"], drop=x["drop"], ids=x["ids"], side=deferred)
    (loss * scale).backward()
    if deferred is None:
        return float(loss.detach()), st["correct"], q.grad, c.grad
    assert c.grad is None  # the candidates' gradient came from the side thread, not through autograd
    return float(loss.detach()), st["correct"], q.grad, side.submit(deferred.wait).result()


@pytest.mark.parametrize(("b", "n", "block_bytes"), [(300, 300, None), (257, 400, None), (512, 512, 4 * 512 * 200),
                                                      (40, 60, None)])
def test_the_side_threads_share_gives_one_threads_numbers_bit_for_bit(b: int, n: int, block_bytes: int | None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if block_bytes is not None:  # several blocks of rows, each split in halves
        monkeypatch.setattr(fx, "_BLOCK_BYTES", block_bytes)
    x = _inputs(b, n)
    halves: list[int] = []
    real = fx._rows

    def spy(*args):
        halves.append(args[-1] - args[-2])
        return real(*args)

    monkeypatch.setattr(fx, "_rows", spy)
    with SideWorker("twotower-side") as side:
        for scale in (1.0, 0.37):
            alone, beside = _run(x, None, scale), _run(x, side, scale)
            assert alone[0] == beside[0] and alone[1] == beside[1]
            assert torch.equal(alone[2], beside[2]) and torch.equal(alone[3], beside[3])
    if b >= fx._SPLIT_ROWS:
        assert min(halves) < b  # the rows were shared out
    else:
        assert set(halves) == {b}  # a small batch is not worth a hand-over


def test_a_failure_in_the_side_threads_half_is_raised_in_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _inputs(300, 300)
    real = fx._rows

    def failing(*args):
        if args[-2] > 0:  # the second half: the side thread's
            raise RuntimeError("side half failed")
        return real(*args)

    monkeypatch.setattr(fx, "_rows", failing)
    with SideWorker("twotower-side") as side, pytest.raises(RuntimeError, match="side half failed"):
        _run(x, side)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_failure_in_the_step_threads_half_is_raised_as_it_is(monkeypatch: pytest.MonkeyPatch, error: type) -> None:
    """A Ctrl-C landing in the first half (the step thread's) came out as "UnboundLocalError: cannot access local
    variable 'parts'" from the ``finally`` that waits for the side half: a traceback where `twotower train` says
    "interrupted: ... run the same command with --resume"."""
    x = _inputs(300, 300)
    real = fx._rows
    side_halves: list[int] = []

    def failing(*args):
        if args[-2] == 0:  # the first half: the step thread's
            raise error("first half failed")
        side_halves.append(args[-2])
        return real(*args)

    monkeypatch.setattr(fx, "_rows", failing)
    with SideWorker("twotower-side") as side:
        with pytest.raises(error, match="first half failed"):
            _run(x, side)
        assert side_halves  # and the side half ran (it writes into the queries' gradient): it was waited for
