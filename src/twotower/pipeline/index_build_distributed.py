"""`twotower index build` under torchrun: each rank encodes its shard of the catalogue; one IVF index is merged."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from twotower.errors import ConfigError
from twotower.index import IndexPolicy, tune_index
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.index_build import TUNE_PNG, BuiltIndex, sample_query_rows, save_tuned
from twotower.utils.extras import plotting_missing
from twotower.utils.wording import plural

__all__ = ["build_distributed"]

log = logging.getLogger(__name__)


def build_distributed(run: TrainedRun, spec: str, out: Path, policy: IndexPolicy, max_train: int | None,
                      params: dict[str, int] | None, say: Callable[[str], None],
                      advice: str | None = None) -> BuiltIndex | None:
    """One IVF index trained once and merged across the ranks, saved by rank 0 (None on the other ranks).

    Rank 0 then measures the merged index against exact search as ``autotune`` measures its candidates, sets
    ``nprobe`` to the smallest value reaching the recall target (or measures the one ``params`` pins), and
    saves that record as ``tune.json``: serving trusts, and refuses, such an index like any other. The rest is the
    one-process build's own (``save_tuned``): the item-query recall of `similar` and its warning, the plot, the
    ``why:`` and ``chosen:`` lines. ``advice``: what the warning of a missed recall target suggests (as in
    ``build_index``). The line saying what was built across the ranks is the build's result, said under ``-q`` too
    (rank 0 alone says it).
    """
    from twotower.index.distributed_build import build_index_distributed, shard_range
    from twotower.index.faiss_index import training_sample_size
    from twotower.training import distributed as tdist

    spec = spec.strip()
    if spec.lower() in ("auto", "exact", "flat", "hnsw") or "HNSW" in spec or "Refine" in spec or spec.endswith("RFlat"):
        raise ConfigError(
            f"--index {spec!r} cannot be built across ranks; use ivf, ivfpq or an IVF factory string "
            "(or run `twotower index build` in one process to autotune any index type)"
        )
    if params is not None and set(params) != {"nprobe"}:
        raise ConfigError(f"params {params}: an index built across ranks is an IVF one, whose one knob is nprobe")
    nprobe = None if params is None else params["nprobe"]
    if nprobe is not None:  # every rank refuses alike before any work: rank 0 alone left the others waiting
        from twotower.index.autotune import check_pin

        with torch.no_grad():
            dim = int(run.model.item_tower(torch.zeros(1, dtype=torch.long)).shape[1])
        check_pin(spec, {"nprobe": nprobe}, run.n_items, dim)
    tdist.init_from_env()
    try:
        n = run.n_items
        fp = run.fingerprint()
        chunk = 65536

        @torch.no_grad()
        def vectors_fn(rank: int, world: int):  # noqa: ANN202
            start, stop = shard_range(n, rank, world)
            for s in range(start, stop, chunk):
                rows = torch.arange(s, min(s + chunk, stop))
                yield rows.numpy().astype(np.int64), run.model.item_tower(rows).numpy().astype(np.float32)

        cap = max_train if max_train is not None else policy.distributed_max_train  # recorded in meta.json

        @torch.no_grad()
        def sample() -> np.ndarray:
            dim = int(run.model.item_tower(torch.zeros(1, dtype=torch.long)).shape[1])
            m = training_sample_size(spec, n, dim, cap)
            rows = np.sort(np.random.default_rng(policy.seed).choice(n, m, replace=False))
            return run.model.item_tower(torch.as_tensor(rows)).numpy().astype(np.float32)

        t0 = time.perf_counter()
        index = build_index_distributed(vectors_fn, spec, sample, out, n_total=n, nprobe=nprobe,
                                        model_fingerprint=fp, seed=policy.seed, max_train=cap)
        built = None
        if tdist.is_main() and index is not None:
            build_s = time.perf_counter() - t0
            query_rows = sample_query_rows(run, policy.tune_queries, policy.seed)  # at most the users with a history
            say(f"built {index.factory} over {n:,} items on {tdist.world_size()} ranks in {build_s:.1f} s; "
                f"measuring it against exact search on {plural(len(query_rows), 'user query', 'user queries')}")
            no_plot = plotting_missing()
            if no_plot:  # the measuring is minutes at 1M items: the index is saved, without its plot
                log.warning("%s: this build writes no %s", no_plot, TUNE_PNG)
            queries = run.user_vectors(query_rows).astype(np.float32)
            vectors = run.item_embeddings()
            report = tune_index(index, vectors, np.arange(n, dtype=np.int64), queries, policy=policy,
                                build_s=build_s, params=None if nprobe is None else {"nprobe": nprobe}, advice=advice)
            built = save_tuned(run, spec, out, report, vectors, queries, policy, say, no_plot)
        tdist.barrier()
    finally:
        tdist.cleanup()
    return built
