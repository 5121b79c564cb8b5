"""The search functions' ``threads=`` holds for the call: the caller's thread counts are theirs again after it."""
from __future__ import annotations

import faiss
import threadpoolctl
import torch

from twotower.search import search_evaluate


def test_search_evaluate_with_threads_gives_back_the_callers_counts(beir_dir):
    import scipy.linalg  # noqa: F401  -- its OpenBLAS among the pools compared

    before_torch, before_faiss = torch.get_num_threads(), faiss.omp_get_max_threads()
    with threadpoolctl.threadpool_limits(3):
        torch.set_num_threads(3)
        faiss.omp_set_num_threads(3)
        want = threadpoolctl.threadpool_info()
        try:
            search_evaluate(beir_dir, "test", "bm25", threads=1)
            # before, the process was left on 1 thread everywhere
            assert (torch.get_num_threads(), faiss.omp_get_max_threads()) == (3, 3)
            assert threadpoolctl.threadpool_info() == want
        finally:
            faiss.omp_set_num_threads(before_faiss)
            torch.set_num_threads(before_torch)
