"""A run's EASE baseline takes the item-item term's tuning rows for the λ both grids hold: each solved once."""
from __future__ import annotations

import json


import twotower.evaluation.baselines as baselines
from tests.explain.explain_tiny_run import train_tiny_run
from twotower.config import ItemItemConfig
from twotower.evaluation.baselines import EASE_LAMBDAS
from twotower.pipeline.artifacts import TrainedRun, write_manifest
from twotower.pipeline.evaluate_run import evaluate_run
from twotower.pipeline.tuned_baselines import TUNED_FILE


def test_the_baseline_solves_only_the_lambdas_the_term_did_not_and_scores_as_before(tmp_path, monkeypatch) -> None:
    # on 11,700 items the term's 3 λ and the baseline's 7 were all solved (343 s + 400 s), 3 of them twice
    solved: list[float] = []
    real = baselines._ease_weights
    monkeypatch.setattr(baselines, "_ease_weights", lambda gram, l2: (solved.append(float(l2)), real(gram, l2))[1])
    out = train_tiny_run(tmp_path / "run", extra=("model.item_item.rank=4",))
    term = [float(lam) for lam in ItemItemConfig.lambdas]
    assert solved == term and set(term) < set(EASE_LAMBDAS)

    del solved[:]
    shared = evaluate_run(TrainedRun.load(out), split="valid", baselines=("ease",), ks=(10,))
    best = json.loads((out / TUNED_FILE).read_text())["entries"]["ease"]["value"]
    # the others once each, and the chosen λ once more where its row came from the term (no model kept for it)
    assert solved == [float(lam) for lam in EASE_LAMBDAS if lam not in term] + ([best] if best in term else [])
    record = json.loads((out / "run.json").read_text())["item_item"]["lambda_table"]
    assert [row["l2"] for row in record["rows"]] == term

    # the same table as a run without the term's rows (solving all 7) gives
    info = json.loads((out / "run.json").read_text())
    del info["item_item"]["lambda_table"]
    (out / "run.json").write_text(json.dumps(info))
    write_manifest(out)
    (out / TUNED_FILE).unlink()
    del solved[:]
    alone = evaluate_run(TrainedRun.load(out), split="valid", baselines=("ease",), ks=(10,))
    assert solved == [float(lam) for lam in EASE_LAMBDAS]
    assert json.loads((out / TUNED_FILE).read_text())["entries"]["ease"]["value"] == best
    drop = {"fit_s", "eval_s"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in shared] == \
           [{k: v for k, v in r.items() if k not in drop} for r in alone]


def test_rows_tuned_on_a_sample_of_the_validation_users_are_not_taken(tmp_path, monkeypatch) -> None:
    solved: list[float] = []
    real = baselines._ease_weights
    monkeypatch.setattr(baselines, "_ease_weights", lambda gram, l2: (solved.append(float(l2)), real(gram, l2))[1])
    out = train_tiny_run(tmp_path / "run", extra=("model.item_item.rank=4", "train.valid_max_users=10"))
    del solved[:]
    evaluate_run(TrainedRun.load(out), split="valid", baselines=("ease",), ks=(10,))
    assert solved == [float(lam) for lam in EASE_LAMBDAS]




def test_the_baseline_tunes_on_the_terms_sample_of_ease_tune_max_users_and_takes_its_rows(tmp_path,
                                                                                           monkeypatch) -> None:
    """The EASE baseline's λ is chosen on the seeded sample of ``eval.ease_tune_max_users`` validation users the
    item-item term chose its λ on: each λ scores that many users, and the term's rows are still taken."""
    solved: list[float] = []
    real = baselines._ease_weights
    monkeypatch.setattr(baselines, "_ease_weights", lambda gram, l2: (solved.append(float(l2)), real(gram, l2))[1])
    out = train_tiny_run(tmp_path / "run", extra=("model.item_item.rank=4", "eval.ease_tune_max_users=5"))
    del solved[:]
    evaluate_run(TrainedRun.load(out), split="valid", baselines=("ease",), ks=(10,))
    entry = json.loads((out / TUNED_FILE).read_text())["entries"]["ease"]
    term = [float(lam) for lam in ItemItemConfig.lambdas]
    best = entry["value"]  # solved once more where its row came from the term (no model kept for it)
    assert solved == [float(lam) for lam in EASE_LAMBDAS if lam not in term] + ([best] if best in term else [])
    assert [row["users_evaluated"] for row in entry["table"]] == [5] * len(EASE_LAMBDAS)
    assert entry["key"]["max_users"] == 5 and entry["key"]["seed"] == TrainedRun.load(out).config.train.seed
