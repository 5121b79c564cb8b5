from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main


def test_data_split_writes_three_files_without_overlap(tmp_path, capsys):
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--method", "temporal", "--out", str(out)]) == 0
    parts = {n: pd.read_csv(out / f"{n}.csv", dtype={"user_id": str, "item_id": str}) for n in ("train", "valid", "test")}
    total = sum(len(p) for p in parts.values())
    assert total == len(pd.read_csv(paths["all"]))
    # temporal: every user's test interactions come after their training ones
    for u, g in parts["test"].groupby("user_id"):
        assert g["timestamp"].min() >= parts["train"].loc[parts["train"]["user_id"] == u, "timestamp"].max()
    assert (out / "split_report.json").exists()


def test_data_split_rejects_bad_ratios(tmp_path, capsys):
    paths = write_dataset(tmp_path / "src")
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--ratios", "0.5,0.5,0.5", "--out", str(tmp_path / "o")]) == 2
    assert "ratios" in capsys.readouterr().err


def test_data_split_names_the_flag_and_checks_it_before_reading(tmp_path, capsys):
    # the input does not exist: the bad --n is reported first, by the flag the user typed
    assert main(["-q", "data", "split", "--input", str(tmp_path / "missing.csv"), "--method", "leave_last",
                 "--n", "0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--n: must be at least 1, got 0" in err and "data.leave_n" not in err


def test_data_split_sasrec_leave_last(tmp_path):
    # SASRec format: no header, file order is time order (item ids deliberately out of order)
    src = tmp_path / "seq.txt"
    src.write_text("1 5\n1 3\n1 9\n1 1\n2 2\n2 8\n2 4\n", encoding="utf-8")
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(src), "--method", "leave_last", "--n", "1", "--out", str(out)]) == 0
    parts = {n: pd.read_csv(out / f"{n}.csv", dtype={"user_id": str, "item_id": str}) for n in ("train", "valid", "test")}
    assert parts["train"]["item_id"].tolist() == ["5", "3", "2"]
    assert parts["valid"]["item_id"].tolist() == ["9", "8"]
    assert parts["test"]["item_id"].tolist() == ["1", "4"]
    # the written timestamps keep the order when the CSVs are read back
    assert parts["train"]["timestamp"].tolist() == [0, 1, 0]
    assert parts["test"]["timestamp"].tolist() == [3, 2]


def _renamed(tmp_path):
    src = tmp_path / "renamed.csv"
    rows = [f"u{u},i{i},{100 * u + i},{1 + i % 5}" for u in range(4) for i in range(6)]
    src.write_text("uid,iid,ts,stars\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return src


def test_data_split_takes_the_column_overrides_train_takes(tmp_path, capsys):
    src, out = _renamed(tmp_path), tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(src), "--out", str(out)]) == 2
    assert "Set data.user_col=NAME" in capsys.readouterr().err  # the hint the command now honours
    assert main(["-q", "data", "split", "--input", str(src), "--out", str(out), "data.user_col=uid",
                 "data.item_col=iid", "data.timestamp_col=ts", "data.rating_col=stars"]) == 0
    parts = [pd.read_csv(out / f"{n}.csv") for n in ("train", "valid", "test")]
    assert all(list(p.columns) == ["user_id", "item_id", "timestamp", "rating"] for p in parts)
    assert sum(len(p) for p in parts) == 24 and set(parts[0]["user_id"]) == {"u0", "u1", "u2", "u3"}


