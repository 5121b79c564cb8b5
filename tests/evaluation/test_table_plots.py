"""Comparison tables (exact text) and the metric-vs-k plot (a real PNG, written atomically)."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.evaluation import format_table, plot_recall_at_k, to_markdown

ROWS = [
    {"model": "Popularity", "Recall@20": 0.1, "users": 943},
    {"model": "EASE", "Recall@20": 0.25, "users": 943, "MeanPop@20": 120.5},
]


def test_format_table_exact_layout() -> None:
    text = format_table(ROWS, title="ml-100k test")
    assert text.splitlines() == [
        "ml-100k test",
        "model       Recall@20  users  MeanPop@20",
        "----------  ---------  -----  ----------",
        "Popularity     0.1000    943           -",
        "EASE           0.2500    943    120.5000",
    ]


def test_format_table_columns_floatfmt_and_best_marks() -> None:
    text = format_table(ROWS, ["model", "Recall@20"], floatfmt=".2f", mark_best=["Recall@20"])
    assert text.splitlines() == [
        "model       Recall@20",
        "----------  ---------",
        "Popularity      0.10",
        "EASE            0.25*",
    ]
    low = format_table(ROWS, ["model", "MeanPop@20"], mark_best={"MeanPop@20": "min"})
    assert low.splitlines()[-1].endswith("120.5000*")


def test_ties_are_all_marked_and_bad_marks_raise() -> None:
    rows = [{"m": "a", "x": 0.5}, {"m": "b", "x": 0.5}]
    assert all(line.endswith("*") for line in format_table(rows, mark_best=["x"]).splitlines()[2:])
    with pytest.raises(ConfigError, match="not among the columns"):
        format_table(rows, mark_best=["y"])
    with pytest.raises(ConfigError, match="'max' or 'min'"):
        format_table(rows, mark_best={"x": "best"})


def test_to_markdown() -> None:
    md = to_markdown(ROWS, ["model", "Recall@20"], mark_best=["Recall@20"])
    assert md.splitlines() == [
        "| model | Recall@20 |",
        "|---|---:|",
        "| Popularity | 0.1000 |",
        "| EASE | 0.2500\\* |",
    ]


def test_plot_writes_png_atomically(tmp_path) -> None:
    results = {
        "EASE": {"Recall@10": 0.2, "Recall@20": 0.3, "Recall@100": 0.6, "NDCG@10": 0.1},
        "Popularity": {"Recall@10": 0.1, "Recall@20": 0.15, "Recall@100": 0.4},
    }
    target = tmp_path / "plots" / "recall.png"
    assert plot_recall_at_k(results, target) == target
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["recall.png"]  # no temp file left
    plot_recall_at_k(results, tmp_path / "ndcg.png", metric="NDCG")
    with pytest.raises(ConfigError, match="metrics present"):
        plot_recall_at_k(results, tmp_path / "x.png", metric="MRR")


def test_per_column_formats_and_the_eval_table_prints_seconds_for_people(capsys):
    rows = [{"model": "ease", "fit_s": 1020.4084, "NDCG": 0.123456}]
    text = format_table(rows, formats={"fit_s": ".1f"})
    assert "1020.4" in text and "1020.4084" not in text and "0.1235" in text
    assert text.splitlines()[0].endswith("NDCG")  # still right-aligned as a number column

    from twotower.cli.evaluate_cmd import print_eval_table

    print_eval_table([{"model": "ease", "Recall@10": 0.5, "MeanPop@10": 233.4861, "fit_s": 1020.4084}], (10,), "t")
    out = capsys.readouterr().out
    assert "1020.4" in out and "1020.4084" not in out and "233.5" in out


def test_seconds_columns_print_one_decimal_unless_told_otherwise():
    rows = [{"model": "ease", "Recall@20": 0.25, "fit_s": 52.5476}]
    text = format_table(rows)
    assert "52.5" in text and "52.5476" not in text and "0.2500" in text
    assert "52.548" in format_table(rows, formats={"fit_s": ".3f"})


def test_the_users_line_scales_only_the_per_user_figures():
    # averaged over all 945 held-out users, the 2 skipped ones as misses, Recall..Precision scale by 943/945; a
    # catalogue figure does not (Coverage counts items, MeanPop averages over the recommended slots), but the line
    # said "every figure would scale"
    from twotower.cli.evaluate_cmd import users_line

    line = users_line([{"model": "two-tower", "users_evaluated": 943, "users_held_out": 945, "Coverage@10": 0.25}])
    assert line == ("users: 943 of 945 held-out users evaluated; the other 2 are skipped, not counted as misses: their "
                    "held-out items (or they) never occur in train, so no model here can rank them (as misses, every "
                    "per-user figure would scale by 0.9979; Coverage and MeanPop would not)")


def test_one_column_name_as_a_string_is_refused_not_read_letter_by_letter():
    # format_table(rows, "model") printed the columns m, o, d, e, l, every cell "-"
    with pytest.raises(ConfigError, match=r"^columns takes a list of column names, e.g. \['model'\], got the string "
                                          r"'model'$"):
        format_table(ROWS, "model")
    with pytest.raises(ConfigError, match="columns takes a list"):
        to_markdown(ROWS, "model")
    assert format_table(ROWS, ["model"]).splitlines()[0] == "model"
