"""`recommend --index DIR` / `similar --index DIR` rank with the index `serve --index DIR` answers from.

Walk-through: an index built with `twotower index build --out DIR` can be served (`serve --index DIR`), but the
command line ranked with RUN/index only (or exact search without one), so a served list could not be reproduced
from the command line: `--index` was an unrecognized argument."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_and_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("cliindex")
    run = build_tiny_run(folder)
    shutil.rmtree(run / "index", ignore_errors=True)
    idx = folder / "hnsw"
    assert main(["-q", "index", "build", "--run", str(run), "--index", "hnsw", "--ef-search", "16", "--out", str(idx)]) == 0
    return run, idx


def test_recommend_and_similar_use_the_given_index_as_serve_does(run_and_index, capsys):
    from twotower.serving import RecommenderService, create_app

    run, idx = run_and_index
    service = RecommenderService.load(run, idx)
    user, item = service.run.user_vocab.ids[0], service.run.item_vocab.ids[0]
    capsys.readouterr()
    assert main(["recommend", "--run", str(run), "--user", user, "--k", "5", "--index", str(idx), "--json"]) == 0
    out = capsys.readouterr()
    assert f"ranking with index {idx}: approximate HNSW" in out.err
    cli = json.loads(out.out)
    assert main(["similar", "--run", str(run), "--item", item, "--k", "5", "--index", str(idx), "--json"]) == 0
    out = capsys.readouterr()
    assert f"ranking with index {idx}: approximate HNSW" in out.err
    cli_similar = json.loads(out.out)
    with TestClient(create_app(service=service)) as client:
        http = client.post("/recommend", json={"user_id": user, "k": 5}).json()
        http_similar = client.post("/similar-items", json={"item_id": item, "k": 5}).json()
    assert [(i["item_id"], i["score"]) for i in cli["items"]] == [(i["item_id"], i["score"]) for i in http["items"]]
    assert ([(i["item_id"], i["score"]) for i in cli_similar["items"]]
            == [(i["item_id"], i["score"]) for i in http_similar["items"]])


def test_the_record_names_the_given_index(run_and_index, tmp_path):
    run, idx = run_and_index
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run), "--users", "all", "--k", "3", "--index", str(idx),
                 "--out", str(out)]) == 0
    index = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))["index"]
    assert index["kind"] == "approximate" and index["path"] == str(idx.resolve())


@pytest.mark.parametrize("command", ["recommend", "similar"])
def test_index_with_exact_is_refused(run_and_index, capsys, command):
    run, idx = run_and_index
    what = ["--user", "u1"] if command == "recommend" else ["--item", "i1"]
    assert main([command, "--run", str(run), *what, "--index", str(idx), "--exact"]) == 2
    assert "use one or the other" in capsys.readouterr().err


def test_a_short_similar_list_is_said_on_stderr_with_json_too(run_and_index, capsys) -> None:
    # `recommend --json` said a short list on stderr, `similar --json` did not (the JSON carries `shortfall`)
    run, idx = run_and_index
    from twotower.pipeline.artifacts import TrainedRun

    loaded = TrainedRun.load(run)
    item = loaded.item_vocab.ids[0]
    capsys.readouterr()
    assert main(["similar", "--run", str(run), "--item", item, "--k", "10000", "--exact", "--json"]) == 0
    out = capsys.readouterr()
    assert "shortfall" in json.loads(out.out) and "fewer than k=10000 items are left" in out.err


def _search_index_folder(tmp_path: Path) -> Path:
    """A folder `twotower search index` wrote, as far as its meta.json says (what a vector index's reader sees)."""
    folder = tmp_path / "sfidx"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"format": 2, "kind": "search_index", "documents": 3, "files": {}}))
    return folder


@pytest.mark.parametrize("command", ["recommend", "similar", "index info"])
def test_a_search_index_given_as_index_is_said_to_be_one(run_and_index, tmp_path, capsys, command):
    # it was "meta.json: not an index meta.json (no meta_sha256); the file is corrupted; rebuild it with `twotower
    # index build --run RUN --out sfidx`", a command `index build` then refused (the folder is no vector index)
    run, _ = run_and_index
    folder = _search_index_folder(tmp_path)
    what = {"recommend": ["--user", "u1"], "similar": ["--item", "i1"], "index info": []}[command]
    assert main([*command.split(), "--run", str(run), *what, "--index", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder} is a search index (from `twotower search index`), not a vector index" in err, err
    assert "corrupted" not in err and f"--out {folder}" not in err, err
    assert f"`twotower index build --run {run}`" in err, err


def test_serve_says_a_search_index_given_as_index_goes_to_search_index(run_and_index, tmp_path, capsys):
    run, _ = run_and_index
    folder = _search_index_folder(tmp_path)
    assert main(["serve", "--run", str(run), "--index", str(folder), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert (f"--index {folder}: {folder} is a search index (from `twotower search index`), not a vector index; "
            "give it to --search-index") in err, err


def test_python_says_a_search_index_is_no_vector_index(run_and_index, tmp_path):
    import twotower as tt
    from twotower.errors import ConfigError

    run, _ = run_and_index
    folder = _search_index_folder(tmp_path)
    with pytest.raises(ConfigError, match="is a search index .* not a vector index .*exact=True"):
        tt.recommend(tt.TrainedRun.load(run), ["u1"], index=folder)
    with pytest.raises(ConfigError, match=r"is a search index \(from `twotower search index`\), not a vector index"):
        tt.load_index(folder)
