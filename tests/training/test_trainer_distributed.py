"""The real Trainer in two gloo processes equals one process on the same global batches.

One ``mp.spawn`` of 2 ranks runs every scenario (start-up dominates the cost);
the one-process references run in the test process itself (no process group):

* one step on a fixed global batch of 11 examples (6 on rank 0, 5 on rank 1,
  3 uniform negatives split 2 + 1): same loss, accuracy and averaged
  parameter gradients as one process;
* ``fit`` for 2 epochs (in-batch softmax with logQ, hit masking, uniform
  negatives; global batches of 13 split 7 + 6, the last of 7 split 4 + 3):
  same per-epoch loss and accuracy, same final weights;
* the same with GradCache (chunks of 4) under the distributed loss, with
  SparseAdam (sparse ID-table gradients gathered across ranks) and with BPR.

The sequence objective (``train.examples=sequence``, a causal transformer user
tower) likewise: 14 users of 2..18 items in global batches of 5 users (3 + 2 per
rank, trimmed to each rank's own longest window), the loss shared by target
positions; in-batch softmax over de-duplicated candidates gathered across ranks
(ids present on both ranks, logQ, uniform extras, random windows; also under
GradCache), full, sampled softmax and BPR: one step and ``fit`` equal one process.

And, in one process, GradCache with chunk C equals the plain step. Dropout is
0 throughout: masks come from per-rank streams, equal in distribution only.
The model runs in float64 so that comparing Adam-updated weights is well
conditioned (see ``_trainer``).
"""
from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.trainer import Trainer

WORLD = 2
N_USERS, N_ITEMS, PER_USER = 12, 15, 6  # 72 training examples
GLOBAL_BATCH = 13  # 72 = 5 * 13 + 7: ranks get 7 + 6, and 4 + 3 in the last batch (uneven shares)
TOL = 1e-5

SCENARIOS: dict[str, dict] = {
    "plain": {},
    "gradcache": {"train": {"gradcache_chunk": 4}},
    "sparse": {"train": {"optimizer": "sparse_adam"}},
    "bpr": {"loss": {"kind": "bpr"}},
    # the step's side threads (prefetch, weight average, the item tower's backward: training/tower_overlap.py) run
    # where a core is spare beside each rank's threads, which two ranks on this 2-core machine never have: forced
    "side_threads": {},
}


def _seqs() -> UserSequences:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(N_USERS), PER_USER)
    # popular items repeat across users, so batches have accidental hits for the mask to catch
    items = rng.choice(N_ITEMS, size=users.size, p=np.linspace(2, 1, N_ITEMS) / np.linspace(2, 1, N_ITEMS).sum())
    return UserSequences.from_arrays(users, items, np.tile(np.arange(PER_USER), N_USERS), N_USERS)


def _trainer(name: str, loss_kind: str | None = None, **train_over: object) -> Trainer:
    over = SCENARIOS[name]
    if loss_kind is not None:
        over = {**over, "loss": {**over.get("loss", {}), "kind": loss_kind}}
    tower = dict(hidden=(16,), out_dim=8, dropout=0.0, id_dim=8, feature_dim=4, history_dim=8, history_len=4)
    model_cfg = ModelConfig(user=TowerConfig(use_id=True, history="recency", **tower), item=TowerConfig(**tower))
    # no history dropout, as no MLP dropout above: each rank draws its own masks (independent streams by design)
    train = TrainConfig(**{"epochs": 2, "batch_size": GLOBAL_BATCH, "lr": 1e-2, "progress": False,
                           "checkpoint": False, "seed": 3, "history_dropout": 0.0, **over.get("train", {}),
                           **train_over})
    loss_over = over.get("loss", {})
    # uniform extras are the in-batch softmax's (LossConfig refuses them beside another loss.kind)
    extras = {"uniform_negatives": 3} if loss_over.get("kind", "inbatch") == "inbatch" else {}
    loss = LossConfig(**{"temperature": 0.2, **extras, **loss_over})
    torch.manual_seed(0)
    # float64: Adam's first steps move a weight by ~lr * sign(g), so float32 rounding noise on a
    # gradient near Adam's eps (1e-8) would show up as lr-sized weight differences
    model = TwoTowerModel(model_cfg, N_USERS, N_ITEMS, sparse=train.optimizer == "sparse_adam").double()
    return Trainer(model, _seqs(), loss=loss, train=train, eval=EvalConfig(baselines=()))


SEQ_USERS, SEQ_L, SEQ_BATCH = 14, 12, 5  # batches of 5 users: 3 + 2 per rank

