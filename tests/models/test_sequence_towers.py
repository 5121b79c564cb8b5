"""Sequence user towers: causality, padding, removed columns, tying, new users."""
from __future__ import annotations

import pytest
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models.two_tower import TwoTowerModel

N_ITEMS = 30
L = 8


def _model(kind: str, *, seed: int = 0, share: bool = True, positions: str = "right") -> TwoTowerModel:
    """``kind`` is a history kind, or ``transformer+sasrec`` for the transformer with SASRec's block."""
    torch.manual_seed(seed)
    kind, _, block = kind.partition("+")
    cfg = ModelConfig(
        user=TowerConfig(use_id=False, use_features=False, history=kind, history_len=L, history_dim=16,
                         hidden=(), out_dim=16, seq_layers=2, seq_heads=2, seq_positions=positions,
                         seq_block=block or "pre_ln"),
        item=TowerConfig(id_dim=16, hidden=(), out_dim=16, use_features=False),
        share_item_embeddings=share,
    )
    return TwoTowerModel(cfg, n_users=5, n_items=N_ITEMS).eval()


def _windows() -> torch.Tensor:
    pad = N_ITEMS
    return torch.tensor([
        [pad, pad, pad, 3, 7, 1, 9, 4],
        [2, 5, 8, 11, 13, 17, 19, 23],
        [pad, pad, pad, pad, pad, pad, pad, 6],
    ])


@pytest.mark.parametrize("kind", ["transformer", "transformer+sasrec", "gru"])
def test_state_at_t_ignores_later_columns(kind: str) -> None:
    m = _model(kind)
    h = _windows()
    out = m.user_tower.forward_all(None, h)  # [B, L, D]
    changed = h.clone()
    changed[1, 5:] = torch.tensor([0, 1, 2])  # items after column 4 of user 1
    out2 = m.user_tower.forward_all(None, changed)
    torch.testing.assert_close(out[1, :5], out2[1, :5])
    assert not torch.allclose(out[1, 5:], out2[1, 5:])
    torch.testing.assert_close(out[[0, 2]], out2[[0, 2]])  # other users untouched


@pytest.mark.parametrize("kind", ["transformer", "transformer+sasrec", "gru"])
def test_padding_never_leaks(kind: str) -> None:
    """What sits in the padding columns' embedding row cannot change a real column's state."""
    m = _model(kind, share=False)
    h = _windows()
    before = m.user_tower.forward_all(None, h)
    with torch.no_grad():
        m.user_tower.history_emb.weight[N_ITEMS].normal_()  # a non-zero padding row
    after = m.user_tower.forward_all(None, h)
    valid = h != N_ITEMS
    torch.testing.assert_close(before[valid], after[valid])


@pytest.mark.parametrize("kind", ["transformer", "transformer+sasrec", "gru"])
def test_forward_is_last_column_of_forward_all(kind: str) -> None:
    m = _model(kind)
    h = _windows()
    torch.testing.assert_close(m.user_tower(None, h), m.user_tower.forward_all(None, h)[:, -1])
    # a shorter window gives the same vector as the same items left-padded to L (right-aligned positions)
    # (what sequence training relies on when it trims all-padding columns off a batch)
    short = h[[0, 2]][:, -5:]  # rows 0 and 2 have at most 5 real items
    valid = short != N_ITEMS
    torch.testing.assert_close(m.user_tower.forward_all(None, short)[valid],
                               m.user_tower.forward_all(None, h[[0, 2]])[:, -5:][valid])


@pytest.mark.parametrize("kind", ["transformer", "transformer+sasrec", "gru"])
def test_zero_weight_removes_the_item(kind: str) -> None:
    """Leave-one-out through weights equals re-embedding the history without that item (GRU)
    or with that column masked (transformer, whose positions keep their ages)."""
    m = _model(kind)
    h = _windows()[:1]
    w = m.user_tower.history_weights(h)
    w_drop = w.clone()
    w_drop[0, 5] = 0.0  # drop item 1
    dropped = m.user_tower(None, h, history_weights=w_drop)
    if kind == "gru":
        removed = torch.tensor([[N_ITEMS, N_ITEMS, N_ITEMS, N_ITEMS, 3, 7, 9, 4]])
        torch.testing.assert_close(dropped, m.user_tower(None, removed))
    else:
        hole = h.clone()
        hole[0, 5] = N_ITEMS  # the same column made padding
        torch.testing.assert_close(dropped, m.user_tower(None, hole))
    # dropping the newest item reads the state after the one before it
    w_last = w.clone()
    w_last[0, 7] = 0.0
    assert torch.isfinite(m.user_tower(None, h, history_weights=w_last)).all()
    # all removed: the learned empty-history vector, the same for every user
    empty = m.user_tower(None, _windows(), history_weights=torch.zeros(3, L))
    torch.testing.assert_close(empty[0], empty[1])


