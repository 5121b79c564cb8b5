"""The item-item term fitted after training: factors, the weight chosen on validation, what a run saves."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from tests.explain.explain_tiny_run import train_tiny_run
from twotower.config import ConfigError, load_config
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.item_item import factorise


@pytest.mark.parametrize("n", [40, 400])  # exact SVD, then the seeded randomized one
def test_factors_keep_the_leading_directions_with_orthonormal_item_factors(n: int) -> None:
    rng = np.random.default_rng(0)
    low = rng.normal(size=(n, 6)) @ rng.normal(size=(6, n))  # rank 6, plus a little noise
    b = (low + 0.01 * rng.normal(size=(n, n))).astype(np.float32)
    p, q, share = factorise(b, 6, seed=3)
    assert p.shape == q.shape == (n, 6)
    assert np.allclose(q.T @ q, np.eye(6), atol=1e-4)
    assert share > 0.999
    assert np.abs(p @ q.T - b).max() < 0.1 * np.abs(b).max()
    again = factorise(b, 6, seed=3)
    assert np.array_equal(p, again[0]) and np.array_equal(q, again[1])  # the seed fixes the factors
    assert factorise(b[:5, :5], 64, seed=0)[1].shape == (5, 5)  # rank capped by the catalogue


def test_a_run_records_the_grid_keeps_the_best_weight_and_loads_as_scored(tmp_path) -> None:
    out = train_tiny_run(tmp_path / "run", history="recency", extra=("model.item_item.weights=[0, 0.2, 0.5, 1]",
                                                                      "model.item_item.rank=8"))
    info = json.loads((out / "run.json").read_text())["item_item"]
    table = {row["weight"]: row["NDCG@10"] for row in info["valid"]}
    assert sorted(table) == [0.0, 0.2, 0.5, 1.0]
    assert info["valid_metric"] == max(table.values())
    assert info["weight"] == min(w for w, m in table.items() if m == max(table.values()))  # ties: the smaller
    run = TrainedRun.load(out)
    width = 16 + (8 if info["weight"] > 0 else 0)
    assert run.item_embeddings().shape == (run.n_items, width)
    if info["weight"] > 0:
        assert float(run.model.user_tower.item_item.weight) == info["weight"]
        vec = run.history_vectors([np.asarray([0, 1, 2], np.int64)])[0]
        # the weight is split evenly: sqrt(w) on each side, so user and item-to-item scores both carry w
        assert vec.shape == (width,) and np.isclose(np.linalg.norm(vec[16:]), np.sqrt(info["weight"]), atol=1e-5)
        assert float(run.model.item_tower.item_item.weight) == info["weight"]


def test_the_weight_is_the_best_on_validation_and_zero_leaves_the_towers_alone(tmp_path, monkeypatch) -> None:
    from twotower.training.trainer import Trainer

    real = Trainer.validate
    seen: list[float] = []

    def validate(self, scorer=None):  # after the fit: a figure that peaks at weight 0.5
        part = self.model.user_tower.item_item
        if part is None:
            return real(self, scorer)
        seen.append(float(part.weight))
        return {"NDCG@10": 1.0 - abs(float(part.weight) - 0.5)}

    monkeypatch.setattr(Trainer, "validate", validate)
    out = train_tiny_run(tmp_path / "best", extra=("model.item_item.weights=[1, 0.5, 0, 0.25]",))
    assert seen == [0.0, 0.25, 0.5, 1.0]  # ascending
    assert json.loads((out / "run.json").read_text())["item_item"]["weight"] == 0.5

    monkeypatch.setattr(Trainer, "validate", lambda self, scorer=None: real(self, scorer)
                        if self.model.user_tower.item_item is None
                        else {"NDCG@10": 0.5})  # every weight alike: the tie keeps 0, no term
    out = train_tiny_run(tmp_path / "tie", extra=("model.item_item.weights=[0.5, 0]",))
    info = json.loads((out / "run.json").read_text())["item_item"]
    assert info["weight"] == 0.0
    run = TrainedRun.load(out)
    assert run.model.user_tower.item_item is None and run.item_embeddings().shape[1] == 16


def test_a_list_without_zero_is_kept_and_the_towers_alone_are_still_shown(tmp_path, monkeypatch, caplog) -> None:
    # model.item_item.weights=[1.0] kept a term that lowered validation, and the summary said "chosen" with no
    # figure of the towers alone to compare
    from twotower.cli.train_cmd import item_item_summary
    from twotower.training.trainer import Trainer

    real = Trainer.validate

    def validate(self, scorer=None):  # the towers alone 0.9, the term 0.4
        part = self.model.user_tower.item_item
        return real(self, scorer) if part is None else {"NDCG@10": 0.9 if float(part.weight) == 0.0 else 0.4}

    monkeypatch.setattr(Trainer, "validate", validate)
    with caplog.at_level("WARNING"):
        out = train_tiny_run(tmp_path / "forced", extra=("model.item_item.weights=[1.0]",))
    info = json.loads((out / "run.json").read_text())["item_item"]
    assert info["weight"] == 1.0 and info["weights"] == [1.0]
    assert {row["weight"]: row["NDCG@10"] for row in info["valid"]} == {0.0: 0.9, 1.0: 0.4}
    assert "the towers alone validate better (NDCG@10 0.9000) than every weight in model.item_item.weights" in caplog.text

    class Result:
        item_item, final_metric = info, 0.4

    assert item_item_summary(Result(), "NDCG@10") == (  # type: ignore[arg-type]
        "item-item term: weight 1 kept from model.item_item.weights [1] on valid NDCG@10 (0.4000; the towers alone "
        "0.9000, higher: the list leaves 0 out)")


def test_switched_off_or_without_validation_nothing_is_fitted(tmp_path, caplog) -> None:
    out = train_tiny_run(tmp_path / "off", extra=("model.item_item.enabled=false",))
    assert "item_item" not in json.loads((out / "run.json").read_text())
    assert TrainedRun.load(out).item_embeddings().shape[1] == 16
    from twotower.config import RunConfig
    from twotower.pipeline.run import train_run

    cfg = load_config(base=json.loads((out / "config.json").read_text()),
                      overrides=["data.valid=null", "model.item_item.enabled=true"])
    assert isinstance(cfg, RunConfig)
    with caplog.at_level("INFO"):
        train_run(cfg, tmp_path / "novalid")
    assert "item-item term: not fitted (no validation data to choose its weight on)" in caplog.text
    assert "item_item" not in json.loads((tmp_path / "novalid" / "run.json").read_text())


def test_a_run_saved_before_the_term_loads_as_it_was_trained(tmp_path) -> None:
    out = train_tiny_run(tmp_path / "old", extra=("model.item_item.enabled=false",))
    cfg = json.loads((out / "config.json").read_text())
    del cfg["model"]["item_item"]  # as an earlier version wrote it
    (out / "config.json").write_text(json.dumps(cfg))
    from twotower.pipeline.artifacts import write_manifest

    write_manifest(out)
    run = TrainedRun.load(out)
    assert run.config.model.item_item.enabled is False  # what it was trained with: no term
    assert run.model.user_tower.item_item is None


@pytest.mark.parametrize(("override", "said"), [
    ("model.item_item.weights=[]", "model.item_item.weights: must be one or more finite numbers >= 0, got []"),
    ("model.item_item.weights=[-0.1]", "model.item_item.weights: must be one or more finite numbers >= 0, got [-0.1]"),
    ("model.item_item.rank=0", "model.item_item.rank: must be in 1..4096, got 0"),
    ("model.item_item.lambdas=[0]", "model.item_item.lambdas: must be one or more finite numbers > 0, got [0.0]"),
])
def test_bad_settings_are_refused_by_name(override: str, said: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert said in str(e.value)


def test_the_term_travels_with_the_weights_and_the_fingerprint(tmp_path) -> None:
    out = train_tiny_run(tmp_path / "fp", extra=("model.item_item.weights=[0.5]", "model.item_item.rank=4"))
    run = TrainedRun.load(out)
    assert run.model.item_tower.item_item is not None
    before = run.fingerprint()
    with torch.no_grad():
        run.model.item_tower.item_item.factors[0, 0] += 1.0  # other item factors: another index
    run._fingerprint = None
    assert run.fingerprint() != before


def test_the_train_command_says_which_weight_it_chose_and_what_the_towers_alone_gave() -> None:
    from twotower.cli.train_cmd import item_item_summary
    from twotower.training.trainer import TrainResult

    grid = [{"weight": 0.0, "NDCG@10": 0.2033}, {"weight": 0.3, "NDCG@10": 0.2178}]
    chosen = TrainResult(12, 0.2033, 15, item_item={"weight": 0.3, "valid_metric": 0.2178, "valid": grid})
    assert item_item_summary(chosen, "NDCG@10") == ("item-item term: weight 0.3 chosen on valid NDCG@10 (0.2178; "
                                                    "the towers alone 0.2033)")
    assert chosen.final_metric == 0.2178 and chosen.best_metric == 0.2033
    none = TrainResult(12, 0.2033, 15, item_item={"weight": 0.0, "valid_metric": 0.2033, "valid": grid[:1]})
    assert item_item_summary(none, "NDCG@10") == "item-item term: none (the towers alone validate best on NDCG@10)"
    assert item_item_summary(TrainResult(12, 0.2033, 15), "NDCG@10") is None
    # chosen on a sample of eval.ease_tune_max_users: the figures are the sample's, not the early-stopping one's
    sampled = TrainResult(12, 0.1368, 15, item_item={"weight": 0.3, "valid_metric": 0.2178, "valid": grid,
                                                    "valid_users": 200, "valid_users_of": 10943})
    assert item_item_summary(sampled, "NDCG@10") == ("item-item term: weight 0.3 chosen on valid NDCG@10 (0.2178; "
                                                     "the towers alone 0.2033; a sample of 200 of the 10,943 "
                                                     "validation users)")


def test_towers_that_learned_nearly_nothing_get_their_figures_not_a_percentage() -> None:
    """3 optimizer steps an epoch (train.examples=sequence, batch 512, 1,500 users): the towers alone validated at
    NDCG@10 0.0007 and the log said the term gave "+3265.2% over the towers alone", a feat of nothing."""
    from twotower.cli.train_cmd import item_item_summary
    from twotower.pipeline.item_item import gain_words
    from twotower.training.trainer import TrainResult

    assert gain_words(0.0007, 0.0236) == (" (the towers alone 0.0007 against 0.0236: they learned almost nothing; "
                                          "the figure comes from the item-item term)")
    assert "over the towers alone" not in gain_words(0.0, 0.0236)
    assert gain_words(0.2033, 0.2178) == " (+7.1% over the towers alone)"  # towers that learned: the gain
    assert gain_words(None, 0.2178) == ""
    grid = [{"weight": 0.0, "NDCG@10": 0.0007}, {"weight": 1.0, "NDCG@10": 0.0236}]
    chosen = TrainResult(1, 0.0007, 1, item_item={"weight": 1.0, "valid_metric": 0.0236, "valid": grid})
    assert item_item_summary(chosen, "NDCG@10") == (
        "item-item term: weight 1 chosen on valid NDCG@10 (0.0236; the towers alone 0.0007: they learned almost "
        "nothing; the figure comes from the item-item term)")


def test_resuming_a_run_with_the_term_fits_it_again_and_leaves_the_run_loadable(tmp_path) -> None:
    # the finished run's model.safetensors holds the term, which the trainer's model lacks: `train --resume` of it
    # stopped with "weights do not match this model (... unexpected ['item_tower.item_item.factors', ...])" and left
    # a folder without manifest that no command could load
    from twotower.config import RunConfig
    from twotower.pipeline.run import train_run

    # next to no learning: epoch 2 does not beat epoch 1, so the run's best weights are not the checkpoint's
    out = train_tiny_run(tmp_path / "run", history="recency",
                         extra=("model.item_item.weights=[0.5]", "model.item_item.rank=4", "train.checkpoint=true",
                                "train.lr=1e-12"))
    assert [r["epoch"] for r in json.loads((out / "checkpoint" / "state.json").read_text())["history"]] == [1, 2]
    assert json.loads((out / "checkpoint" / "state.json").read_text())["best_epoch"] == 1
    before = json.loads((out / "run.json").read_text())["item_item"]
    weights = (out / "model.safetensors").read_bytes()
    assert before["weight"] == 0.5
    cfg = load_config(base=json.loads((out / "config.json").read_text()))
    assert isinstance(cfg, RunConfig)
    train_run(cfg, out, resume=True)  # nothing left to train: the best weights, the term fitted again
    after = json.loads((out / "run.json").read_text())["item_item"]
    assert {k: v for k, v in after.items() if k != "seconds"} == {k: v for k, v in before.items() if k != "seconds"}
    assert (out / "model.safetensors").read_bytes() == weights
    run = TrainedRun.load(out)  # the manifest verifies every file
    assert run.model.user_tower.item_item is not None and run.item_embeddings().shape[1] == 16 + 4

    # one epoch more that does not beat the best either: the best weights are read back from the run folder
    cfg = load_config(base=json.loads((out / "config.json").read_text()), overrides=["train.epochs=3"])
    assert isinstance(cfg, RunConfig)
    train_run(cfg, out, resume=True)
    assert json.loads((out / "run.json").read_text())["item_item"]["weight"] == 0.5
    assert TrainedRun.load(out).item_embeddings().shape[1] == 16 + 4


def test_the_two_tower_fit_seconds_count_the_term_as_the_ease_row_counts_its_tuning(tmp_path) -> None:
    # the term tunes and fits an EASE after training (minutes per λ on a large catalogue); fit_s counted the epochs only
    from twotower.pipeline.evaluate_run import evaluate_run

    out = train_tiny_run(tmp_path / "run", extra=("model.item_item.weights=[0.5]", "model.item_item.rank=4"))
    info = json.loads((out / "run.json").read_text())
    info["item_item"]["seconds"] = 1000.0  # as a 20,000-item catalogue's fit might take
    (out / "run.json").write_text(json.dumps(info))
    from twotower.pipeline.artifacts import write_manifest

    write_manifest(out)
    epochs = sum(json.loads(line)["seconds"] for line in (out / "log.jsonl").read_text().splitlines() if line.strip())
    rows = evaluate_run(TrainedRun.load(out), split="valid", baselines=())
    assert rows[0]["model"] == "two-tower" and rows[0]["fit_s"] == pytest.approx(epochs + 1000.0)


def test_the_fit_says_what_it_does_before_the_long_solves_and_reports_their_progress(tmp_path, monkeypatch,
                                                                                      caplog) -> None:
    # each λ is a dense I x I solve (minutes at 20,000 items); the log was silent from the last epoch to the result
    import twotower.evaluation.baselines as baselines

    real = baselines.tune_ease
    seen: list[tuple[float | None, bool]] = []

    def tune_ease(*args, **kw):
        seen.append((kw.get("log_every_s"), "item-item term: tuning EASE's λ (100, 500) on valid NDCG@10 over 32 "
                                            "items, factorising to rank 4, then choosing the weight (0, 0.5) ..."
                     in caplog.text))
        return real(*args, **kw)

    monkeypatch.setattr(baselines, "tune_ease", tune_ease)
    with caplog.at_level("INFO", logger="twotower"):
        train_tiny_run(tmp_path / "run", extra=("model.item_item.weights=[0.5, 0]", "model.item_item.rank=4",
                                                "model.item_item.lambdas=[100, 500]", "train.progress=true",
                                                "train.log_every_s=7"))
    assert seen == [(7.0, True)]  # progress lines every train.log_every_s, after the line that names the work


def test_the_weight_grid_reports_its_progress(tmp_path, caplog) -> None:
    # each weight is a full validation (~15 s for 30,000 users over 40,000 items, one thread): the nine weights
    # were 135 s without a line between the lambda tuning's last progress line and the result
    with caplog.at_level("INFO", logger="twotower"):
        train_tiny_run(tmp_path / "run", extra=("model.item_item.weights=[0.5, 0]", "model.item_item.rank=4",
                                                "train.progress=true", "train.log_every_s=1e-9"))
    assert "item-item term: choosing the weight: 1 / 2 weights (0: NDCG@10 " in caplog.text
    assert "item-item term: choosing the weight: 2 / 2 weights (0.5: NDCG@10 " in caplog.text


@pytest.mark.parametrize("history", ["mean", "transformer"])
def test_the_weight_grid_embeds_users_once_and_scores_as_the_model_at_each_weight(tmp_path, monkeypatch,
                                                                                 history) -> None:
    # each weight re-ran the user tower over every validation user (a third of a validation for a transformer
    # over 30,000 users); a weight only scales the term's columns, so the grid embeds them once
    import twotower.pipeline.item_item as item_item
    from twotower.models.two_tower import TwoTowerModel
    from twotower.training.scorer import TwoTowerScorer

    calls = {"in_grid": False, "embeds": 0}
    real_embed, real_grid = TwoTowerModel.user_embeddings, item_item._weight_grid

    def user_embeddings(self, *args, **kw):
        calls["embeds"] += calls["in_grid"]
        return real_embed(self, *args, **kw)

    def grid(*args, **kw):
        calls["in_grid"] = True
        try:
            return real_grid(*args, **kw)
        finally:
            calls["in_grid"] = False

    monkeypatch.setattr(TwoTowerModel, "user_embeddings", user_embeddings)
    monkeypatch.setattr(item_item, "_weight_grid", grid)
    extra = ("model.item_item.weights=[0, 0.3, 1]", "model.item_item.rank=4")
    fast = json.loads((train_tiny_run(tmp_path / "fast", history=history, extra=extra) / "run.json").read_text())
    assert calls["embeds"] == 1  # one batch of validation users, embedded for the first weight only

    class OneWeightAtATime(TwoTowerScorer):  # what the grid did before: the model at each weight, from scratch
        def __init__(self, model, history) -> None:
            self.model, self.history = model, history

        weight = property(lambda self: 0.0, lambda self, w: (self.model.set_item_item_weight(w),
                                                             TwoTowerScorer.__init__(self, self.model, self.history)))

    monkeypatch.setattr(item_item, "_WeightGridScorer", OneWeightAtATime, raising=False)
    slow = json.loads((train_tiny_run(tmp_path / "slow", history=history, extra=extra) / "run.json").read_text())
    got, want = fast["item_item"]["valid"], slow["item_item"]["valid"]
    assert [r["weight"] for r in got] == [0, 0.3, 1] and len({r["NDCG@10"] for r in want}) > 1
    assert [r["NDCG@10"] for r in got] == pytest.approx([r["NDCG@10"] for r in want], abs=1e-6)
    assert fast["item_item"]["weight"] == slow["item_item"]["weight"]


def test_a_product_is_factorised_as_the_matrix_it_stands_for() -> None:
    from twotower.pipeline.item_item import factorise_product

    rng = np.random.default_rng(1)
    a, c = rng.normal(size=(50, 12)), rng.normal(size=(50, 12))
    p, q, share = factorise_product(a, c, 5)
    dense_p, dense_q, dense_share = factorise((a @ c.T).astype(np.float32), 5, seed=0)
    assert np.allclose(q.T @ q, np.eye(5), atol=1e-5)
    assert np.allclose(p @ q.T, dense_p @ dense_q.T, atol=1e-3) and share == pytest.approx(dense_share, abs=1e-5)
    assert factorise_product(a, c, 64)[0].shape == (50, 12)  # no more directions than the product has


def test_above_max_items_the_term_is_solved_on_leading_eigenpairs_and_says_so(tmp_path, caplog) -> None:
    # a catalogue too large for EASE's dense I x I solve was skipped; its low-rank form costs O(I * eigenpairs)
    with caplog.at_level("INFO", logger="twotower"):
        out = train_tiny_run(tmp_path / "run", history="recency", extra=(
            "model.item_item.max_items=10", "model.item_item.eigenpairs=12", "model.item_item.rank=4",
            "model.item_item.weights=[0, 1]"))
    assert ("on its Gram matrix's 12 leading eigenpairs (32 items > model.item_item.max_items=10" in caplog.text)
    assert " GiB) on valid " in caplog.text  # what the low-rank solve needs, said before it runs
    info = json.loads((out / "run.json").read_text())["item_item"]
    assert info["solver"] == "low_rank" and info["eigenpairs"] == 12 and info["rank"] == 4
    run = TrainedRun.load(out)
    assert run.item_embeddings().shape[1] == 16 + (4 if info["weight"] > 0 else 0)
    dense = json.loads((train_tiny_run(tmp_path / "dense", history="recency", extra=(
        "model.item_item.rank=4", "model.item_item.weights=[0, 1]")) / "run.json").read_text())["item_item"]
    assert dense["solver"] == "dense" and "eigenpairs" not in dense


def test_the_solver_can_be_forced_and_a_bad_one_is_refused_by_name(tmp_path) -> None:
    out = train_tiny_run(tmp_path / "run", history="recency", extra=(
        "model.item_item.solver=low_rank", "model.item_item.eigenpairs=64", "model.item_item.rank=4"))
    info = json.loads((out / "run.json").read_text())["item_item"]
    # 64 asked of 32 items: the record says how many the fit kept, not how many were asked for
    assert info["solver"] == "low_rank" and info["eigenpairs"] <= 32
    with pytest.raises(ConfigError, match="model.item_item.solver: 'lowrank' is not one of auto, dense, low_rank; "
                                          "did you mean 'low_rank'"):
        load_config(overrides=["model.item_item.solver=lowrank"])


@pytest.mark.parametrize("solver, reason", [("dense", "G + λI is not positive definite"),
                                            ("low_rank", "its weights pass float32's range")])
def test_a_lambda_too_small_for_the_solve_is_refused_naming_the_setting(tmp_path, solver: str, reason: str) -> None:
    """model.item_item.lambdas=[1e-300] failed after training with "EASE: G + λI is not positive definite (LAPACK
    potrf info 600); raise l2 (λ=1e-300)" (the low-rank solve: "scores contain NaN"), naming no setting."""
    import pandas as pd

    from tests.explain.explain_tiny_run import write_tiny_data

    write_tiny_data(tmp_path / "run_data")
    train = pd.read_csv(tmp_path / "run_data" / "train.csv")
    # i31 watched by exactly i30's users: two equal columns make the Gram matrix singular, as real data's often is
    twin = train[train.item_id == "i30"].assign(item_id="i31")
    pd.concat([train[train.item_id != "i31"], twin]).to_csv(tmp_path / "run_data" / "train.csv", index=False)
    with pytest.raises(ConfigError, match=rf"^model\.item_item\.lambdas: λ=1e-300 is too small for EASE's solve on the "
                                          rf"training interactions \({re.escape(reason)}.*\); give larger values "
                                          r"\(typical 50\.\.5000; the default is \[100, 500, 2000\]\)$"):
        train_tiny_run(tmp_path / "run", history="recency", epochs=1, write_data=False, extra=(
            "model.item_item.lambdas=[1e-300]", f"model.item_item.solver={solver}", "model.item_item.rank=4",
            "model.item_item.eigenpairs=12"))