SEQ_SCENARIOS: dict[str, dict] = {
    "seq_inbatch": {"loss": {"kind": "inbatch", "uniform_negatives": 3}, "train": {"random_windows": True}},
    "seq_full": {"loss": {"kind": "full"}},
    "seq_sampled": {"loss": {"kind": "sampled", "sampled_negatives": 6}},
    "seq_bpr": {"loss": {"kind": "bpr"}},
    "seq_gradcache": {"loss": {"kind": "inbatch", "uniform_negatives": 3}, "train": {"gradcache_chunk": 2}},
}


def _seq_seqs() -> UserSequences:
    rng = np.random.default_rng(1)
    lengths = rng.integers(2, 19, size=SEQ_USERS)  # some longer than L + 1 (random windows), some far shorter
    users = np.repeat(np.arange(SEQ_USERS), lengths)
    p = np.linspace(3, 1, N_ITEMS) / np.linspace(3, 1, N_ITEMS).sum()  # popular items recur on both ranks
    return UserSequences.from_arrays(users, rng.choice(N_ITEMS, size=users.size, p=p), np.arange(users.size), SEQ_USERS)


def _seq_trainer(name: str) -> Trainer:
    over = SEQ_SCENARIOS[name]
    user = TowerConfig(use_id=False, history="transformer", history_len=SEQ_L, history_dim=8, out_dim=8, hidden=(16,),
                       dropout=0.0, seq_dropout=0.0)
    model_cfg = ModelConfig(user=user, item=TowerConfig(id_dim=8, out_dim=8, hidden=(16,), dropout=0.0))
    train = TrainConfig(**{"examples": "sequence", "epochs": 2, "batch_size": SEQ_BATCH, "lr": 1e-2, "progress": False,
                           "checkpoint": False, "seed": 3, **over.get("train", {})})
    loss = LossConfig(**{"temperature": 0.2, **over["loss"]})
    torch.manual_seed(0)
    model = TwoTowerModel(model_cfg, SEQ_USERS, N_ITEMS).double()
    return Trainer(model, _seq_seqs(), loss=loss, train=train, eval=EvalConfig(baselines=()))


def _one_step(trainer: Trainer, idx: np.ndarray = np.arange(11)) -> dict[str, torch.Tensor]:
    """Loss, accuracy and (averaged) gradients of one step on the global batch ``idx`` (examples 0..10)."""
    trainer.torch_gen.manual_seed(5)
    loss, acc, _, _, _ = trainer._step(idx)  # the global batch's, on every rank
    out = {"loss": torch.tensor(loss, dtype=torch.float64), "acc": torch.tensor(acc, dtype=torch.float64)}
    for n, p in trainer.model.named_parameters():
        if p.grad is not None:  # unused parameters (no ID table in the sequence tower) must be unused everywhere
            out[f"grad.{n}"] = p.grad.detach().to_dense().clone()
    return out


def _fit(trainer: Trainer) -> dict[str, torch.Tensor]:
    result = trainer.fit()
    out = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    out["loss"] = torch.tensor([r["loss"] for r in result.history], dtype=torch.float64)
    out["acc"] = torch.tensor([r["inbatch_accuracy"] for r in result.history], dtype=torch.float64)
    if "user_std" in result.history[0]:  # rank 0 (or one process) alone logs the embedding diagnostics
        out["diag"] = torch.tensor([[r["user_std"], r["alignment"]] for r in result.history], dtype=torch.float64)
    return out


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    from twotower.training import distributed as tdist

    try:
        results = {"step": _one_step(_trainer("plain"))}
        for name in SCENARIOS:
            with _spare_core(name == "side_threads"):
                results[name] = _fit(_trainer(name))  # the Trainer joins the group from the environment
        results["seq_step"] = _one_step(_seq_trainer("seq_inbatch"), SEQ_STEP_USERS)
        for name in SEQ_SCENARIOS:
            results[name] = _fit(_seq_trainer(name))
        assert tdist.world_size() == WORLD
    finally:
        tdist.cleanup()
    for name, tensors in results.items():
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(Path(out_dir) / f"{name}.rank{rank}.safetensors"))
    os._exit(0)  # skip the slow interpreter teardown of a torch child; results are on disk


@contextmanager
def _spare_core(forced: bool) -> Iterator[None]:
    """``utils.runtime.spare_core`` as the epoch reads it, answering yes when ``forced``."""
    import twotower.training.epoch as epoch_mod

    real = epoch_mod.spare_core
    if forced:
        epoch_mod.spare_core = lambda threads: True
    try:
        yield
    finally:
        epoch_mod.spare_core = real


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], what: str) -> None:
    assert set(got) == set(want), what
    for k, v in want.items():
        assert got[k].shape == v.shape, (what, k)
        diff = (got[k].double() - v.double()).abs().max().item() if v.numel() else 0.0
        assert diff <= TOL, f"{what}: {k} differs by {diff:.2e}"


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ranks")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return out


