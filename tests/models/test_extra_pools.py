"""model.user.extra_pools: the history window pooled once more per decay, side by side with the first pool."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from twotower.config import ModelConfig, TowerConfig, load_config
from twotower.errors import ConfigError
from twotower.models.towers import UserTower

PAD = 20


def _tower(**kw) -> UserTower:
    torch.manual_seed(3)
    cfg = dict(use_id=False, use_features=False, history="recency", history_len=6, history_dim=4, hidden=(),
               out_dim=8, dropout=0.0)
    return UserTower(TowerConfig(**{**cfg, **kw}), n_users=3, n_items=PAD)


def test_the_default_user_tower_pools_the_recent_items_and_the_whole_windows_mean() -> None:
    assert ModelConfig().user.extra_pools == (1.0,) and ModelConfig().user.recency_decay == 0.9
    assert TowerConfig().extra_pools == ()  # the item tower reads no history


def test_the_extra_pool_is_the_plain_mean_beside_the_recency_pool() -> None:
    tower = _tower(extra_pools=(1.0,))
    h = torch.tensor([[PAD, PAD, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [PAD] * 6])
    got = tower.pooled_histories(h)  # [B, 2H]
    assert got.shape == (3, 8)
    emb = tower.history_emb.weight
    w = tower.history_weights(h)  # the first pool: recency-weighted
    want = (emb[h] * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-12)
    assert torch.allclose(got[:, :4], want, atol=1e-6)
    assert torch.allclose(got[0, 4:], emb[[3, 4, 5, 6]].mean(0), atol=1e-6)
    assert torch.allclose(got[1, 4:], emb[[1, 2, 3, 4, 5, 6]].mean(0), atol=1e-6)
    assert torch.equal(got[2], torch.zeros(8))  # an empty history pools to zeros in both
    assert tower(None, h).shape == (3, 8)  # the head reads both pools ([B, 2H] in)


def test_a_zero_weight_drops_the_item_from_every_pool_as_explanations_need() -> None:
    """Leave-one-out explanations set an item's weight to 0 and re-run the tower: that must be the tower
    of the window with that item left out (padding in its column), in the extra pool too."""
    tower = _tower(extra_pools=(1.0, 0.5)).eval()
    h = torch.tensor([[PAD, 7, 3, 4, 5, 6]])
    for col in range(1, 6):
        w = tower.history_weights(h).clone()
        w[0, col] = 0.0
        dropped = h.clone()
        dropped[0, col] = PAD
        assert torch.allclose(tower(None, h, history_weights=w), tower(None, dropped), atol=1e-6)
    # unchanged weights change nothing; a gradient on them reaches the extra pools (grad x input explanations)
    w = tower.history_weights(h).clone().requires_grad_(True)
    assert torch.allclose(tower(None, h, history_weights=w), tower(None, h), atol=1e-6)
    tower.pooled_histories(h, w)[0, 4:].sum().backward()
    assert w.grad is not None and bool((w.grad[0, 1:] != 0).all())


def test_the_first_pools_decay_is_not_pooled_twice_and_sequence_towers_ignore_it() -> None:
    assert _tower(history="mean", extra_pools=(1.0,)).extra_pools == ()
    assert _tower(recency_decay=0.8, extra_pools=(0.8, 1.0)).extra_pools == (1.0,)
    seq = UserTower(TowerConfig(use_id=False, use_features=False, history="gru", history_len=6, history_dim=4,
                                hidden=(), out_dim=8, extra_pools=(1.0,)), n_users=3, n_items=PAD)
    assert seq.extra_pools == ()


@pytest.mark.parametrize(("override", "said"), [
    ("model.user.extra_pools=[0]", "model.user.extra_pools: each decay must be in (0, 1] (1.0: the plain mean), got [0"),
    ("model.user.extra_pools=[1.5]", "model.user.extra_pools: each decay must be in (0, 1]"),
    ("model.item.extra_pools=[1.0]", "model.item.extra_pools=(1.0,): only the user tower reads extra_pools"),
])
def test_bad_values_are_refused_by_name(override, said) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert said in str(e.value)


def test_a_run_saved_before_the_setting_loads_with_its_one_pool(tmp_path) -> None:
    """Its config.json has no extra_pools: read with today's default, the tower would not fit its weights."""
    from tests.explain.explain_tiny_run import train_tiny_run
    from twotower.pipeline.artifacts import TrainedRun, write_manifest

    run_dir = train_tiny_run(tmp_path / "old", history="recency", epochs=1, extra=("model.user.extra_pools=[]",
                                                                               "model.item_item.enabled=false"))
    cfg = json.loads((run_dir / "config.json").read_text())
    del cfg["model"]["user"]["extra_pools"]  # as a run of an earlier version wrote it
    (run_dir / "config.json").write_text(json.dumps(cfg))
    write_manifest(run_dir)  # re-sealed, as that version sealed it
    run = TrainedRun.load(run_dir)
    assert run.config.model.user.extra_pools == ()
    assert run.model.user_tower.extra_pools == ()
    vec = run.history_vectors([np.asarray([0, 1, 2], np.int64)])
    assert vec.shape == (1, 16) and np.isfinite(vec).all()
