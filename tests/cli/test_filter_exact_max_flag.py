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
    assert capsys.readouterr().err.strip().endswith("--filter-exact-max: must be at least 0, got -1")


def test_python_takes_the_setting_and_agrees_with_the_cli(hnsw_run, searched, capsys) -> None:
    """tt.recommend and tt.similar had no filter_exact_max: Python always ranked with the 50,000 default, so a
    `recommend --filter-exact-max 5` (or a server started so) could answer another list than Python for one request."""
    import twotower as tt

    run = tt.TrainedRun.load(hnsw_run)
    drama = {"genres": ["Drama"]}
    calls = [
        (["recommend", "--user", "u3"], lambda **kw: tt.recommend(run, ["u3"], **kw)),
        (["recommend", "--history", "i1,i5,i9"], lambda **kw: tt.recommend(run, history=["i1", "i5", "i9"], **kw)),
        (["similar", "--item", "i1"], lambda **kw: tt.similar(run, ["i1"], **kw)),
    ]
    for argv, py in calls:
        searched.clear()
        capsys.readouterr()
        assert main([argv[0], "--run", str(hnsw_run), *argv[1:], "--k", "5", "--filter", "genres=Drama", "--json",
                     "--filter-exact-max", "5"]) == 0
        cli = json.loads(capsys.readouterr().out)
        assert py(k=5, filters=drama, filter_exact_max=5)[0] == cli["items"]
        assert searched == [(N_DRAMA, 5), (N_DRAMA, 5)], (argv, searched)  # the CLI's search, then Python's


@pytest.mark.parametrize("value, said", [(-1, "must be >= 0, got -1"), ("5", "must be an integer, got '5'")])
def test_python_refuses_a_bad_setting_in_serves_words(hnsw_run, value, said) -> None:
    import twotower as tt
    from twotower.errors import ConfigError

    run = tt.TrainedRun.load(hnsw_run)
    for call in (lambda: tt.recommend(run, ["u1"], filter_exact_max=value),
                 lambda: tt.similar(run, ["i1"], filter_exact_max=value)):
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value) == f"filter_exact_max {said}"


@pytest.mark.parametrize("command", ["recommend", "similar", "serve"])
def test_the_help_says_which_indexes_use_the_setting(command, capsys) -> None:
    """The help said "no effect on an ivf or ivfpq index, which filters during its search": an IVF with an RFlat
    refine (`index build --index ivfpq,RFlat`) ranks a small filter's items exactly, as flat and hnsw do, and does
    not filter during its search (test_an_rflat_refine_uses_the_setting)."""
    assert main([command, "--help"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "used by an index that keeps exact vectors (exact, flat, hnsw, or an IVF with an RFlat refine stage such " \
           "as ivfpq,RFlat); ignored by any other: a plain ivf or ivfpq index filters during its search, a lossy " \
           "refine (Refine(SQ8)) widens it" in said


@pytest.fixture(scope="module")
def ivf_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run with three IVF indexes in RUN/ivf, RUN/ivfpq_rflat and RUN/ivfpq_sq8."""
    run = build_tiny_run(tmp_path_factory.mktemp("tiny_ivf_refine"))
    for name, spec in (("ivf", "ivf"), ("ivfpq_rflat", "ivfpq,RFlat"), ("ivfpq_sq8", "ivfpq,Refine(SQ8)")):
        assert main(["-q", "index", "build", "--run", str(run), "--index", spec, "--out", str(run / name)]) == 0
    return run


@pytest.mark.parametrize("index, used", [("ivf", False), ("ivfpq_rflat", True), ("ivfpq_sq8", False)])
def test_an_rflat_refine_uses_the_setting(ivf_run, monkeypatch, capsys, index, used) -> None:
    """What the help says: an IVF index with an RFlat refine ranks a filter matching at most --filter-exact-max
    items exactly over those items (and with 0 searches instead, unfiltered by FAISS); a plain IVF filters in its
    search (a FAISS selector) and a lossy refine widens its search, whatever the setting."""
    from twotower.index.faiss_index import FaissIndex

    exactly, selector = [], []
    real_exact, real_selector = FaissIndex._search_allowed_exactly, FaissIndex._selector_params

    def spy_exact(self, *a):  # noqa: ANN001, ANN002, ANN202
        got = real_exact(self, *a)
        exactly.append(got is not None)
        return got

    def spy_selector(self, *a):  # noqa: ANN001, ANN002, ANN202
        got = real_selector(self, *a)
        selector.append(got is not None)
        return got

    monkeypatch.setattr(FaissIndex, "_search_allowed_exactly", spy_exact)
    monkeypatch.setattr(FaissIndex, "_selector_params", spy_selector)
    for setting in (0, 10**6):
        exactly.clear(), selector.clear()
        assert main(["similar", "--run", str(ivf_run), "--item", "i1", "--k", "5", "--filter", "genres=Drama",
                     "--index", str(ivf_run / index), "--json", "--filter-exact-max", str(setting)]) == 0
        assert any(exactly) == (used and setting > 0), (setting, exactly)
        assert any(selector) == (index == "ivf"), (setting, selector)  # only a plain IVF filters in its search
    capsys.readouterr()


def test_an_ivf_index_answers_alike_whatever_the_setting(tmp_path, searched) -> None:
    """What the help says: on an ivf index the setting changes no list (it is passed, and not used)."""
    import twotower as tt

    run_dir = build_tiny_run(tmp_path / "ivf")
    assert main(["-q", "index", "build", "--run", str(run_dir), "--index", "ivf"]) == 0
    run = tt.TrainedRun.load(run_dir)
    drama = {"genres": ["Drama"]}
    lists = [tt.similar(run, ["i1", "i2"], k=5, filters=drama, filter_exact_max=m) for m in (0, 10**6)]
    assert searched == [(N_DRAMA, 0), (N_DRAMA, 10**6)]
    assert lists[0] == lists[1]
