"""`recommend` and `similar` take serve's --filter-exact-max, with its default (ServiceSettings.filter_exact_max): a
server started with a value below a filter's match count widened the ANN index's search where the command line
ranked the filter's items exactly, so the two could answer different lists for one request."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.index.base import VectorIndex

N_DRAMA = 20  # tiny_run: items i with i % 4 == 2, or i % 4 == 1 and i % 3 == 0 (genres "Comedy|Drama")


@pytest.fixture(scope="module")
def hnsw_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = build_tiny_run(tmp_path_factory.mktemp("tiny_filter_exact_max"))
    assert main(["-q", "index", "build", "--run", str(run), "--index", "hnsw", "--ef-search", "16"]) == 0
    return run


@pytest.fixture()
def searched(monkeypatch) -> list:
    """The exact_subset_max of every filtered index search, as made."""
    seen: list = []
    real = VectorIndex._search_filtered

    def spy(self, queries, k, excl, allow, exact_subset_max=None):  # noqa: ANN001, ANN202
        if allow is not None and any(a is not None for a in allow):
            seen.append((max(a.size for a in allow if a is not None), exact_subset_max))
        return real(self, queries, k, excl, allow, exact_subset_max)

    monkeypatch.setattr(VectorIndex, "_search_filtered", spy)
    return seen


@pytest.mark.parametrize("setting", [5, None], ids=["below-the-match-count", "default"])
def test_cli_and_service_with_one_setting_agree(hnsw_run, searched, capsys, setting) -> None:
    from twotower.serving import RecommenderService, RecRequest, ServiceSettings

    flag = [] if setting is None else ["--filter-exact-max", str(setting)]
    settings = ServiceSettings() if setting is None else ServiceSettings(filter_exact_max=setting)
    want = ServiceSettings.filter_exact_max if setting is None else setting
    service = RecommenderService.load(hnsw_run, settings=settings)
    assert not service.index.is_exact
    drama = {"genres": ["Drama"]}
    for who, request in ((["--user", "u3"], {"user_id": "u3"}), (["--history", "i1,i5,i9"], {"history": ("i1", "i5", "i9")})):
        searched.clear()
        capsys.readouterr()
        assert main(["recommend", "--run", str(hnsw_run), *who, "--k", "5", "--filter", "genres=Drama", "--json",
                     *flag]) == 0
        cli = json.loads(capsys.readouterr().out)
        http = service.recommend(RecRequest(**request, k=5, filters=drama))
        assert cli["items"] == http["items"]
        assert searched == [(N_DRAMA, want), (N_DRAMA, want)], searched  # the CLI's search, then the service's
    searched.clear()
    capsys.readouterr()
    assert main(["similar", "--run", str(hnsw_run), "--item", "i1", "--k", "5", "--filter", "genres=Drama", "--json",
                 *flag]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["items"] == service.similar_items("i1", 5, filters=drama)["items"]
    assert searched == [(N_DRAMA, want), (N_DRAMA, want)], searched
    searched.clear()
    assert main(["recommend", "--run", str(hnsw_run), "--users", "u1,u2", "--k", "5", "--filter", "genres=Drama",
                 "--json", *flag]) == 0
    assert searched == [(N_DRAMA, want)]


@pytest.mark.parametrize("command", ["recommend", "similar"])
def test_a_negative_setting_is_refused_in_serves_words(hnsw_run, capsys, command) -> None:
    who = ["--user", "u1"] if command == "recommend" else ["--item", "i1"]
    assert main([command, "--run", str(hnsw_run), *who, "--filter-exact-max", "-1"]) == 2
    assert capsys.readouterr().err.strip().endswith("--filter-exact-max must be >= 0, got -1")
