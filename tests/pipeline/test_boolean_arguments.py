"""The Python API's boolean arguments take True or False, nothing Python merely reads as true or false.

``tt.recommend(run, ['42'], exclude_seen='no')`` excluded the seen items (a non-empty string is true) and
``exact='yes'`` ranked exactly, without a word; evaluate_run already refused a non-boolean ``exclude_seen``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import twotower as tt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tt.TrainedRun:
    return tt.TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("boolean-arguments")))


CALLS = {
    "recommend exclude_seen": (lambda run, v: tt.recommend(run, ["u3"], exclude_seen=v), "exclude_seen"),
    "recommend exact": (lambda run, v: tt.recommend(run, ["u3"], exact=v), "exact"),
    "recommend history exact": (lambda run, v: tt.recommend(run, history=["i1"], exact=v), "exact"),
    "similar exact": (lambda run, v: tt.similar(run, ["i1"], exact=v), "exact"),
    "evaluate_run exclude_seen": (lambda run, v: tt.evaluate_run(run, exclude_seen=v, split="valid"), "exclude_seen"),
    "TrainedRun.load verify": (lambda run, v: tt.TrainedRun.load(run.dir, verify=v), "verify"),
    "export_onnx force": (lambda run, v: tt.export_onnx(run, run.dir.parent / "onnx", force=v), "force"),
    "train_run resume": (lambda run, v: tt.train_run(run.config, run.dir.parent / "again", resume=v), "resume"),
}


@pytest.mark.parametrize("value", ["no", "yes", 0, 1, [], None])
@pytest.mark.parametrize("call", list(CALLS))
def test_a_value_that_is_not_true_or_false_is_refused_by_name(run, call, value):
    fn, name = CALLS[call]
    if value is None and name == "verify":  # None: TWOTOWER_NO_VERIFY decides, as documented
        return
    either = "True, False or None" if name == "verify" else "True or False"
    with pytest.raises(tt.ConfigError, match=rf"^{name} must be {either}, got {value!r}".replace("[", r"\[")
                       .replace("]", r"\]")):
        fn(run, value)


def test_true_false_and_numpy_bools_are_taken(run):
    assert tt.recommend(run, ["u3"], exclude_seen=np.bool_(False)) == tt.recommend(run, ["u3"], exclude_seen=False)
    assert tt.recommend(run, ["u3"], exact=np.True_) == tt.recommend(run, ["u3"], exact=True)
    assert tt.similar(run, ["i1"], exact=np.True_) == tt.similar(run, ["i1"], exact=True)
