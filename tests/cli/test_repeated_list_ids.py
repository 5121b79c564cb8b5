"""`recommend --users u1,u1` and `similar --items i1,i1` give one list per distinct id, where tt.recommend and POST
/recommend/batch give one per id as given: said with a warning (an INFO line that -q hid), since a script pairing
its ids with the output's rows would shift."""
from __future__ import annotations

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


def test_a_repeated_id_in_a_list_flag_is_warned_about(tmp_path, capsys, caplog) -> None:
    run = build_tiny_run(tmp_path)
    capsys.readouterr()
    with caplog.at_level("WARNING"):
        assert main(["-q", "recommend", "--run", str(run), "--users", "u1,u1,u2", "--k", "1", "--out", "-"]) == 0
        assert main(["-q", "similar", "--run", str(run), "--items", "i1,i1", "--k", "1", "--out", "-"]) == 0
    assert "--users: 3 ids, 2 distinct: one list per user" in caplog.text
    assert "--items: 2 ids, 1 distinct: one list per item" in caplog.text
