from __future__ import annotations

import re
import zipfile

import pandas as pd
import pytest

from twotower.data import (
    MOVIELENS_ITEM_FEATURES,
    MOVIELENS_USER_FEATURES,
    FeatureEncoder,
    Vocabulary,
    default_movielens_dir,
    fetch_movielens_100k,
    load_movielens_100k,
)
from twotower.data import movielens as ml_mod
from twotower.errors import DataError, IntegrityError

GENRES = ml_mod.MOVIELENS_GENRES


def flags(*names):
    return "|".join("1" if g in names else "0" for g in GENRES)


def write_grouplens(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "u.data").write_text("1\t1\t5\t881250949\n2\t23\t3\t881250950\n1\t544\t4\t881250951\n2\t267\t1\t881250952\n")
    lines = [
        "1|Toy Story (1995)|01-Jan-1995||http://x|" + flags("Animation", "Children's", "Comedy"),
        # title year (1976) differs from GroupLens' release date (1996): the title's year wins
        f"23|Taxi Driver (1976)|16-Feb-1996||http://x|{flags('Drama', 'Thriller')}",
        f"544|Misérables, Les (1995)|01-Jan-1995||http://x|{flags('Drama', 'Musical')}",
        f"267|unknown||||{flags('unknown')}",
    ]
    (folder / "u.item").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    (folder / "u.user").write_text("1|24|M|technician|85711\n2|53|F|other|T8H1N\n")


def write_recbole(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ml-100k.inter").write_text(
        "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
        "1\t1\t5\t881250949\n2\t23\t3\t881250950\n1\t544\t4\t881250951\n2\t267\t1\t881250952\n"
    )
    (folder / "ml-100k.item").write_text(
        "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"
        "1\tToy Story\t1995\tAnimation Children's Comedy\n"
        "23\tTaxi Driver\t1976\tThriller Drama\n"
        "544\tMisérables, Les\t1995\tDrama Musical\n"
        "267\tunkonwn\tunkonwn\tunknown\n",
        encoding="utf-8",
    )
    (folder / "ml-100k.user").write_text(
        "user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token\n"
        "1\t24\tM\ttechnician\t85711\n2\t53\tF\tother\tT8H1N\n"
    )


def by_id(df, key):
    return df.sort_values(key).reset_index(drop=True)


def test_both_formats_load_the_same(tmp_path):
    write_grouplens(tmp_path / "gl")
    write_recbole(tmp_path / "rb")
    a = load_movielens_100k(tmp_path / "gl")
    b = load_movielens_100k(tmp_path / "rb")
    pd.testing.assert_frame_equal(by_id(a.items, "item_id"), by_id(b.items, "item_id"))
    pd.testing.assert_frame_equal(by_id(a.users, "user_id"), by_id(b.users, "user_id"))
    pd.testing.assert_frame_equal(a.interactions, b.interactions)
    items = a.items.set_index("item_id")
    assert items.loc["1", "title"] == "Toy Story (1995)"
    assert items.loc["1", "genres"] == "Animation|Children's|Comedy"
    assert items.loc["23", "year"] == 1976 and items.loc["23", "genres"] == "Drama|Thriller"
    assert items.loc["544", "title"] == "Misérables, Les (1995)"
    assert items.loc["267", "title"] == "unknown" and pd.isna(items.loc["267", "year"])
    assert items.loc["1", "decade"] == "1990s"
    users = a.users.set_index("user_id")
    assert users.loc["2", "age_bucket"] == "50-55" and users.loc["2", "zip_region"] == "other"
    assert list(a.interactions.columns) == ["user_id", "item_id", "timestamp", "rating"]


def test_feature_specs_fit_movielens_tables(tmp_path):
    write_grouplens(tmp_path / "gl")
    ml = load_movielens_100k(tmp_path / "gl")
    iv = Vocabulary.from_ids(ml.items["item_id"])
    f = FeatureEncoder(MOVIELENS_ITEM_FEATURES).fit_transform(ml.items, iv)
    assert f.multi[0].shape == (4, 3)
    assert f.text["title"][iv.index("1")] == "Toy Story (1995)"
    uv = Vocabulary.from_ids(ml.users["user_id"], kind="user")
    g = FeatureEncoder(MOVIELENS_USER_FEATURES).fit_transform(ml.users, uv)
    assert g.categorical.shape == (2, 4)


def test_load_errors_name_the_folder(tmp_path):
    with pytest.raises(DataError, match="no MovieLens-100K files"):
        load_movielens_100k(tmp_path)
    with pytest.raises(DataError, match="not found"):
        load_movielens_100k(tmp_path / "missing")