def test_the_solver_follows_the_catalogue_size_and_the_memory_available(monkeypatch) -> None:
    import twotower.utils.runtime as runtime
    from twotower.config import ItemItemConfig
    from twotower.pipeline.item_item import solver

    monkeypatch.setattr(runtime, "available_memory", lambda: 64 * 2**30)
    auto = ItemItemConfig()
    assert solver(3_416, auto) == ("dense", None, None)
    how, why_dense, why_not = solver(50_000, auto)
    assert how == "low_rank" and "50,000 items > model.item_item.max_items=20,000" in why_dense and why_not is None
    assert solver(3_416, ItemItemConfig(solver="low_rank"))[:2] == ("low_rank", "model.item_item.solver = low_rank")
    assert solver(50_000, ItemItemConfig(solver="dense")) == ("dense", None, None)  # forced: max_items aside
    assert "GiB available" in solver(60_000, ItemItemConfig(solver="dense"))[2]  # but not past the memory
    # above model.item_item.low_rank_max_items the term is not fitted, as the EASE baseline above its own ceiling: a
    # default `train` on 750,000 items grew by ~9 GiB after its epoch into a low-rank solve nothing had mentioned
    how, _, why_not = solver(750_000, auto)
    assert how == "low_rank" and why_not is not None
    assert why_not.startswith("750,000 items > model.item_item.low_rank_max_items=50,000 (the low-rank EASE on 256 "
                              "eigenpairs needs ~9.1 GiB"), why_not
    assert why_not.endswith("; raise model.item_item.low_rank_max_items to fit it anyway")
    assert solver(750_000, ItemItemConfig(low_rank_max_items=1_000_000))[2] is None
    monkeypatch.setattr(runtime, "available_memory", lambda: 2**30)  # 1 GiB: 3M items x 272 float64 columns won't fit
    assert "more than the 1.0 GiB available" in solver(3_000_000, ItemItemConfig(low_rank_max_items=10**7))[2]


