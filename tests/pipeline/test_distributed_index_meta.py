"""The index built across ranks records in ``meta.json`` what a one-process build records, ``max_train`` included."""

from __future__ import annotations

import json

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = [
    "train.batch_size=32",
    "model.user.hidden=[16]",
    "model.item.hidden=[16]",
    "model.user.out_dim=8",
    "model.item.out_dim=8",
    "model.user.history_len=4",
    "train.threads=1",
    "--no-progress",
    "--no-eval",
]


def test_a_distributed_build_records_its_max_train_as_one_process_does(tmp_path):
    """The torchrun build's meta.json had no build_params max_train, and config.max_train null, though its
    training sample was capped (by --max-train, or 100,000)."""
    from twotower.index import IndexPolicy
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.index_build import build_index
    from twotower.pipeline.index_build_distributed import build_distributed

    paths = write_dataset(tmp_path / "data", n_users=30, n_items=400, per_user=10)
    out = tmp_path / "run"
    assert (
        main(
            [
                "-q",
                "train",
                "--train",
                str(paths["train"]),
                "--valid",
                str(paths["valid"]),
                "--out",
                str(out),
                "--epochs",
                "1",
                *FAST,
            ]
        )
        == 0
    )
    run = TrainedRun.load(out)
    policy = IndexPolicy(target_recall=0.5, tune_queries=20)
    build_index(run, "IVF4,Flat", out=tmp_path / "one", policy=policy, max_train=200, echo=lambda s: None)
    build_distributed(run, "IVF4,Flat", tmp_path / "ranks", policy, 200, None, lambda s: None)
    one, ranks = (json.loads((tmp_path / d / "meta.json").read_text()) for d in ("one", "ranks"))
    assert one["build_params"]["max_train"] == ranks["build_params"]["max_train"] == 200
    assert one["config"]["max_train"] == ranks["config"]["max_train"] == 200
    # without one, the cap the sample was drawn under: IndexPolicy's
    build_distributed(run, "IVF4,Flat", tmp_path / "default", policy, None, None, lambda s: None)
    meta = json.loads((tmp_path / "default" / "meta.json").read_text())
    assert meta["build_params"]["max_train"] == IndexPolicy().distributed_max_train
