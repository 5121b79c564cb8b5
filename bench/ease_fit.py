"""EASE's closed-form fit: the in-place Cholesky inverse against the textbook solve, same run.

The textbook path factors ``G + λI`` and solves against the identity (``cho_solve``:
~2.3·I³ flops, three float64 ``[I, I]`` arrays besides the Gram matrix); the
project's (:func:`twotower.evaluation.baselines._ease_weights`) inverts from the
factor with LAPACK's ``potri`` in one buffer (~I³ flops). Prints seconds and peak
RSS growth of each, interleaved round by round, and the largest weight difference.

Data: the ML-1M training matrix (``../shared/data/ml-1m/ml-1m.txt``, SASRec's
file; all but each user's last two items), and with ``--synthetic-items N`` a
random sparse matrix of N items as well.

    python bench/ease_fit.py --threads 2 --rounds 2 --synthetic-items 8000
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PeakRSS, refuse_below, refuse_range  # noqa: E402

from twotower.evaluation.baselines import _ease_weights, _gram  # noqa: E402
from twotower.utils.runtime import set_threads  # noqa: E402

ML1M = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ml-1m" / "ml-1m.txt"


def textbook(gram: np.ndarray, l2: float) -> np.ndarray:
    """``P = cho_solve(G + λI, I)``, ``B = −P / diag(P)``, zero diagonal: the fit this project used before."""
    g = gram.copy()
    g[np.diag_indices_from(g)] += l2
    factor = scipy.linalg.cho_factor(g, lower=True, overwrite_a=True, check_finite=False)
    p = scipy.linalg.cho_solve(factor, np.eye(g.shape[0]), overwrite_b=True, check_finite=False)
    b = p / (-np.diag(p))[None, :]
    b[np.diag_indices_from(b)] = 0.0
    return b.astype(np.float32)


def ml1m_train(path: Path) -> sp.csr_matrix:
    """All but each user's last two lines (the leave-one-out train split) as a binary [U, I] matrix."""
    import pandas as pd

    df = pd.read_csv(path, sep=" ", header=None, names=["u", "i"])
    df = df[df.groupby("u").cumcount(ascending=False) >= 2]  # file order = time order within a user
    u, i = df["u"].to_numpy() - df["u"].min(), df["i"].to_numpy() - df["i"].min()
    return sp.csr_matrix((np.ones(len(u), np.float32), (u, i)), shape=(u.max() + 1, i.max() + 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--l2", type=float, default=500.0)
    ap.add_argument("--synthetic-items", type=int, default=0, help="also a random matrix of this many items")
    args = ap.parse_args()
    refuse_below(args, ("rounds", "threads"))  # --threads 0 was torch's traceback
    refuse_below(args, ("synthetic_items",), 0)
    refuse_range(args, "l2", 0, lo_open=True)  # NaN: a NaN item-item matrix, timed as if it were a fit
    set_threads(args.threads)
    data: list[tuple[str, sp.csr_matrix]] = []
    if ML1M.exists():
        data.append(("ML-1M train", ml1m_train(ML1M)))
    else:
        print(f"note: {ML1M} not found (../shared/data/ml-1m, see its SOURCE.md): no ML-1M row; "
              "--synthetic-items N measures a random catalogue", file=sys.stderr)
    if args.synthetic_items:
        rng = np.random.default_rng(0)
        n = args.synthetic_items
        x = sp.random(4 * n, n, density=20 / n, random_state=rng, format="csr", dtype=np.float32)
        x.data[:] = 1.0
        data.append((f"random {n:,} items", x))
    if not data:  # after the random matrix: without the ML-1M file, --synthetic-items alone is a benchmark
        raise SystemExit("error: nothing to measure: the ML-1M file is missing and --synthetic-items is 0")
    print(f"{'data':<22} {'items':>7} {'path':<10} {'seconds':>8} {'peak MB':>8} {'x textbook':>10}")
    for name, x in data:
        gram = _gram(x)
        times: dict[str, list[float]] = {"textbook": [], "potri": []}
        peaks: dict[str, float] = {}
        out: dict[str, np.ndarray] = {}
        for _ in range(args.rounds):
            for label, fn in (("textbook", textbook), ("potri", _ease_weights)):
                gc.collect()
                with PeakRSS() as rss:
                    base = rss.peak
                    t0 = time.perf_counter()
                    out[label] = fn(gram, args.l2)
                    times[label].append(time.perf_counter() - t0)
                peaks[label] = max(peaks.get(label, 0.0), (rss.peak - base) / 2**20)
        best = {k: min(v) for k, v in times.items()}
        for label in ("textbook", "potri"):
            print(f"{name:<22} {x.shape[1]:>7,} {label:<10} {best[label]:>8.2f} {peaks[label]:>8.0f} "
                  f"{best['textbook'] / best[label]:>10.2f}")
        print(f"{'':<22} max |weight difference| {np.abs(out['textbook'] - out['potri']).max():.2e}"
              f" (largest weight {np.abs(out['textbook']).max():.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
