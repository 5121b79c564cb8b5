"""A BM25 index saved twice from the same corpus is the same bytes, whatever the process's string hash seed."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.extras import needs_text

pytestmark = needs_text

_SAVE = """
import sys
from twotower.search.bm25 import BM25Retriever
from search_data import DOCS
BM25Retriever().fit([d["title"] + " " + d["text"] for d in DOCS], [d["_id"] for d in DOCS]).save(sys.argv[1])
"""


def _saved_digests(out: Path, hash_seed: str) -> dict[str, str]:
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONHASHSEED": hash_seed,
           "PYTHONPATH": os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", _SAVE, str(out)], check=True, env=env, timeout=120)
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_saved_index_does_not_follow_the_string_hash_seed(tmp_path):
    # before: bm25s numbered the vocabulary in a set's order, so vocab.index.json and the score matrices changed
    # from one process to the next (search index run twice on SciFact: 4 of 9 files differed)
    a = _saved_digests(tmp_path / "a", "1")
    b = _saved_digests(tmp_path / "b", "2")
    assert a == b
    assert any("vocab" in name for name in a)
