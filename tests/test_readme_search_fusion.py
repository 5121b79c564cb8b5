"""The README's `search index` example uses the fusion the SciFact table (docs/benchmarks.md) says bench/scifact.py
chose.

Before: the example read `--fusion minmax --bm25-weight 0.7  # the fusion bench/scifact.py chose on validation`
while the SciFact table's hybrid row, re-measured later, says "z-score 0.7/0.3, chosen on valid" (min-max was the
choice of an earlier round), so a user copying the example built an index on another fusion than the one measured.
"""
import re
from pathlib import Path

NAMES = {"z-score": "zscore", "min-max": "minmax"}


def test_the_search_index_example_names_the_fusion_the_table_reports():
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    table = (root / "docs" / "benchmarks.md").read_text()  # README's benchmark section, moved there
    row = re.search(r"\| hybrid BM25 \+ fine-tuned \((z-score|min-max) ([0-9.]+)/[0-9.]+, chosen on valid\)", table)
    example = re.search(r"--fusion (\w+) --bm25-weight ([0-9.]+)\s+# the fusion bench/scifact\.py chose", readme)
    assert row and example
    assert (NAMES[row.group(1)], float(row.group(2))) == (example.group(1), float(example.group(2)))
