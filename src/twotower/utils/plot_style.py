"""How the PNGs tell their series apart: by colour and by marker, so no reader needs to tell red from green.

matplotlib's default colours put the third and fourth series in green and red, which a deuteranope reads as one
colour: on ``evaluate --plot``'s Recall@k, EASE's and ItemKNN's lines (0.0932 and 0.0958 at k=10) were two
indistinguishable lines of round markers, and on ``recall_qps.png`` HNSW's and IVF-PQ's.
"""
from __future__ import annotations

from typing import Any

__all__ = ["COLOURS", "MARKERS", "series_style"]

#: Okabe and Ito's colour-blind-safe palette (its yellow, faint on white, and its black, the plots' reference
#: lines' colour, left out)
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9")
#: a different marker shape for each series, as well as a colour (8 shapes and 6 colours: 24 series apart)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")


def series_style(i: int) -> dict[str, Any]:
    """``color`` and ``marker`` of the ``i``-th series (from 0)."""
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)]}
