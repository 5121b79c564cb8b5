"""Model sizes: bounded in the config, and estimated against the machine's memory before a model is built.

`train model.item.hidden=[1e12]` ended in torch's out-of-memory traceback (or a hang) and
`model.user.history_len=2**63` in an OverflowError once the data was prepared; sizes under the bounds that add up
to more than the machine holds are refused from the estimate, naming it, before anything is allocated.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.config import MAX_HISTORY_LEN, MAX_LAYERS, MAX_WIDTH, ModelConfig, RunConfig, TowerConfig, load_config
from twotower.errors import ConfigError
from twotower.models import size
from twotower.models.feature_block import FeatureArrays
from twotower.models.two_tower import TwoTowerModel


@pytest.mark.parametrize(("override", "message"), [
    ("model.item.hidden=[1000000000000]", "model.item.hidden: layer sizes must be at most 65,536, got 1,000,000,000,000"),
    ("model.user.hidden=[64, 70000]", "model.user.hidden: layer sizes must be at most 65,536, got 70,000"),
    (f"model.item.hidden={[8] * (MAX_LAYERS + 1)}", f"model.item.hidden: at most {MAX_LAYERS} layers, got {MAX_LAYERS + 1}"),
    ("model.user.history_len=9223372036854775808",
     "model.user.history_len: must be at most 100,000, got 9,223,372,036,854,775,808"),
    ("model.item.id_dim=65537", "model.item.id_dim: must be at most 65,536, got 65,537"),
    ("model.user.history_dim=100000", "model.user.history_dim: must be at most 65,536, got 100,000"),
    ("model.user.seq_layers=1000", "model.user.seq_layers: must be at most 128, got 1,000"),
])
def test_oversized_settings_are_refused_naming_the_field(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert str(e.value) == f"overrides: {override!r}: {message}"  # where it was given, as a file's value names the file


def test_the_bounds_themselves_are_accepted():
    TowerConfig(id_dim=MAX_WIDTH, hidden=(MAX_WIDTH,) * MAX_LAYERS, history_len=MAX_HISTORY_LEN, seq_layers=MAX_LAYERS)


def _features(n: int) -> FeatureArrays:
    return FeatureArrays(categorical=np.zeros((n, 2), np.int64), categorical_sizes=(5, 7),
                         multi=(np.zeros((n, 3), np.int64),), multi_sizes=(9,), numeric=np.zeros((n, 4), np.float32))


@pytest.mark.parametrize("model", [
    ModelConfig(),
    ModelConfig(user=TowerConfig(history="transformer", id_dim=8, history_dim=16, history_len=12, seq_heads=2),
                item=TowerConfig(id_dim=16, hidden=(32, 24))),  # tied history table
    ModelConfig(user=TowerConfig(history="transformer", history_dim=16, history_len=12),
                item=TowerConfig(id_dim=8, layernorm=False)),  # not tied
    ModelConfig(user=TowerConfig(history="gru", history_dim=16, seq_layers=3, hidden=()), item=TowerConfig()),
    ModelConfig(user=TowerConfig(history="mean", extra_pools=(0.5, 1.0), use_id=False),
                item=TowerConfig(text_embeddings=True, dual_head=True)),
    ModelConfig(item=TowerConfig(text_embeddings=True, head=True, hidden=())),
])
def test_the_estimate_counts_the_parameters_the_model_has(model):
    n_users, n_items = 40, 30
    text = np.zeros((n_items, 6), np.float32) if model.item.text_embeddings else None
    built = TwoTowerModel(model, n_users, n_items, user_features=_features(n_users), item_features=_features(n_items),
                          item_text=text)
    counts = size.parameter_counts(model, n_users, n_items, user_features=_features(n_users),
                                   item_features=_features(n_items), text_dim=0 if text is None else 6)
    assert sum(counts.values()) == sum(p.numel() for p in built.parameters())


def test_a_model_that_cannot_fit_is_refused_before_anything_is_allocated(tmp_path, monkeypatch, capsys):
    dataset = write_dataset(tmp_path / "data", n_users=12, per_user=5)
    monkeypatch.setattr(size, "total_memory_bytes", lambda: 16 * 2**30)

    def no_allocation(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the towers were built")

    monkeypatch.setattr("twotower.models.two_tower.ItemTower", no_allocation)
    out = tmp_path / "run"
    assert main(["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out),
                 "--threads", "1", "--no-progress", "--epochs", "1", "model.item.hidden=[65536, 65536]"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: model.item.hidden: the model would have about 4,3")
    assert "model.item.hidden 4,3" in err and "more than this machine's 16.0 GiB of memory" in err
    assert "weights, gradients and AdamW's two moments" in err and err.endswith("make model.item.hidden smaller")
    assert not out.exists()  # refused before the folder was touched


def test_the_defaults_fit_and_a_loaded_run_counts_its_weights_once():
    n_users, n_items = 1_000_000, 1_000_000
    # the default model at 1M users x 1M items: 128M parameters, 1.9 GiB to train
    size.check_model_fits(ModelConfig(), n_users, n_items, memory=4 * 2**30)
    wide = ModelConfig(item=TowerConfig(id_dim=4096))  # 4.1e9 weights in the item table
    with pytest.raises(ConfigError, match=r"^model\.item\.id_dim: .* about 15\.\d GiB as float32 weights, more than "
                                          r"this machine's 8\.0 GiB"):
        size.check_model_fits(wide, n_users, n_items, copies=1, memory=8 * 2**30)


def _run(**sections: dict) -> RunConfig:
    return load_config(base=sections)


def test_a_step_that_cannot_fit_is_refused_though_the_parameters_fit():
    n_users, n_items = 1000, 1_000_000
    # 128M parameters, 1.9 GiB to train: the parameter check passes; the full softmax's item tower over the whole
    # catalogue (~6 GiB of activations a step) does not fit in 8 GiB
    full = _run(loss={"kind": "full"})
    size.check_model_fits(full.model, n_users, n_items, memory=8 * 2**30)
    with pytest.raises(ConfigError) as e:
        size.check_training_fits(full, n_users, n_items, memory=8 * 2**30)
    msg = str(e.value)
    assert msg.startswith("loss.kind: training would need about ")
    assert "the item tower's activations over 1,000,000 rows (loss.kind=full: all 1,000,000 items)" in msg
    assert "more than this machine's 8.0 GiB" in msg and msg.endswith("set train.gradcache_chunk (e.g. 4096) to "
                                                                     "embed the catalogue in chunks, or use loss.kind=sampled")
    # the advice works: embedded in chunks, or with in-batch candidates, the same model trains in 8 GiB
    size.check_training_fits(_run(loss={"kind": "full"}, train={"gradcache_chunk": 4096}), n_users, n_items,
                             memory=8 * 2**30)
    size.check_training_fits(_run(), n_users, n_items, memory=8 * 2**30)


def test_a_long_transformer_window_is_refused_naming_history_len():
    seq = _run(model={"user": {"history": "transformer", "history_len": 2000, "extra_pools": []}})
    with pytest.raises(ConfigError, match=r"^model\.user\.history_len: training would need about .*the transformer "
                                          r"user tower's activations \(512 windows of 2,000 items\).*lower "
                                          r"model\.user\.history_len or train\.batch_size$"):
        size.check_training_fits(seq, 943, 1682, memory=8 * 2**30)


def test_the_default_run_at_movielens_100k_size_fits_a_small_machine():
    terms = size.training_memory(RunConfig(), 943, 1682)
    assert 100 * 2**20 < sum(t.bytes for t in terms) < 512 * 2**20  # 148 MiB measured (a fit's peak RSS growth)
    size.check_training_fits(RunConfig(), 943, 1682, memory=1 * 2**30)


def _torchrun(monkeypatch, world: int, local: int) -> None:
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))


def test_every_process_on_the_machine_is_counted_under_torchrun(monkeypatch):
    # the default run at ML-100K size: 167 MiB in one process, which fits 256 MiB; 4 processes on one machine each
    # hold their own weights, optimizer state, average and runtime, and together do not
    size.check_training_fits(RunConfig(), 943, 1682, memory=256 * 2**20)
    _torchrun(monkeypatch, 4, 4)
    with pytest.raises(ConfigError) as e:
        size.check_training_fits(RunConfig(), 943, 1682, memory=256 * 2**20)
    msg = str(e.value)
    assert msg.startswith("train.batch_size: training would need about ") and " at its peak in 4 processes (" in msg
    assert "the runtime's own buffers (x4 processes) 384.0 MiB" in msg
    assert msg.endswith("lower train.batch_size (or run fewer processes on this machine)")
    # one process a machine (4 machines): this one holds one process and its quarter of the global batch
    _torchrun(monkeypatch, 4, 1)
    size.check_training_fits(RunConfig(), 943, 1682, memory=256 * 2**20)


def test_the_step_terms_are_a_ranks_share_of_the_global_batch(monkeypatch):
    seq = _run(model={"user": {"history": "transformer", "history_len": 200, "extra_pools": []}})
    alone = {t.setting: t for t in size.training_memory(seq, 943, 1682)}["model.user.history_len"]
    assert "(512 windows of 200 items)" in alone.what
    _torchrun(monkeypatch, 8, 4)  # train.batch_size=512 is the global batch: 64 windows a rank, 4 ranks here
    shared = {t.setting: t for t in size.training_memory(seq, 943, 1682)}["model.user.history_len"]
    assert shared.what == "the transformer user tower's activations (64 windows of 200 items) (x4 processes)"
    assert shared.bytes == alone.bytes // 2


def test_the_parameters_are_counted_once_a_process_under_torchrun(monkeypatch):
    # the default model at 1M users x 1M items: its weights take 1.9 GiB to train in one process (4.9 GiB with the
    # saved copies and the average), 7.6 GiB in four
    size.check_training_fits(RunConfig(), 1_000_000, 1_000_000, memory=6 * 2**30)
    _torchrun(monkeypatch, 4, 4)
    with pytest.raises(ConfigError, match=r"^(model\.\w+\.\w+): the model would have about .* about 7\.\d GiB as "
                                          r"weights, gradients and AdamW's two moments in each of 4 processes, more "
                                          r"than this machine's 6\.0 GiB of memory; make \1 smaller "
                                          r"\(or run fewer processes on this machine\)$"):
        size.check_training_fits(RunConfig(), 1_000_000, 1_000_000, memory=6 * 2**30)


def test_a_batch_above_the_examples_is_sized_as_the_examples_and_trains_with_a_warning(tmp_path, caplog):
    # the estimate read train.batch_size=100000 as 100,000 x 100,000 scores and refused 230 GiB, though the epoch's
    # 384 examples make one batch of 384; 1e30 was refused in PiB with 45-digit numbers
    dataset = write_dataset(tmp_path / "data")
    run = _run(train={"batch_size": 100_000})
    with pytest.raises(ConfigError, match=r"^train\.batch_size: training would need"):
        size.check_training_fits(run, 40, 30, memory=8 * 2**30)
    size.check_training_fits(run, 40, 30, memory=8 * 2**30, n_examples=384)
    with caplog.at_level("WARNING", logger="twotower.training.trainer"):
        assert main(["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out",
                     str(tmp_path / "run"), "--threads", "1", "--no-progress", "--epochs", "1", "eval.baselines=[]",
                     "model.item_item.enabled=false", "train.batch_size=1e30"]) == 0
    said = [r.getMessage() for r in caplog.records if "train.batch_size" in r.getMessage()]
    assert said and "is above the " in said[0] and "examples an epoch: every epoch is one batch of" in said[0]