def test_under_torchrun_the_term_is_not_skipped(monkeypatch) -> None:
    # it was skipped on several ranks (ML-100K test NDCG@10 0.1311 against 0.1371 in one process): rank 0 now fits
    # it after training while the other ranks end (pipeline/run.py; tests/pipeline/test_torchrun.py runs it)
    from types import SimpleNamespace

    import twotower.distributed
    from twotower.config import ItemItemConfig
    from twotower.pipeline.item_item import skip_reason

    tower = SimpleNamespace(uses_history=True)
    trainer = SimpleNamespace(model=SimpleNamespace(user_tower=tower, item_tower=SimpleNamespace(semantic=None)),
                              valid_relevant=object())
    prep = SimpleNamespace(valid=object())
    monkeypatch.setattr(twotower.distributed, "world_size", lambda: 2)
    assert skip_reason(trainer, prep, ItemItemConfig()) is None  # type: ignore[arg-type]

def test_lambda_and_weight_are_chosen_on_a_seeded_sample_of_ease_tune_max_users(tmp_path, monkeypatch,
                                                                                caplog) -> None:
    """Every λ and every weight scored each validation user over the catalogue (3 λ and 9 weights: minutes at
    30,000 users x 40,000 items): both are chosen on a sample of ``eval.ease_tune_max_users`` of them, drawn with
    the run's seed, as the baselines' tunings are; the trainer validates on all of them again afterwards."""
    from twotower.training.trainer import Trainer

    real = Trainer.validate
    scored: list[int] = []

    def validate(self, scorer=None):
        if self.model.user_tower.item_item is not None:  # the weight grid's validations
            scored.append(int((np.diff(self.valid_relevant.indptr) > 0).sum()))
        return real(self, scorer)

    monkeypatch.setattr(Trainer, "validate", validate)
    extra = ("model.item_item.weights=[0, 0.5]", "model.item_item.rank=4", "eval.ease_tune_max_users=5")
    with caplog.at_level("INFO", logger="twotower"):
        out = train_tiny_run(tmp_path / "run", extra=extra)
    info = json.loads((out / "run.json").read_text())["item_item"]
    assert scored == [5, 5]
    assert [row["users_evaluated"] for row in info["lambda_table"]["rows"]] == [5] * len(info["lambda_table"]["rows"])
    assert "item-item term: choosing λ and the weight on a sample of 5 of the " in caplog.text
    # the closing line's figures are the sample's, not the early-stopping figure beside them: it says so
    assert re.search(r"chosen on valid \S+ \(a sample of 5 of the \d+ validation users\)", caplog.text)
    assert info["valid_users"] == 5 and info["valid_users_of"] > 5
    again = json.loads((train_tiny_run(tmp_path / "again", extra=extra) / "run.json").read_text())["item_item"]
    assert again["valid"] == info["valid"]  # the run's seed draws the same users


