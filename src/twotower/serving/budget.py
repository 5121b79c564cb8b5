"""Bound the work of one HTTP request: a compute-time budget and abandonment when the client leaves.

Sizes alone do not bound work (256 requests x k=1000 x explain is small on the
wire and hours of tower passes), so long loops call :meth:`WorkBudget.check`
between steps: past the deadline it raises :class:`BudgetExceeded` (HTTP 503
with a message saying what to ask for instead), after the client disconnected
it raises :class:`ClientGone` and the worker thread stops at the next step.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from time import monotonic  # imported by name so a test can fake this clock alone (not asyncio's)

from twotower.errors import TwoTowerError

__all__ = ["WorkBudget", "BudgetExceeded", "ClientGone", "ask_instead"]

#: the way out whatever the request held: the deadline is the server's own
LARGER_BUDGET = "start the server with a larger --time-budget"


def ask_instead(asks: Sequence[str]) -> str:
    """What a 503 says to do instead: ``asks``, what the request held that it could ask less of (each a clause:
    ``"send fewer filter values"``), then the larger budget. A fixed list named filters, explain_k, batches and
    explain to a request that sent none of them."""
    if not asks:
        return f"the request holds nothing to ask less of: {LARGER_BUDGET}"
    return ", ".join(asks) + f", or {LARGER_BUDGET}"


class BudgetExceeded(TwoTowerError):
    """A request needed more computation than ``time_budget_s`` (HTTP 503)."""


class ClientGone(TwoTowerError):
    """The client disconnected; the work was abandoned (nobody reads the answer)."""


class WorkBudget:
    """A deadline (started by :meth:`start`, in the worker) and a flag the event loop sets on disconnect."""

    #: what to do instead, in the 503 message (a route passes what its request could ask less of: ask_instead)
    HINT = ask_instead(())

    def __init__(self, seconds: float, what: str = "this request", hint: str = HINT) -> None:
        self.seconds = float(seconds)
        self.what = what
        self.hint = hint
        self.gone = threading.Event()
        self.deadline: float | None = None
        self.steps = 0  # checks passed (tests read it to see that abandoned work stopped)

    def start(self) -> "WorkBudget":
        self.deadline = monotonic() + self.seconds
        return self

    def remaining(self) -> float:
        """Seconds left before the deadline (negative past it; ``inf`` before :meth:`start`)."""
        return float("inf") if self.deadline is None else self.deadline - monotonic()

    def check(self) -> None:
        """Raise if the client left or the deadline passed; call between units of work."""
        if self.gone.is_set():
            raise ClientGone("the client disconnected; work abandoned")
        if self.deadline is not None and monotonic() > self.deadline:
            raise BudgetExceeded(
                f"{self.what} needed more than {self.seconds:g} s of computation (the server's --time-budget) and "
                f"was abandoned; {self.hint}"
            )
        self.steps += 1
