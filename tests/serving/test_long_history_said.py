"""A new user's history longer than the user tower reads (model.user.history_len) is said alike by POST /recommend,
`twotower recommend --history --json` and tt.recommend: the service read the newest history_len items silently,
where the CLI and Python warned that the list rests on fewer items than were given."""
from __future__ import annotations

import json

from twotower.cli.main import main


def test_a_long_history_is_warned_by_http_cli_and_python(service, client, run_dir, capsys, caplog) -> None:
    import twotower as tt

    run = service.run
    L = int(run.model.history_len)
    history = list(run.item_vocab.ids)[: L + 3]
    want = (f"history: {L + 3} items given; the user tower reads the newest {L} (model.user.history_len), "
            f"and all {L + 3} are left out of the list")
    http = client.post("/recommend", json={"history": history, "k": 5}).json()
    assert http["warnings"] == [want]
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--history", ",".join(history), "--k", "5", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli == http
    with caplog.at_level("WARNING", logger="twotower"):
        lists = tt.recommend(run, history=history, k=5)
    assert want in caplog.text
    assert lists[0] == http["items"]
    # seen items kept: the same sentence without the exclusion, on both sides
    kept = client.post("/recommend", json={"history": history, "k": 5, "exclude_seen": False}).json()
    assert kept["warnings"] == [want.split(", and all")[0]]
    assert main(["recommend", "--run", str(run_dir), "--history", ",".join(history), "--k", "5", "--json",
                 "--no-exclude-seen"]) == 0
    assert json.loads(capsys.readouterr().out) == kept
    # a history the tower reads whole: no warning anywhere
    short = client.post("/recommend", json={"history": history[:L], "k": 5}).json()
    assert "warnings" not in short


def test_the_cli_says_a_long_history_as_a_warning_of_its_flag(service, run_dir, capsys, caplog) -> None:
    """`recommend --history` said it as a timestamped log line in HTTP's field name (``... WARNING
    twotower.pipeline.recommend: history: 53 items given; ...``); the command line says ``warning: --history: ...`` on
    stderr, as its other warnings, once, with and without --json."""
    L = int(service.run.model.history_len)
    history = list(service.run.item_vocab.ids)[: L + 3]
    want = (f"warning: --history: {L + 3} items given; the user tower reads the newest {L} (model.user.history_len), "
            f"and all {L + 3} are left out of the list")
    for extra in ([], ["--json"]):
        capsys.readouterr()
        caplog.clear()
        with caplog.at_level("WARNING", logger="twotower"):
            assert main(["recommend", "--run", str(run_dir), "--history", ",".join(history), "--k", "5", *extra]) == 0
        err = capsys.readouterr().err
        assert err.count(want) == 1, err
        assert "items given" not in caplog.text


def test_a_history_of_copies_of_one_item_says_so_and_what_to_send(service, client, run_dir, capsys, caplog) -> None:
    """500 copies of one item said "500 items given; ... and all 500 are left out of the list": the list rests on
    that one item, and one item is left out. HTTP, the CLI and Python say what happened and what to send."""
    import twotower as tt

    L = int(service.run.model.history_len)
    item = list(service.run.item_vocab.ids)[1]
    want = (f"history: 500 items given, all the same item; the user tower reads the newest {L} "
            "(model.user.history_len), so the list rests on that one item, which is left out of it; "
            "if that is not what was meant, send the user's items, oldest first")
    http = client.post("/recommend", json={"history": [item] * 500, "k": 5})
    assert http.status_code == 200 and http.json()["warnings"] == [want]
    kept = client.post("/recommend", json={"history": [item] * 500, "k": 5, "exclude_seen": False}).json()
    assert kept["warnings"] == [want.replace(", which is left out of it", "")]
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--history", ",".join([item] * 500), "--k", "5"]) == 0
    assert capsys.readouterr().err.count(f"warning: --history: {want[len('history: '):]}") == 1
    with caplog.at_level("WARNING", logger="twotower"):
        tt.recommend(service.run, history=[item] * 500, k=5)
    assert want in caplog.text


def test_a_history_of_a_few_items_repeated_counts_the_different_ones(service, client) -> None:
    """Items that come back (re-watches) are each left out of the list once: "all 27 are left out" counted repeats."""
    L = int(service.run.model.history_len)
    three = list(service.run.item_vocab.ids)[:3]
    got = client.post("/recommend", json={"history": three * (L + 1), "k": 5}).json()["warnings"]
    assert got == [f"history: {3 * (L + 1)} items given; the user tower reads the newest {L} (model.user.history_len), "
                   "and the 3 different items among them are left out of the list"]


def test_items_the_tower_leaves_out_do_not_count_against_its_window(unplaced_run_dir, capsys, caplog) -> None:
    """A history of 6 trained items and the 4 items x0..x3 training never saw (10 given, history_len 8) was said to
    be read as "the newest 8", so the user would trim it: the tower leaves those 4 out whatever its window and reads
    all 6 others. HTTP, the CLI and Python say only the untrained items' own warning."""
    import twotower as tt
    from fastapi.testclient import TestClient

    from twotower.serving import RecommenderService, create_app

    service = RecommenderService.load(unplaced_run_dir)
    L = int(service.run.model.history_len)
    history = [i for i in service.run.item_vocab.ids if not i.startswith("x")][: L - 2] + ["x0", "x1", "x2", "x3"]
    assert len(history) > L
    with TestClient(create_app(service=service)) as client:
        http = client.post("/recommend", json={"history": history, "k": 5}).json()
    assert [w for w in http["warnings"] if "items given" in w] == []
    assert any("no training interactions" in w for w in http["warnings"])
    capsys.readouterr()
    assert main(["recommend", "--run", str(unplaced_run_dir), "--history", ",".join(history), "--k", "5", "--json"]) == 0
    assert "items given" not in capsys.readouterr().err
    with caplog.at_level("WARNING", logger="twotower"):
        tt.recommend(service.run, history=history, k=5)
    assert "items given" not in caplog.text and "no training interactions" in caplog.text
