"""Two real gloo processes vs one process on the same global batch.

One spawn runs every scenario (start-up dominates the cost):

* the process-group helpers (init_from_env with torchrun's variables, rank,
  all_reduce_mean, barrier);
* gather_with_grad with unequal sizes: values and the summed cross-rank gradient;
* DistributedInBatchSoftmax with B=3 per rank, logQ on and item ids duplicated
  across ranks, under manual gradient averaging and under DDP: same loss and
  parameter gradients as InBatchSoftmax on the 2B=6 batch in one process;
* unequal local batches (3 and 2): each rank's loss is the global loss
  restricted to its rows.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from twotower.losses import DistributedInBatchSoftmax, InBatchSoftmax, gather_with_grad, log_q_from_counts
from twotower.training import distributed as tdist

WORLD = 2
B = 3  # local batch per rank
T = 0.1  # temperature
f64 = torch.float64

# Global batch of 2B = 6 examples; rank r holds rows r*B .. r*B+B-1.
POS_IDS = torch.tensor([3, 7, 5, 7, 2, 3])  # items 7 and 3 are positives on both ranks
NEG_IDS = [torch.tensor([2, 9]), torch.tensor([5, 1])]  # uniform negatives; 2 and 5 are positives elsewhere
COUNTS = torch.tensor([1, 2, 5, 8, 1, 4, 1, 6, 1, 1])  # item popularity for logQ


class Towers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.query = nn.Linear(5, 4).double()
        self.item = nn.Linear(6, 4).double()

    def forward(self, qx: torch.Tensor, ix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.query(qx), self.item(ix)


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    query_x = torch.randn(6, 5, generator=gen, dtype=f64)  # [2B, 5]
    item_table = torch.randn(10, 6, generator=gen, dtype=f64)  # features of items 0..9
    log_q_table = log_q_from_counts(COUNTS, batch_size=2 * B, n_uniform=4).double()  # global B and M
    return query_x, item_table, log_q_table


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _local_loss(model: nn.Module, rows: slice, neg_ids: torch.Tensor) -> torch.Tensor:
    query_x, item_table, log_q_table = _data()
    pos_ids = POS_IDS[rows]
    cand_ids = torch.cat([pos_ids, neg_ids])  # local positives first, then local extras
    q, c = model(query_x[rows], item_table[cand_ids])
    return DistributedInBatchSoftmax(T)(
        q, c, positive_ids=pos_ids, candidate_ids=cand_ids, log_q=log_q_table[cand_ids]
    )


def _worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    out: dict[str, torch.Tensor] = {}
    try:
        assert tdist.init_from_env("gloo")
        assert (tdist.rank(), tdist.world_size(), tdist.is_main()) == (rank, WORLD, rank == 0)
        mean = tdist.all_reduce_mean({"r": float(rank), "one": 1.0})
        out["helpers"] = torch.tensor([mean["r"], mean["one"]])
        tdist.barrier()

        # gather_with_grad, unequal sizes: rank 0 has 3 rows, rank 1 has 1.
        x = (torch.arange(3 if rank == 0 else 1, dtype=f64) + 10 * rank).unsqueeze(1).repeat(1, 2)
        x.requires_grad_()
        g = gather_with_grad(x)  # [4, 2]
        w = (rank + 1) * torch.arange(4, dtype=f64).unsqueeze(1)  # rank-specific weights [4, 1]
        (g * w).sum().backward()
        out["gathered"], out["gather_grad"] = g.detach(), x.grad
        out["empty"] = torch.tensor(gather_with_grad(torch.zeros(0, 2)).shape)

        rows = slice(rank * B, rank * B + B)
        # Manual data parallelism: average gradients over ranks.
        model = Towers()
        loss = _local_loss(model, rows, NEG_IDS[rank])
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= WORLD
        out["loss"] = torch.tensor(tdist.all_reduce_mean({"loss": loss.item()})["loss"], dtype=f64)
        out.update({f"manual.{k}": v for k, v in _grads(model).items()})

        # The same with DDP doing the averaging.
        ddp = DDP(Towers())
        _local_loss(ddp, rows, NEG_IDS[rank]).backward()
        out.update({f"ddp.{k}": v for k, v in _grads(ddp.module).items()})

        # Unequal local batches: rank 0 rows 0..2 + negatives [2, 9], rank 1 rows 3..4 + negative [5].
        model = Towers()
        uneven_rows = slice(0, 3) if rank == 0 else slice(3, 5)
        loss = _local_loss(model, uneven_rows, torch.tensor([2, 9]) if rank == 0 else torch.tensor([5]))
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)  # sum, no averaging: the gradient of loss_0 + loss_1
        out["uneven.loss"] = loss.detach()
        out.update({f"uneven.{k}": v for k, v in _grads(model).items()})
    finally:
        tdist.cleanup()
    save_file({k: v.contiguous() for k, v in out.items()}, str(Path(out_dir) / f"rank{rank}.safetensors"))
    # Results are on disk and the group is gone: skip the ~3 s interpreter
    # teardown of a torch child process (exit code 0 is all spawn checks).
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference(cand_ids: torch.Tensor, pos_ids: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
    query_x, item_table, log_q_table = _data()
    model = Towers()
    q, c = model(query_x, item_table[cand_ids])
    loss = InBatchSoftmax(T)(q, c, positive_ids=pos_ids, candidate_ids=cand_ids, log_q=log_q_table[cand_ids])
    return model, loss


def test_two_processes_match_one_process_on_the_global_batch(tmp_path: Path) -> None:
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    res = [load_file(str(tmp_path / f"rank{r}.safetensors")) for r in range(WORLD)]

    for r in range(WORLD):
        # mean of ranks 0 and 1 = 0.5; mean of 1 and 1 = 1
        assert res[r]["helpers"].tolist() == [0.5, 1.0]
        # rank 0 sent rows [0, 1, 2], rank 1 sent [10]
        assert res[r]["gathered"][:, 0].tolist() == [0.0, 1.0, 2.0, 10.0]
        assert res[r]["empty"].tolist() == [0, 2]
    # d/dx of sum_r (g * (r + 1) * arange(4)) = 3 * arange(4) at each rank's slice
    assert res[0]["gather_grad"][:, 0].tolist() == [0.0, 3.0, 6.0]
    assert res[1]["gather_grad"][:, 0].tolist() == [9.0]

    # One process, global batch: positives of rank 0 then rank 1, then each rank's negatives.
    cand_ids = torch.cat([POS_IDS, *NEG_IDS])  # [3,7,5, 7,2,3, 2,9, 5,1]
    model, ref_loss = _reference(cand_ids, POS_IDS)
    ref_loss.backward()
    ref_grads = _grads(model)
    for r in range(WORLD):
        assert torch.allclose(res[r]["loss"], ref_loss.detach(), atol=1e-10, rtol=0)
        for name, grad in ref_grads.items():
            for mode in ("manual", "ddp"):
                assert torch.allclose(res[r][f"{mode}.{name}"], grad, atol=1e-10, rtol=0), (mode, name)
    assert res[0]["manual.item.weight"].abs().sum() > 0

    # Uneven: candidates [3,7,5 | 7,2 | 2,9 | 5]; rank r's loss = global loss weighted to its rows,
    # and the summed gradients = gradient of loss_0 + loss_1 in one process.
    pos_ids = POS_IDS[:5]
    cand_ids = torch.cat([pos_ids, torch.tensor([2, 9, 5])])
    on_rank0 = torch.tensor([1.0, 1, 1, 0, 0], dtype=f64)
    query_x, item_table, log_q_table = _data()
    model = Towers()
    q, c = model(query_x[:5], item_table[cand_ids])
    kw = dict(positive_ids=pos_ids, candidate_ids=cand_ids, log_q=log_q_table[cand_ids])
    loss0 = InBatchSoftmax(T)(q, c, weights=on_rank0, **kw)
    loss1 = InBatchSoftmax(T)(q, c, weights=1 - on_rank0, **kw)
    assert torch.allclose(res[0]["uneven.loss"], loss0.detach(), atol=1e-10, rtol=0)
    assert torch.allclose(res[1]["uneven.loss"], loss1.detach(), atol=1e-10, rtol=0)
    (loss0 + loss1).backward()
    for name, grad in _grads(model).items():
        for r in range(WORLD):
            assert torch.allclose(res[r][f"uneven.{name}"], grad, atol=1e-10, rtol=0), name
