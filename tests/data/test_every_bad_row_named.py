"""A column with several bad cells names them all in one error, not one per rerun."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.cli.main import main
from twotower.data.columns import CSV_ROWS, check_rows
from twotower.errors import DataError


def test_data_split_names_every_unreadable_timestamp(tmp_path, capsys):
    f = tmp_path / "events.csv"
    f.write_text("user_id,item_id,timestamp\nu1,i1,100\nu1,i2,oops\nu2,i1,300\nu2,i3,bad\nu3,i2,nope\n")
    assert main(["data", "split", "--input", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "row 3, column 'timestamp': cannot read timestamp 'oops'" in err
    assert err.rstrip().endswith("; the same holds for rows 5, 6")


@pytest.mark.parametrize(("bad_rows", "tail"), [
    ([3], "bad"),
    ([3, 9], "bad; the same holds for row 11"),
    (list(range(10)), "bad; the same holds for rows 3, 4, 5, 6, 7, ... (9 in all)"),
])
def test_the_first_bad_row_leads_and_the_next_five_follow(bad_rows, tail):
    bad = np.zeros(20, bool)
    bad[bad_rows] = True
    with pytest.raises(DataError) as e:
        check_rows(bad, lambda pos: "bad", file="f.csv", column="c", rows=CSV_ROWS)
    assert e.value.row == bad_rows[0] + 2 and str(e.value).endswith(tail)


def test_both_id_columns_missing_are_named_in_one_error(tmp_path, capsys):
    f = tmp_path / "events.csv"
    f.write_text("customer,product,ts\nc1,p1,1\nc2,p2,2\n")
    assert main(["data", "split", "--input", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "column 'user_id' (the user column) not found" in err and "did you mean 'customer'?" in err
    assert "Also column 'item_id' (the item column) not found. Set data.item_col=NAME" in err
    assert err.count("columns present") == 1