def _load(out: Path, name: str, rank: int) -> dict[str, torch.Tensor]:
    return load_file(str(out / f"{name}.rank{rank}.safetensors"))


def test_one_step_two_ranks_equals_one_process_on_the_global_batch(two_ranks: Path) -> None:
    ref = _one_step(_trainer("plain"))
    ranks = [_load(two_ranks, "step", r) for r in range(WORLD)]
    # every rank returns the global mean, the one-process value (each returned its share, and the shares added
    # up to it: rank 0's progress line showed its share x 2, not the epoch line's loss)
    for key in ("loss", "acc"):
        assert all(abs(float(r[key]) - float(ref[key])) <= TOL for r in ranks), key
    grads = {k: v for k, v in ref.items() if k.startswith("grad.")}
    assert any(v.abs().sum() > 0 for k, v in grads.items() if "id_emb" in k)
    for r in ranks:  # every rank holds the same averaged gradient
        _assert_close({k: v for k, v in r.items() if k.startswith("grad.")}, grads, "step gradients")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fit_two_ranks_equals_one_process(two_ranks: Path, name: str) -> None:
    with _spare_core(name == "side_threads"):
        ref = _fit(_trainer(name))
    assert len(ref["loss"]) == 2
    for r in range(WORLD):
        # rank 0's diagnostics are those of the whole last global batch (they were of its own share of it)
        want = ref if r == 0 else {k: v for k, v in ref.items() if k != "diag"}
        _assert_close(_load(two_ranks, name, r), want, f"{name} rank {r}")


SEQ_STEP_USERS = np.array([4, 5, 8, 3, 7])  # short users on rank 0 (2, 4, 6 items), the longest (18) on rank 1


def test_sequence_step_two_ranks_equals_one_process_on_the_global_batch(two_ranks: Path) -> None:
    tr = _seq_trainer("seq_inbatch")
    lengths = tr.seqs.lengths()[tr.examples.users[SEQ_STEP_USERS]]
    assert min(lengths[3:]) > SEQ_L + 1 and max(lengths[:3]) <= 8  # rank 1 has random windows, rank 0 trims to 8
    ref = _one_step(tr, SEQ_STEP_USERS)
    ranks = [_load(two_ranks, "seq_step", r) for r in range(WORLD)]
    for key in ("loss", "acc"):  # the ranks' shares by target positions, summed: the one-process mean, on every rank
        assert all(abs(float(r[key]) - float(ref[key])) <= TOL for r in ranks), key
    grads = {k: v for k, v in ref.items() if k.startswith("grad.")}
    assert any(v.abs().sum() > 0 for k, v in grads.items() if "item" in k)
    for r in ranks:
        _assert_close({k: v for k, v in r.items() if k.startswith("grad.")}, grads, "sequence step gradients")


@pytest.mark.parametrize("name", list(SEQ_SCENARIOS))
def test_sequence_fit_two_ranks_equals_one_process(two_ranks: Path, name: str) -> None:
    ref = _fit(_seq_trainer(name))
    assert len(ref["loss"]) == 2 and bool(torch.isfinite(ref["loss"]).all())
    for r in range(WORLD):
        # rank 0's diagnostics are those of the whole last global batch (they were of its own share of it)
        want = ref if r == 0 else {k: v for k, v in ref.items() if k != "diag"}
        _assert_close(_load(two_ranks, name, r), want, f"{name} rank {r}")


def test_gradcache_in_the_trainer_equals_the_plain_step() -> None:
    plain = _fit(_trainer("plain"))
    for chunk in (1, 5, 64):
        _assert_close(_fit(_trainer("plain", gradcache_chunk=chunk)), plain, f"gradcache chunk {chunk}")


@pytest.mark.parametrize("kind", ["full", "bpr", "sampled"])
def test_gradcache_equals_the_plain_step_for_every_embedding_loss(kind: str) -> None:
    plain = _fit(_trainer("plain", loss_kind=kind))
    _assert_close(_fit(_trainer("plain", loss_kind=kind, gradcache_chunk=5)), plain, f"gradcache {kind}")


def test_gradcache_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="train.gradcache_chunk"):
        TrainConfig(gradcache_chunk=0)
    with pytest.raises(ConfigError, match="train.distributed_backend"):
        TrainConfig(distributed_backend="mpi")