def test_left_positions_number_items_from_the_oldest_one_read() -> None:
    """``seq_positions="left"`` (SASRec+'s right-padded windows): causal, trim-exact, and removing an
    item by weight equals deleting it (later items move up one position)."""
    m = _model("transformer", positions="left")
    h = _windows()
    out = m.user_tower.forward_all(None, h)
    changed = h.clone()
    changed[1, 5:] = torch.tensor([0, 1, 2])
    torch.testing.assert_close(m.user_tower.forward_all(None, changed)[1, :5], out[1, :5])
    short = h[[0, 2]][:, -5:]
    valid = short != N_ITEMS
    torch.testing.assert_close(m.user_tower.forward_all(None, short)[valid],
                               m.user_tower.forward_all(None, h[[0, 2]])[:, -5:][valid])
    w = m.user_tower.history_weights(h[:1]).clone()
    w[0, 5] = 0.0  # drop item 1
    removed = torch.tensor([[N_ITEMS, N_ITEMS, N_ITEMS, N_ITEMS, 3, 7, 9, 4]])
    torch.testing.assert_close(m.user_tower(None, h[:1], history_weights=w), m.user_tower(None, removed))
    # the same 5 items read as the start of a history vs. at the end of a full window differ only by position
    right = _model("transformer", positions="right")
    right.load_state_dict(m.state_dict())
    assert not torch.allclose(m.user_tower(None, h[:1]), right.user_tower(None, h[:1]))
    torch.testing.assert_close(m.user_tower(None, h[1:2]), right.user_tower(None, h[1:2]))  # a full window: same


def test_sasrec_block_differs_and_is_validated() -> None:
    """SASRec's reference block is another function of the same weights, not an alias of pre-LN."""
    h = _windows()
    pre, sas = _model("transformer"), _model("transformer+sasrec")
    sas.load_state_dict(pre.state_dict())
    assert not torch.allclose(pre.user_tower(None, h), sas.user_tower(None, h))
    with pytest.raises(ValueError, match="seq_block"):
        TowerConfig(history="transformer", seq_block="post_ln")


def test_seq_positions_is_validated() -> None:
    from twotower.errors import ConfigError

    with pytest.raises(ConfigError, match="seq_positions"):
        TowerConfig(history="transformer", seq_positions="middle")


def test_tied_embeddings_share_the_item_table() -> None:
    m = _model("transformer")
    names = dict(m.named_parameters())
    assert "user_tower.history_emb.weight" not in names
    torch.testing.assert_close(m.user_tower.embed_history(torch.tensor([[3, N_ITEMS]]))[0],
                               torch.stack([m.item_tower.id_emb.weight[3], torch.zeros(16)]))
    # the state dict (what safetensors saves) holds the table once
    assert sum(k.endswith("id_emb.weight") for k in m.state_dict()) == 1


def test_sequence_tower_trains_end_to_end_gradients() -> None:
    m = _model("gru").train()
    h = _windows()
    out = m.user_tower.forward_all(None, h)  # [B, L, D]
    items = m.item_tower(torch.arange(N_ITEMS))
    loss = (out @ items.T).logsumexp(-1)[h != N_ITEMS].mean()
    loss.backward()
    assert m.item_tower.id_emb.weight.grad is not None
    assert all(p.grad is not None for p in m.user_tower.encoder.parameters())


def test_no_head_scores_with_the_very_table_the_encoder_reads() -> None:
    """``head = false`` on both towers (SASRec's tying): the item vector is the normalised ID embedding the
    transformer reads, and the user vector the encoder's state; a head with hidden layers is refused."""
    from twotower.errors import ConfigError

    torch.manual_seed(0)
    cfg = ModelConfig(
        user=TowerConfig(use_id=False, use_features=False, history="transformer", history_len=L, history_dim=16,
                         hidden=(), out_dim=16, head=False),
        item=TowerConfig(id_dim=16, hidden=(), out_dim=16, use_features=False, head=False),
    )
    m = TwoTowerModel(cfg, n_users=5, n_items=N_ITEMS).eval()
    table = m.item_tower.id_emb.weight
    assert m.user_tower._tied and m.user_tower._tied[0].weight is table
    torch.testing.assert_close(m.item_tower(torch.arange(N_ITEMS)), torch.nn.functional.normalize(table, dim=-1))
    assert not any("mlp" in name for name, _ in m.named_parameters())
    with pytest.raises(ConfigError, match="head"):
        TowerConfig(hidden=(8,), head=False)
    wide = ModelConfig(user=TowerConfig(use_id=False, use_features=False, history="transformer", history_dim=16,
                                        hidden=(), out_dim=32, head=False),
                       item=TowerConfig(id_dim=16, hidden=(), out_dim=32, use_features=False))
    with pytest.raises(ValueError, match="input width"):
        TwoTowerModel(wide, n_users=5, n_items=N_ITEMS)


@pytest.mark.parametrize(("kind", "positions"), [("transformer", "right"), ("transformer", "left"),
                                               ("transformer+sasrec", "left"), ("gru", "right")])
