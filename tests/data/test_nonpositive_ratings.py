"""A rating column holding 0 or less (returns, dislikes, a quantity of 0) is read, yet training counts every row as
a positive: the reader says so, naming the column, how many rows and the first of them."""
from __future__ import annotations

from twotower.data.readers import ColumnMap, read_interactions


def test_rows_rated_zero_or_less_are_warned_about_as_positives(tmp_path, caplog):
    p = tmp_path / "orders.csv"
    p.write_text("customer,sku,ordered_at,qty\nC-1,001,2024-01-01T10:00:00+02:00,2\nC-1,002,2024-01-02,0\n"
                 "C-2,001,2024-01-03,-1\nC-2,003,2024-01-04,1\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p, columns=ColumnMap(user="customer", item="sku", timestamp="ordered_at", rating="qty"))
    assert len(df) == 4  # read as before: nothing dropped behind the user's back
    warned = [r.getMessage() for r in caplog.records if "0 or less" in r.getMessage()]
    assert len(warned) == 1
    assert "2 row(s)" in warned[0] and "'qty'" in warned[0] and "row 3: 0" in warned[0]
    assert "positive" in warned[0] and "data.rating_col=null" in warned[0]


def test_positive_ratings_and_no_rating_column_say_nothing(tmp_path, caplog):
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id,timestamp,rating\nu,a,1,5\nu,b,2,0.5\n", encoding="utf-8")
    q = tmp_path / "j.csv"
    q.write_text("user_id,item_id,timestamp\nu,a,1\nu,b,2\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(p)
        read_interactions(q)
    assert "0 or less" not in caplog.text
