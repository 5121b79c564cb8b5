"""A fine-tuned bi-encoder's or cross-encoder's marker records the sha256 of the BEIR files it was trained on."""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from twotower.cli.search_cmd import _source


def test_the_source_names_the_files_read_with_their_digests(beir_dir: Path) -> None:
    # before: {"beir": path, "split": "train"} only, so a marker could not tell the folder had since been edited
    source = _source(argparse.Namespace(beir=str(beir_dir), split="train"))
    assert source["beir"] == str(beir_dir.resolve()) and source["split"] == "train"
    digests = source["sha256"]
    assert set(digests) == {"corpus.jsonl", "queries.jsonl", "qrels/train.tsv"}
    for name, digest in digests.items():
        assert digest == hashlib.sha256((beir_dir / name).read_bytes()).hexdigest()
