"""A refusal of ``RecommenderService.load`` names the way around it in Python's words.

Before: ``RecommenderService.load(run, allow_low_recall=False)`` on an index below its recall target raised
"... serve exact search with --exact, or pass --allow-low-recall to serve it anyway": flags of `twotower serve`,
which a Python caller has no way to pass; ``tt.recommend`` already says ``exact=True`` where the CLI says ``--exact``.
"""
from __future__ import annotations

import json
import shutil

import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError


@pytest.fixture(scope="module")
def low_recall_run(run_dir, tmp_path_factory):
    pytest.importorskip("faiss")
    run = tmp_path_factory.mktemp("low") / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("index"))
    # an IVF index that misses a recall target of 1.0 on purpose (PQ codes of 4 bits over 60 items)
    assert main(["-q", "index", "build", "--run", str(run), "--index", "IVF8,PQ4x4", "--queries", "20",
                 "--target-recall", "1.0"]) == 0
    assert not json.loads((run / "index" / "tune.json").read_text())["met_target"]
    return run


def test_python_is_told_the_keyword_arguments(low_recall_run) -> None:
    from twotower.serving import RecommenderService

    with pytest.raises(ConfigError, match="below its target") as e:
        RecommenderService.load(low_recall_run)
    said = str(e.value)
    assert "allow_low_recall=True" in said and "exact=True" in said, said
    assert "--allow-low-recall" not in said and "--exact" not in said, said
    service = RecommenderService.load(low_recall_run, allow_low_recall=True)  # the way it names
    assert service.index_recall is not None and service.index_recall["met_target"] is False


def test_serve_is_told_its_flags(low_recall_run, capsys) -> None:
    assert main(["serve", "--run", str(low_recall_run), "--port", "0"]) != 0
    err = capsys.readouterr().err
    assert "--allow-low-recall" in err and "--exact" in err and "allow_low_recall=True" not in err, err


def test_create_app_is_told_the_service_it_can_be_given(low_recall_run) -> None:
    from fastapi.testclient import TestClient

    from twotower.serving import create_app

    with pytest.raises(ConfigError) as e:
        with TestClient(create_app(low_recall_run)):
            pass
    said = str(e.value)
    assert "create_app(RUN, allow_low_recall=True)" in said and "create_app(RUN, exact=True)" in said, said
    # the ways it names: create_app(run_dir) took neither keyword before
    with TestClient(create_app(low_recall_run, allow_low_recall=True)) as client:
        recall = client.get("/readyz").json()["index"]["recall"]
        assert recall is not None and recall["met_target"] is False
    with TestClient(create_app(low_recall_run, exact=True)) as client:
        assert client.get("/readyz").json()["index"]["recall"] is None  # exact search: nothing approximated
        assert client.post("/recommend", json={"user_id": "u3", "k": 3}).status_code == 200


def test_create_app_refuses_the_keywords_with_a_loaded_service(low_recall_run) -> None:
    from twotower.serving import RecommenderService, create_app

    service = RecommenderService.load(low_recall_run, exact=True)
    with pytest.raises(TypeError, match="RecommenderService.load"):
        create_app(service=service, allow_low_recall=True)


def test_serve_s_rebuild_command_can_be_pasted(run_dir, tmp_path, capsys) -> None:
    """`serve` told an index below its recall target to rebuild with `twotower index build --index auto`: no --run
    (required), no --out (the index was not the run's own), so the command failed or built another folder."""
    import re
    import shlex

    pytest.importorskip("faiss")
    run = tmp_path / "my runs" / "ml"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("index"))
    out = tmp_path / "my idx"  # a pinned setting that misses the target: measured as given, recorded as pinned
    assert main(["-q", "index", "build", "--run", str(run), "--index", "IVF8,Flat", "--nprobe", "1", "--queries", "20",
                 "--target-recall", "1.0", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["serve", "--run", str(run), "--index", str(out), "--port", "0"]) != 0
    err = capsys.readouterr().err
    assert "below its target" in err, err
    command = shlex.split(re.search(r"rebuild it \(`([^`]*)`", err).group(1))
    # the recorded tuning flags kept, the pin left out (--index auto refuses --nprobe: it applies to one type)
    assert command == ["twotower", "index", "build", "--run", str(run), "--index", "auto", "--target-recall", "1",
                       "--queries", "20", "--out", str(out)], command
    assert main(["-q", *command[1:]]) == 0  # it runs as printed, and its index is served
    capsys.readouterr()
    from twotower.serving import RecommenderService

    recall = RecommenderService.load(run, out).index_recall  # None: `auto` chose exact search
    assert recall is None or recall["met_target"], recall
