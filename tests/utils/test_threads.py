"""set_threads reaches every thread pool a run computes in: torch, FAISS and the BLAS of numpy and scipy."""
from __future__ import annotations

import subprocess
import sys

SNIPPET = """
import threadpoolctl, torch
from twotower.utils.runtime import set_threads
set_threads({n})
pools = {{(i["internal_api"], i["filepath"]): i["num_threads"] for i in threadpoolctl.threadpool_info()}}
blas = [v for (api, _), v in pools.items() if api == "openblas"]
print(torch.get_num_threads(), len(blas), sorted(set(blas)))
"""


def test_one_thread_everywhere() -> None:
    # a fresh interpreter: the limits are process-wide and other tests set their own
    out = subprocess.run([sys.executable, "-c", SNIPPET.format(n=1)], capture_output=True, text=True, check=True)
    torch_threads, n_blas, counts = out.stdout.split(maxsplit=2)
    assert torch_threads == "1"
    assert int(n_blas) >= 2  # numpy's and scipy's OpenBLAS at least (FAISS brings a third)
    assert counts.strip() == "[1]"


def test_a_thread_count_below_one_is_refused_by_name() -> None:
    # torch's own refusal ("set_num_threads expects a positive integer") names no setting
    import pytest

    from twotower.errors import ConfigError
    from twotower.utils.runtime import set_threads

    for bad in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="threads: expected a whole number >= 1"):
            set_threads(bad)  # type: ignore[arg-type]
