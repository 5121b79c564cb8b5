"""A search artefact whose marker file is damaged (cut short, not JSON) is named as such, with what to do.

Before, a bi-encoder whose twotower_bi_encoder.json was truncated was refused as `--out` as "a non-empty folder that is
not a bi-encoder" and as `--model` for having "no twotower_bi_encoder.json" (it was there); a cross-encoder with a
truncated marker passed `--rerank`'s check and was loaded unchecked, at the library's lengths, not its trained ones.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from search_data import write_beir

from twotower.cli.main import main
from twotower.search.artefacts import BI_ENCODER_META, CROSS_ENCODER_META, INDEX_META, check_cross_encoder_dir
from twotower.errors import IntegrityError

JSON_ERROR = "is not valid JSON (Unterminated string starting at"


def _cut(path: Path, obj: dict) -> None:
    text = json.dumps(obj, indent=2)
    path.write_text(text[: text.index('"files"') + 4])  # cut inside a string, as a write that stopped


def bi_encoder(folder: Path) -> Path:
    (folder / "query").mkdir(parents=True)
    _cut(folder / BI_ENCODER_META, {"format": 2, "kind": "bi_encoder", "files": {"query/model.safetensors": "ab"}})
    return folder


def cross_encoder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert",
                                                    "architectures": ["BertForSequenceClassification"]}))
    _cut(folder / CROSS_ENCODER_META, {"format": 2, "kind": "cross_encoder", "files": {"config.json": "ab"}})
    return folder


def search_index(folder: Path) -> Path:
    folder.mkdir()
    (folder / "embeddings.npy").write_bytes(b"\x93NUMPY")
    _cut(folder / INDEX_META, {"format": 2, "kind": "search_index", "files": {"embeddings.npy": "ab"}})
    return folder


def _run(argv: list[str], capsys) -> str:  # noqa: ANN001
    rc = main(["-q", *argv, "--threads", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    return " ".join(err.split())


@pytest.mark.parametrize(("make", "argv", "marker", "kind"), [
    (bi_encoder, ["search", "train", "--negatives", "0"], BI_ENCODER_META, "bi-encoder"),
    (cross_encoder, ["rerank", "train"], CROSS_ENCODER_META, "cross-encoder"),
    (search_index, ["search", "index"], INDEX_META, "search index"),
])
def test_a_damaged_marker_at_out_is_named_with_its_json_error(make, argv, marker, kind, tmp_path, capsys):
    out = make(tmp_path / "out")
    before = sorted(p.name for p in out.rglob("*"))
    err = _run([*argv, "--beir", str(write_beir(tmp_path / "beir")), "--out", str(out)], capsys)
    assert f"--out {out}: its {marker} {JSON_ERROR}" in err
    assert f"nothing says this folder is an earlier {kind}" in err
    assert f"remove the folder (rm -r {out}) to write a new one there, or give another --out" in err
    assert sorted(p.name for p in out.rglob("*")) == before  # refused: nothing replaced


@pytest.mark.parametrize(("make", "argv", "marker", "kind", "command"), [
    (bi_encoder, ["search", "evaluate", "--retriever", "dense", "--model"], BI_ENCODER_META, "bi-encoder",
     "twotower search train"),
    (bi_encoder, ["search", "index", "--out", "{tmp}/idx", "--model"], BI_ENCODER_META, "bi-encoder",
     "twotower search train"),
    (bi_encoder, ["search", "train", "--out", "{tmp}/bi2", "--base"], BI_ENCODER_META, "bi-encoder",
     "twotower search train"),
    (cross_encoder, ["search", "evaluate", "--rerank"], CROSS_ENCODER_META, "cross-encoder", "twotower rerank train"),
    (cross_encoder, ["rerank", "train", "--out", "{tmp}/ce2", "--base"], CROSS_ENCODER_META, "cross-encoder",
     "twotower rerank train"),
    # a cross-encoder folder holds a config.json: with its marker damaged it passed --model as a plain transformers
    # folder, and was loaded as a bi-encoder
    (cross_encoder, ["search", "evaluate", "--retriever", "dense", "--model"], CROSS_ENCODER_META, "cross-encoder",
     "twotower rerank train"),
])
def test_a_damaged_marker_of_a_model_given_to_a_flag_is_named(make, argv, marker, kind, command, tmp_path, capsys):
    model = make(tmp_path / "model")
    flag = argv[-1]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    err = _run([*argv, str(model), "--beir", str(write_beir(tmp_path / "beir"))], capsys)
    assert f"{flag} {model}: its {marker} (the {kind}'s marker, with its files' checksums) {JSON_ERROR}" in err
    # in backticks, as every suggested command (the path shell-quoted inside: single quotes around it clashed)
    assert f"cannot be checked or loaded; restore the file from a copy, or train it again with `{command} --out " \
           f"{model}`" in err


def test_the_python_reranker_check_names_it_too(tmp_path):
    with pytest.raises(IntegrityError, match=rf"model_path .*: its {CROSS_ENCODER_META} .* is not valid JSON"):
        check_cross_encoder_dir(cross_encoder(tmp_path / "ce"), "model_path")


def test_a_search_index_whose_meta_json_is_damaged_says_how_to_rebuild_it(tmp_path, capsys):
    index = search_index(tmp_path / "idx")
    err = _run(["search", "query", "--index", str(index), "aspirin"], capsys)
    assert f"{index / INDEX_META}: not valid JSON (Unterminated string" in err
    assert f"rebuild it with `twotower search index --beir DIR --out {index}` (after removing the folder" in err


def test_a_marker_that_is_json_but_not_an_object_is_named_too(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / BI_ENCODER_META).write_text("[]")
    err = _run(["search", "train", "--beir", str(write_beir(tmp_path / "beir")), "--out", str(out)], capsys)
    assert f"its {BI_ENCODER_META} is not a JSON object (a list)" in err