def test_batched_user_embeddings_equal_one_by_one(kind: str, positions: str) -> None:
    """Sorting users by length and trimming each batch's padding gives each user's own vector, in order."""
    import numpy as np

    torch.manual_seed(5)
    kind, _, block = kind.partition("+")
    cfg = ModelConfig(
        user=TowerConfig(use_id=False, use_features=False, history=kind, history_len=40, history_dim=16,
                         hidden=(), out_dim=16, seq_layers=2, seq_heads=2, seq_positions=positions,
                         seq_block=block or "pre_ln"),
        item=TowerConfig(id_dim=16, hidden=(), out_dim=16, use_features=False),
    )
    m = TwoTowerModel(cfg, n_users=5, n_items=N_ITEMS)
    rng = np.random.default_rng(0)
    hist = np.full((70, 40), N_ITEMS, dtype=np.int64)
    for b, n in enumerate(rng.integers(0, 41, 70)):  # lengths 0..40, one empty history at least
        if n:
            hist[b, 40 - n :] = rng.integers(0, N_ITEMS, n)
    hist[3] = N_ITEMS
    got = m._sequence_user_embeddings(None, hist, batch=16)
    assert m.training  # the mode is restored
    m.eval()
    want = torch.cat([m.user_tower(None, torch.as_tensor(hist[b : b + 1])) for b in range(70)])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m.user_embeddings(None, hist), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_removing_an_item_by_weight_is_what_explain_documents(kind: str) -> None:
    """leave-one-out in ``explain`` zeroes a column's weight: for the GRU that is deleting the item (the older
    items move up a column); a transformer with recency ("right") positions reads the column as padding, so the
    older items keep their positions and the result differs from the deletion."""
    m = _model(kind)
    h = _windows()[:1]
    valid = [c for c in range(L) if int(h[0, c]) != N_ITEMS]
    col = valid[len(valid) // 2]
    w = m.user_tower.history_weights(h).clone()
    w[0, col] = 0.0
    masked = m.user_tower(None, h, history_weights=w)
    row = h[0].tolist()
    del row[col]
    deleted = m.user_tower(None, torch.tensor([[N_ITEMS, *row]]))
    padded = h.clone()
    padded[0, col] = N_ITEMS
    if kind == "gru":
        torch.testing.assert_close(masked, deleted)
    else:
        torch.testing.assert_close(masked, m.user_tower(None, padded))
        assert not torch.allclose(masked, deleted, atol=1e-4)


@pytest.mark.parametrize("block", ["pre_ln", "sasrec"])
def test_bf16_training_attention_is_causal_padded_and_close_to_fp32(block: str) -> None:
    """Training under bf16 autocast, attention runs as bfloat16 products (models.sequence._attention): still
    causal, still blind to padding, and within bfloat16 rounding of the float32 states."""
    m = _model("transformer" if block == "pre_ln" else "transformer+sasrec", share=False).train()
    for mod in m.modules():  # dropout off, gradients on: only the precision differs
        if hasattr(mod, "p"):
            mod.p = 0.0
    for blk in m.user_tower.encoder.blocks:
        blk.dropout = 0.0
    h = _windows()
    ref = m.user_tower.forward_all(None, h).detach()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m.user_tower.forward_all(None, h)
        changed = h.clone()
        changed[1, 5:] = torch.tensor([0, 1, 2])
        out2 = m.user_tower.forward_all(None, changed)
        with torch.no_grad():
            m.user_tower.history_emb.weight[N_ITEMS].normal_()
        out3 = m.user_tower.forward_all(None, h)
    valid = h != N_ITEMS
    assert out.requires_grad
    torch.testing.assert_close(out[1, :5], out2[1, :5])
    assert not torch.allclose(out[1, 5:], out2[1, 5:])
    torch.testing.assert_close(out[valid], out3[valid])
    assert float((out.detach().float() - ref)[valid].abs().max()) < 0.05  # bfloat16 rounding, not another function


@pytest.mark.parametrize("kind", ["transformer", "gru"])
def test_from_history_state_is_what_forward_gives_an_empty_history(kind: str) -> None:
    """The empty-history fit trains ``empty`` through this public entry (it reached into the tower's private
    ``_user_parts`` / ``_head``): it must be the very output ``forward`` gives a user with no items."""
    m = _model(kind)
    with torch.no_grad():
        m.user_tower.empty.normal_()
    no_items = torch.full((2, L), N_ITEMS)
    torch.testing.assert_close(m.user_tower.from_history_state(m.user_tower.empty[None].expand(2, -1)),
                               m.user_tower(None, no_items))


def test_left_positions_train_the_same_gradients_on_two_threads_each_time():
    """`self.pos[order]`'s backward added the rows' gradients with index_put's threads in no fixed order: two
    transformer runs on 2 threads trained different weights (1.4e-3 apart after one epoch on MovieLens-100K)."""
    from twotower.models.sequence import CausalTransformer

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        enc = CausalTransformer(32, 20, layers=1, heads=2, dropout=0.0, positions="left")
        x = torch.randn(256, 20, 32)
        valid = torch.rand(256, 20) > 0.3
        weights = torch.linspace(-1, 1, 256 * 20 * 32).view(256, 20, 32)

        def grad() -> torch.Tensor:
            enc.zero_grad(set_to_none=True)
            (enc(x, valid) * weights).sum().backward()
            return enc.pos.grad.clone()

        first = grad()
        assert all(torch.equal(first, grad()) for _ in range(5))
    finally:
        torch.set_num_threads(before)