@pytest.mark.parametrize("n_items", [30, 300])  # at rank 8 of 300 items: the randomized SVD that never forms B
def test_the_low_rank_term_gives_history_items_no_score_of_their_own(n_items: int) -> None:
    # EASE's B has a zero diagonal; the low-rank factors' product has 1/(λ d_j) - 1 there, and factorised whole it
    # put every history item first wherever the history is not excluded (evaluate --no-exclude-seen)
    import scipy.sparse as sp

    from twotower.evaluation.baselines import EASE
    from twotower.evaluation.low_rank_ease import LowRankEASE
    from twotower.pipeline.item_item import factorise_off_diagonal

    rng = np.random.default_rng(0)
    x = sp.csr_matrix((rng.random((4 * n_items, n_items)) < 0.1).astype(np.float32))
    low = LowRankEASE(10.0, k=n_items, seed=0).fit(x)  # every eigenpair: off the diagonal, EASE's B exactly
    dense = EASE(10.0).fit(x).weights
    p, q, share = factorise_off_diagonal(*low.factors(), n_items, seed=0)
    assert np.allclose(q.T @ q, np.eye(n_items), atol=1e-4) and share == pytest.approx(1.0, abs=1e-4)
    assert np.abs(np.diag(p @ q.T)).max() < 1e-3
    history = x[0].indices
    term = q @ p[history].sum(axis=0)  # the user's item-item scores, before the normalisation
    assert np.allclose(term, np.asarray(x[0] @ dense).ravel(), atol=1e-3)
    # cut to a rank, the same factors as the dense B's
    p8, q8, share8 = factorise_off_diagonal(*low.factors(), 8, seed=0)
    dense_p, dense_q, dense_share = factorise(dense, 8, seed=0)
    assert np.allclose(p8 @ q8.T, dense_p @ dense_q.T, atol=1e-3) and share8 == pytest.approx(dense_share, abs=1e-3)
