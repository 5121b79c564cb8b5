"""`recommend --history` with an unknown id is refused before the index is opened, as tt.recommend checks its ids
first: the CLI printed "ranking with exact search over ..." and then refused, a line about work never done."""
from __future__ import annotations

from twotower.cli.main import main


def test_unknown_history_id_is_refused_before_the_index_line(run_dir, capsys) -> None:
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", "--history", "i1,nope", "--k", "3"]) == 2
    err = capsys.readouterr().err
    assert "unknown item 'nope'" in err
    assert "ranking with" not in err