def test_data_split_refuses_overrides_it_does_not_use(tmp_path, capsys):
    assert main(["-q", "data", "split", "--input", str(_renamed(tmp_path)), "--out", str(tmp_path / "o"),
                 "train.epochs=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "train.epochs" in err and "data.user_col" in err
    assert "did you mean" not in err  # a real setting, only not one the split takes
    assert "train.epochs cannot be set here" in err and "unknown" not in err


@pytest.mark.parametrize(("typed", "meant"), [("data.user_cl", "data.user_col"), ("data.unit_time", "data.time_unit"),
                                              ("data.weight_col", "data.item_col")])
def test_data_split_names_the_override_a_misspelt_one_meant(typed, meant, tmp_path, capsys):
    """`train` answers a misspelt override with "did you mean"; `data split` only listed the seven names it takes.
    Such a name is unknown, as `train` says: "cannot be set here" (pinned here before) is for a real setting."""
    assert main(["-q", "data", "split", "--input", str(_renamed(tmp_path)), "--out", str(tmp_path / "o"),
                 f"{typed}=x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: data split: unknown setting {typed!r}; it takes data.user_col, ")
    assert err.rstrip().endswith(f"; did you mean {meant}?")


def test_data_split_negative_seed_names_the_flag(tmp_path, capsys):
    assert main(["-q", "data", "split", "--input", str(tmp_path / "missing.csv"), "--method", "random",
                 "--seed", "-1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seed" in err and "Traceback" not in err


def test_data_split_time_names_its_flags(tmp_path, capsys):
    assert main(["-q", "data", "split", "--input", str(tmp_path / "missing.csv"), "--method", "time",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--valid-start" in err and "--test-start" in err and "data.valid_start" not in err


def test_data_split_time_cutoffs_beyond_the_data_are_refused_before_a_good_split_is_replaced(tmp_path, capsys):
    """Cut-offs past the data wrote empty valid.csv/test.csv over a good earlier split in --out, with only a
    warning; now refused (exit 2, one line naming the cut-offs, the data's range and the empty parts)."""
    out = tmp_path / "o"
    cols = ["data.user_col=uid", "data.item_col=iid", "data.timestamp_col=ts", "data.rating_col=stars"]
    base = ["-q", "data", "split", "--input", str(_renamed(tmp_path)), "--out", str(out), "--method", "time", *cols]
    assert main([*base, "--valid-start", "1970-01-01T00:02:00", "--test-start", "1970-01-01T00:04:00"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert main([*base, "--valid-start", "2030-01-01", "--test-start", "2031-01-01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "valid is empty" in err and "test is empty" in err
    assert "--test-start 2031-01-01" in err and "timestamps run from 0 " in err and "to 305 " in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_data_split_time_equal_cutoffs_ask_for_no_valid_part(tmp_path, capsys):
    # valid is [valid-start, test-start): equal cut-offs ask for none, so an empty valid is no error
    out = tmp_path / "o"
    assert main(["-q", "data", "split", "--input", str(_renamed(tmp_path)), "--out", str(out), "--method", "time",
                 "--valid-start", "1970-01-01T00:03:00", "--test-start", "1970-01-01T00:03:00", "data.user_col=uid",
                 "data.item_col=iid", "data.timestamp_col=ts", "data.rating_col=stars"]) == 0
    assert len(pd.read_csv(out / "valid.csv")) == 0 and len(pd.read_csv(out / "test.csv")) > 0


def test_an_interrupted_split_leaves_the_previous_split_whole(tmp_path, monkeypatch):
    """Ctrl-C (or a kill) while a re-split was written used to leave the new train.csv beside the previous
    split's valid.csv and test.csv: a mixed split that trains without complaint (here, test rows in train)."""
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    argv = ["-q", "data", "split", "--input", str(paths["all"]), "--out", str(out)]
    assert main([*argv, "--ratios", "0.6,0.2,0.2"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_to_csv = pd.DataFrame.to_csv
    calls = {"n": 0}

    def interrupted_to_csv(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # while the second file (valid.csv) is being written
            raise KeyboardInterrupt
        return real_to_csv(self, *a, **k)

    monkeypatch.setattr(pd.DataFrame, "to_csv", interrupted_to_csv)
    assert main([*argv, "--ratios", "0.8,0.1,0.1"]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_data_split_time_dates_follow_millisecond_data_and_seconds_are_refused(tmp_path, capsys):
    # before: --valid-start 2024-05-01 became epoch seconds, every millisecond row was after it, and the
    # split stopped on "train part empty ... use a smaller valid/test share"
    src = tmp_path / "ms.csv"
    days = [1_711_929_600 + k * 86_400 for k in range(0, 90, 10)]  # 2024-04-01 .. 2024-06-20
    pd.DataFrame({"user_id": ["u"] * 9, "item_id": [f"i{k}" for k in range(9)],
                  "timestamp": [d * 1000 + 5 for d in days]}).to_csv(src, index=False)
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(src), "--method", "time", "--valid-start", "2024-05-01",
                 "--test-start", "2024-06-01", "--out", str(out)]) == 0
    report = json.loads((out / "split_report.json").read_text())
    assert report["time_unit"] == "ms" and report["valid_start"] == 1_714_521_600_000
    assert (report["train_rows"], report["valid_rows"], report["test_rows"]) == (3, 4, 2)
    assert pd.read_csv(out / "test.csv")["timestamp"].tolist() == [d * 1000 + 5 for d in days[7:]]  # unchanged
    capsys.readouterr()
    assert main(["-q", "data", "split", "--input", str(src), "--method", "time", "--valid-start", "1714521600",
                 "--test-start", "2024-06-01", "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "--valid-start=1714521600 reads as epoch seconds" in err and "(1714521600000)" in err


def test_every_split_method_names_the_time_unit_in_its_report(tmp_path):
    # README: the unit told from the magnitude is "named in the split report (time_unit)"; only --method time's
    # report named it, so millisecond data split per user gave no way to check it was not read as seconds
    src = tmp_path / "ms.csv"
    rows = [(f"u{u}", f"i{k}", (1_714_521_600 + 3_600 * k) * 1000) for u in range(4) for k in range(6)]
    pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).to_csv(src, index=False)
    seq = tmp_path / "seq.txt"  # SASRec lines: no times, each user's line order is the order
    seq.write_text("".join(f"{u} {k}\n" for u in range(1, 5) for k in range(1, 7)))
    cases = [(src, ["--method", "temporal"], "ms"), (src, ["--method", "leave_last"], "ms"),
             (src, ["--method", "random"], "ms"), (src, ["--method", "temporal", "data.time_unit=us"], "us"),
             (seq, ["--method", "leave_last"], "row order")]
    for n, (path, flags, unit) in enumerate(cases):
        out = tmp_path / f"split{n}"
        assert main(["-q", "data", "split", "--input", str(path), *flags, "--out", str(out)]) == 0
        assert json.loads((out / "split_report.json").read_text())["time_unit"] == unit, flags


def test_a_split_into_an_earlier_splits_folder_names_the_item_table_it_did_not_write(tmp_path, caplog):
    """Before: `data split --dataset movielens-100k --out d`, then `data split --input mine.csv --out d`, left
    MovieLens' items.csv and users.csv beside the new train.csv without a word, and `train --items d/items.csv`
    read them as the new data's tables. Now a warning names them (they are not removed: they may be the user's)."""
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    argv = ["data", "split", "--input", str(paths["all"]), "--out", str(out)]
    out.mkdir()
    (out / "items.csv").write_text("item_id,title\n1,mine\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower"):
        assert main(argv) == 0  # no earlier split there: an items.csv put beside the input is the user's own
    assert "items.csv" not in caplog.text
    (out / "users.csv").write_text("user_id,age\n1,20\n", encoding="utf-8")  # as a --dataset split writes it
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower"):
        assert main(argv) == 0
    assert (f"{out} held an earlier split: items.csv and users.csv there are not from this split (of "
            f"{paths['all']}, which has no item or user table)") in caplog.text
    assert (out / "items.csv").is_file() and (out / "users.csv").is_file()


@pytest.mark.parametrize(("flags", "said"), [
    (["--n", "1"], "--n is read by --method leave_last, not by --method temporal (the default), which would ignore "
                   "it: choose --method leave_last for it, or leave --n out"),
    (["--valid-start", "2024-01-01", "--test-start", "2024-02-01"],
     "--valid-start is read by --method time, not by --method temporal (the default)"),
    (["--seed", "3"], "--seed is read by --method random, not by --method temporal"),
    (["--method", "leave_last", "--ratios", "0.5,0.25,0.25"],
     "--ratios is read by --method temporal and random, not by --method leave_last, which would ignore it: choose "
     "--method temporal or random for it"),
])
def test_a_flag_of_another_split_method_is_refused_not_ignored(tmp_path, capsys, flags, said):
    """Before: `data split --input f --n 1 --out d` (leave-one-out meant, --method forgotten) wrote the default
    temporal 80/10/10 split without a word; `--valid-start/--test-start` and `--seed` were ignored the same way."""
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "o"
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(out), *flags]) == 2
    assert said in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("flags", "said"), [
    (["--input", "INPUT"], "--input INPUT and --dataset movielens-100k each name the interactions to split: give one "
                           "of them"),
    (["--format", "sasrec"], "--format: how to read --input; --dataset movielens-100k is read in its own format, "
                             "which would ignore it: leave it out, or split a file with --input"),
    (["data.user_col=customer", "data.encoding=cp1252"], "data.user_col, data.encoding: how to read --input; "
                                                         "--dataset movielens-100k is read in its own format"),
])
def test_dataset_with_a_flag_of_input_is_refused_not_ignored(tmp_path, capsys, flags, said):
    """Before: `data split --dataset movielens-100k --input mine.csv` split MovieLens-100K and ignored mine.csv
    without a word (train reads --data before --dataset), and --format / data.* were ignored the same way."""
    paths = write_dataset(tmp_path / "src")
    flags = [str(paths["all"]) if f == "INPUT" else f for f in flags]
    out = tmp_path / "o"
    assert main(["-q", "data", "split", "--dataset", "movielens-100k", "--out", str(out), *flags]) == 2
    assert said.replace("INPUT", str(paths["all"])) in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("flags", [[], ["data.time_unit=s"], ["--format", "auto"], ["data.format=auto"],
                                   ['data.format="auto"']])
def test_dataset_with_settings_that_ignore_nothing_is_not_refused(flags):
    """data.time_unit is read by a time split's cut-offs, of a dataset too, and `auto` is the default format: the
    refusal of settings that say how to read --input refused them as "ignored" (review of 756665d4)."""
    import argparse

    from twotower.cli.data_cmd import _check_one_input

    fmt = flags[1] if flags[:1] == ["--format"] else None
    overrides = [f for f in flags if "=" in f]
    _check_one_input(argparse.Namespace(dataset="movielens-100k", input=None, format=fmt, overrides=overrides))


def test_data_split_into_a_runs_data_folder_is_refused(tmp_path, capsys):
    """`data split --out RUN/data` replaced the split a run was trained on: `evaluate --run RUN` then scored
    another test set without a word (data/*.csv are read, not checksummed)."""
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "data" / "test.csv").write_text("user_id,item_id\nu1,i1\n")
    seq = tmp_path / "seq.txt"
    seq.write_text("".join(f"{u} {i}\n" for u in range(1, 4) for i in range(1, 6)))
    assert main(["data", "split", "--input", str(seq), "--method", "leave_last", "--n", "1",
                 "--out", str(run / "data")]) == 2
    assert (f"--out {run / 'data'}: holds the split of the run {str(run)!r}, which evaluate and --resume read; "
            "choose another folder") in capsys.readouterr().err
    assert (run / "data" / "test.csv").read_text() == "user_id,item_id\nu1,i1\n"
    assert main(["-q", "data", "split", "--input", str(seq), "--method", "leave_last", "--n", "1",
                 "--out", str(tmp_path / "split")]) == 0


@pytest.mark.parametrize("name", ["train", "valid", "test"])
def test_a_split_into_the_folder_of_its_input_does_not_overwrite_it(tmp_path, capsys, name):
    """Before: `data split --input data/train.csv --out data` replaced the user's file by its own train part (their
    column names and a fifth of the rows gone) without a word; the split is refused before anything is read."""
    paths = write_dataset(tmp_path / "src")
    own = tmp_path / "data" / f"{name}.csv"
    own.parent.mkdir()
    own.write_bytes(paths["all"].read_bytes())
    before = own.read_bytes()
    rel = f"{tmp_path}/data/../data/{name}.csv"  # the same file by another spelling
    assert main(["-q", "data", "split", "--input", str(rel), "--out", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: --input {rel} is the file this split writes as {own}: it would be replaced by "
                           "one part of itself; split into another --out")
    assert own.read_bytes() == before and sorted(p.name for p in own.parent.iterdir()) == [f"{name}.csv"]
    assert main(["-q", "data", "split", "--input", str(own), "--out", str(tmp_path / "other")]) == 0


def test_data_split_takes_data_as_train_spells_the_input(tmp_path, capsys):
    """Before: `data split --data FILE` (the flag `train` takes) was read as an abbreviation of --dataset and
    refused with "invalid choice"; it is the same flag as --input, and splits the same file the same way."""
    paths = write_dataset(tmp_path / "src")
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["-q", "data", "split", "--data", str(paths["all"]), "--out", str(a)]) == 0
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(b)]) == 0
    for name in ("train.csv", "valid.csv", "test.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_the_split_report_counts_the_duplicate_rows_the_input_lost(tmp_path, capsys):
    # Before: 6 rows in, 5 in the three files, and split_report.json (rows per part only) did not say where
    # the sixth went; now it holds the reader's counts and the printed line names the drop
    src = tmp_path / "in.csv"
    src.write_text("user_id,item_id,timestamp,rating\nu,1,1,5\nu,1,1,5\nu,2,2,4\nu,2,2,3\nu,3,3,1\nv,1,1,1\n",
                   encoding="utf-8")
    out = tmp_path / "s"
    assert main(["data", "split", "--input", str(src), "--out", str(out)]) == 0
    report = json.loads((out / "split_report.json").read_text())
    assert report["read"] == {"rows_read": 6, "rows": 4, "duplicates_dropped": 1, "conflicting_duplicates_dropped": 1}
    assert report["train_rows"] + report["valid_rows"] + report["test_rows"] == report["read"]["rows"]
    assert "2 duplicate row(s) of the input dropped (1 exact, 1 with another rating)" in capsys.readouterr().out


def test_a_split_into_a_folder_another_split_is_writing_is_refused_and_changes_nothing(tmp_path, capsys):
    """Two `data split --out D` at once could interleave their file moves (one's train.csv beside the other's
    test.csv); the one that finds the folder's writer lock held is refused and writes nothing."""
    import fcntl

    from twotower.utils.folder_lock import LOCK_FILE

    data = write_dataset(tmp_path / "data", n_users=20, per_user=10)
    out = tmp_path / "split"
    assert main(["data", "split", "--input", str(data["train"]), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name != LOCK_FILE}
    with open(out / LOCK_FILE, "w") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write("4242\n")
        other.flush()
        capsys.readouterr()
        assert main(["data", "split", "--input", str(data["train"]), "--out", str(out), "--method", "random"]) == 2
        assert capsys.readouterr().err.strip() == (f"error: {out}: another twotower data split (pid 4242) is writing "
                                                   "this folder; wait for it to finish, or split into another --out")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != LOCK_FILE} == before


def test_the_split_report_names_the_input_and_how_it_was_read_so_the_split_can_be_made_again(tmp_path, monkeypatch):
    # Before: split_report.json held the method, ratios and seed but neither the file split nor its data.*_col
    # settings, so nothing beside the three files said how to make them again.
    src = tmp_path / "in"
    src.mkdir()
    df = write_dataset(tmp_path / "syn")["all"]
    pd.read_csv(df).rename(columns={"user_id": "uid", "item_id": "iid"}).to_csv(src / "log.csv", index=False)
    monkeypatch.chdir(src)
    assert main(["-q", "data", "split", "--input", "log.csv", "--method", "random", "--seed", "3", "--out",
                 str(tmp_path / "a"), "data.user_col=uid", "data.item_col=iid"]) == 0
    report = json.loads((tmp_path / "a" / "split_report.json").read_text())
    given = report["input"]
    assert given["path"] == str(src / "log.csv") and (given["user_col"], given["item_col"]) == ("uid", "iid")
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "data", "split", "--input", given["path"], "--method", report["method"], "--ratios",
                 ",".join(map(str, report["ratios"])), "--seed", str(report["seed"]), "--out", str(tmp_path / "b"),
                 *(f"data.{k}={json.dumps(v)}" for k, v in given.items() if k not in ("path", "sha256"))]) == 0
    for name in ("train.csv", "valid.csv", "test.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_rows_apart_by_a_fraction_of_a_second_stay_two_rows_when_the_split_is_read_again(tmp_path):
    # README: rows whose times differ only in the fraction "are two events, not duplicates", and the first read
    # kept both i4 clicks; the split files held the floored second (881250951 twice), so every later read of them
    # (train --train, the run's data/*.csv read by evaluate) dropped one as an "exact duplicate"
    from twotower.data import read_interactions

    src = tmp_path / "d.csv"
    src.write_text("user,item,stars,ts\nu1,i4,3,881250951.5\nu1,i4,3,881250951.7\nu1,i5,3,881250960\n"
                   "u1,i6,3,881250961\n")
    out = tmp_path / "d1"
    assert main(["-q", "data", "split", "--input", str(src), "--out", str(out), "data.user_col=user",
                 "data.item_col=item", "data.timestamp_col=ts", "data.rating_col=stars"]) == 0
    written = pd.read_csv(out / "train.csv")
    # kept as epoch milliseconds, the unit the fractions need, and the report says so
    assert written["timestamp"].tolist() == [881_250_951_500, 881_250_951_700]
    assert json.loads((out / "split_report.json").read_text())["time_unit"] == "ms"
    again = read_interactions(out / "train.csv")
    assert again["item_id"].tolist() == ["i4", "i4"] and again.attrs["report"]["duplicates_dropped"] == 0
    assert again["timestamp"].tolist() == written["timestamp"].tolist()


def test_data_fetch_source_errors_name_the_flag_and_the_file(tmp_path, capsys):
    """`data fetch --source FILE` refusals read "file FILE: source not found" and named the copy's temporary folder
    (".dest.tmp-.../u.data: expected 100000 interactions"), never --source: each names the flag and the file now."""
    import zipfile

    from tests.data.test_movielens import write_grouplens

    (tmp_path / "not.zip").write_text("hello\n")
    (tmp_path / "empty").mkdir()
    write_grouplens(tmp_path / "gl")  # MovieLens' files, but 4 ratings: not the real data set
    with zipfile.ZipFile(tmp_path / "gl.zip", "w") as zf:
        for name in ("u.data", "u.item", "u.user"):
            zf.write(tmp_path / "gl" / name, f"ml-100k/{name}")
    for source, said in [("missing.zip", ": not found; pass a MovieLens zip, a recbole wheel or a folder"),
                         ("not.zip", ": not a readable zip/wheel"), ("empty", ": no MovieLens-100K files"),
                         ("gl.zip", ": u.data: expected 100000 interactions, found 4"),
                         ("gl", ": u.data: expected 100000 interactions, found 4")]:
        assert main(["-q", "data", "fetch", "movielens-100k", "--dest", str(tmp_path / "dest"), "--source",
                     str(tmp_path / source)]) == 2
        assert f"error: --source {tmp_path / source}{said}" in capsys.readouterr().err, source
    assert not (tmp_path / "dest").exists()
