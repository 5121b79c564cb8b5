"""Progress lines of a long evaluation: users done, rate, ETA; none unless asked for."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.errors import ConfigError
from twotower.evaluation.protocol import EvalProtocol, evaluate


class _Scorer:
    def score(self, users: np.ndarray) -> np.ndarray:
        return np.tile(np.arange(6, dtype=np.float32), (len(users), 1))


def _relevant() -> sp.csr_matrix:
    return sp.csr_matrix(np.eye(5, 6, dtype=np.float32))  # 5 users, one relevant item each


def test_progress_lines_count_users_and_give_an_eta(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="twotower.evaluation.protocol"):
        quiet = evaluate(_Scorer(), _relevant(), None, EvalProtocol(ks=(2,), batch_users=2))
        assert not caplog.records  # no interval: no lines (tuning grids, library callers)
        res = evaluate(_Scorer(), _relevant(), None, EvalProtocol(ks=(2,), batch_users=2, log_every_s=1e-9))
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(",")[0] for line in lines] == ["evaluation: 2 / 5 users", "evaluation: 4 / 5 users",
                                                       "evaluation: 5 / 5 users"]
    assert all("users/s" in line and "ETA" in line for line in lines)
    assert lines[-1].endswith("ETA 0s")
    assert res == quiet


def test_log_interval_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="log_every_s"):
        EvalProtocol(log_every_s=0)


def test_progress_lines_name_what_is_evaluated(caplog: pytest.LogCaptureFixture) -> None:
    # a closing table evaluates the two-tower model and each baseline in turn: lines must say whose they are
    with caplog.at_level(logging.INFO, logger="twotower.evaluation.protocol"):
        evaluate(_Scorer(), _relevant(), None, EvalProtocol(ks=(2,), batch_users=2, log_every_s=1e-9),
                 what="evaluating itemknn (k=10) on test")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[-1].startswith("evaluating itemknn (k=10) on test: 5 / 5 users")