def fake_wheel(tmp_path):
    write_recbole(tmp_path / "src")
    wheel = tmp_path / "recbole-1.2.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ml_mod.RECBOLE_FILES:
            zf.write(tmp_path / "src" / name, f"recbole/dataset_example/ml-100k/{name}")
        zf.writestr("recbole/__init__.py", "")
    return wheel


def test_fetch_from_local_wheel_checks_sha256(tmp_path):
    wheel = fake_wheel(tmp_path)
    dest = tmp_path / "dest"
    with pytest.raises(IntegrityError, match="ml-100k.inter.*sha256"):
        fetch_movielens_100k(dest, source=wheel)
    assert not dest.exists()  # atomic: nothing half-written


def test_fetch_from_local_wheel_then_reuse(tmp_path, monkeypatch):
    wheel = fake_wheel(tmp_path)
    sums = ml_mod._checksums()
    sums["recbole"]["files"] = {n: ml_mod.sha256_file(tmp_path / "src" / n) for n in ml_mod.RECBOLE_FILES}
    monkeypatch.setattr(ml_mod, "_checksums", lambda: sums)
    dest = tmp_path / "dest"
    assert fetch_movielens_100k(dest, source=wheel) == dest
    assert sorted(p.name for p in dest.iterdir()) == sorted([*ml_mod.RECBOLE_FILES, ml_mod.MANIFEST])

    def boom(*a, **k):
        raise AssertionError("should not download again")

    monkeypatch.setattr(ml_mod, "_try_grouplens", boom)
    monkeypatch.setattr(ml_mod, "_from_pypi", boom)
    assert fetch_movielens_100k(dest) == dest
    assert len(load_movielens_100k(dest).items) == 4
    # a corrupted file afterwards is caught by name
    (dest / "ml-100k.item").write_text("item_id:token\n1\n")
    with pytest.raises(IntegrityError, match="ml-100k.item"):
        fetch_movielens_100k(dest)


def test_fetch_grouplens_folder_is_verified_structurally(tmp_path):
    write_grouplens(tmp_path / "gl")
    with pytest.raises(IntegrityError, match="u.data.*100000"):
        fetch_movielens_100k(tmp_path / "dest", source=tmp_path / "gl")


def test_default_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("TWOTOWER_DATA", str(tmp_path))
    assert default_movielens_dir() == tmp_path / "movielens-100k"


def test_real_movielens_100k_if_available():
    folder = default_movielens_dir()
    if ml_mod._detect(folder) is None:
        pytest.skip(f"MovieLens-100K not fetched at {folder}; run twotower.data.fetch_movielens_100k() (needs PyPI)")
    path = fetch_movielens_100k(folder)  # verifies checksums, no network when present
    ml = load_movielens_100k(path)
    inter = ml.interactions
    assert len(inter) == 100_000
    assert inter["user_id"].nunique() == 943 and len(ml.users) == 943
    assert inter["item_id"].nunique() == 1682 and len(ml.items) == 1682
    genres = {g for s in ml.items["genres"] for g in s.split("|") if g}
    assert genres == set(ml_mod.MOVIELENS_GENRES)
    toy = ml.items.set_index("item_id").loc["1"]
    assert toy["title"] == "Toy Story (1995)" and toy["genres"] == "Animation|Children's|Comedy"


def test_fetch_refuses_a_dest_whose_files_it_would_delete(tmp_path):
    # the dataset's folder is swapped in whole: `--dest ~/docs` emptied the folder, and a file became a folder
    from twotower.errors import ConfigError

    mine = tmp_path / "docs"
    mine.mkdir()
    (mine / "thesis.txt").write_text("precious")
    with pytest.raises(ConfigError, match=r"docs: holds files that are not MovieLens-100K's \(thesis\.txt\), which "
                                          r"fetching would delete"):
        fetch_movielens_100k(mine)
    assert (mine / "thesis.txt").read_text() == "precious"
    note = tmp_path / "notes"
    note.write_text("mine")
    with pytest.raises(ConfigError, match=r"notes: is a file; fetching writes the dataset's folder there"):
        fetch_movielens_100k(note)
    assert note.read_text() == "mine"


def test_fetch_source_errors_name_the_argument(tmp_path):
    """From Python the refusal names the argument (``source``), as the command names its --source."""
    with pytest.raises(DataError, match=rf"^source {re.escape(str(tmp_path / 'missing.zip'))}: not found"):
        fetch_movielens_100k(tmp_path / "dest", source=tmp_path / "missing.zip")
