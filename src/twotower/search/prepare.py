"""Turn your own passages and (query, relevant passage) pairs into a BEIR folder.

Every ``twotower search`` / ``rerank`` command reads the BEIR layout (:mod:`twotower.search.beir`). Data of
one's own is rarely in it: a table of passages (``pid,title,body``) and a table of pairs (``question,pid``)
in CSV/TSV/Parquet/JSONL, with their own column names. :func:`prepare_beir` reads both with the
interaction readers (so a BOM, Windows line endings, ``;`` or tab separators and ids such as ``007`` are
read as they are), checks them with errors that name the file, row and column, and writes::

    corpus.jsonl  queries.jsonl  qrels/<split>.tsv  prepare.json (what was read, counted and dropped)

Queries that share a relevant passage are kept in one split (``validation_split_by_group``), so no passage
is judged both in train and in test.
"""
from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from twotower.data.readers import RowNumbers, check_rows, ids_to_str, missing_column_error, read_table_numbered
from twotower.config import PrepareConfig
from twotower.errors import ConfigError, DataError
from twotower.search.artefacts import out_check
from twotower.search.beir import Qrels, validation_split_by_group
from twotower.search.id_cells import BRACKETS, expand_id_lists, looks_like_a_list
from twotower.utils.atomic import atomic_dir
from twotower.utils.folder_lock import writes_folder
from twotower.utils.shell import shell_arg
from twotower.utils.whole_numbers import cell_text

__all__ = ["prepare_beir", "is_prepared_beir", "MARKER"]

log = logging.getLogger(__name__)

MARKER = "prepare.json"  # written last inside the folder: tells an earlier prepared folder from anything else
_SHOWN = 5  # example rows named in a warning or an error


def is_prepared_beir(path: Path) -> bool:
    """An earlier output of :func:`prepare_beir` (which a new one may replace)."""
    return (path / MARKER).is_file()


def prepared_files(path: Path) -> frozenset[str]:
    """The files an earlier :func:`prepare_beir` wrote in ``path`` (a qrels file per split its marker names): any
    other file there is the user's, which a new one would remove with the folder."""
    try:
        splits = json.loads((path / MARKER).read_text(encoding="utf-8")).get("splits")
    except (OSError, ValueError, AttributeError):
        splits = None
    qrels = {f"qrels/{name}.tsv" for name in splits} if isinstance(splits, dict) else set()
    return frozenset({"corpus.jsonl", "queries.jsonl", MARKER, *qrels})


Table = str | os.PathLike[str] | pd.DataFrame


def _label(table: Table, name: str) -> str:
    """How errors and prepare.json name ``table``: its path, or ``<DataFrame passages>`` for a DataFrame (``name``
    its argument), as ``tt.train_run(frames=...)`` names one: ``str()`` of a frame is its printed rows."""
    return f"<DataFrame {name}>" if isinstance(table, pd.DataFrame) else str(table)


def _read(path: Table, columns: list[str], roles: list[str], ids: list[str], encoding: str,
          may_be_empty: tuple[str, ...] = (), *, one_row: str, name: str):
    """The table with ``columns`` checked present, ids and texts read verbatim (``NA`` stays ``NA``); an empty id is
    refused, except in the ``may_be_empty`` columns, where it reads as ``""``. A table without data rows is refused,
    ``one_row`` saying what a row holds; ``name``: the argument it came as (see :func:`_label`)."""
    label = _label(path, name)
    df, rows = read_table_numbered(path, name=label, dtype={c: str for c in columns}, literal=columns,
                                   encoding=encoding, encoding_setting="--encoding")
    for column, role in zip(columns, roles):
        if column not in df.columns:
            raise missing_column_error(column, list(df.columns), file=label, role=role,
                                       taken=[c for c in columns if c != column])
    if df.empty:
        # a header alone was read on as data: "all 0 passages have an empty text", "0 query cannot be split into
        # train and test", or, with --test-share 0, a BEIR folder without a pair, written with exit status 0
        raise DataError(f"the table has a header and no data rows; expected one row per {one_row}", file=label)
    df = df.reset_index(drop=True)
    for column in ids:
        df[column] = ids_to_str(df[column], file=label, column=column, rows=rows,
                                allow_empty=column in may_be_empty).to_numpy(dtype=object)
    return df, rows, label


def _text(values: pd.Series, *, file: str | None = None, rows: Any = None) -> list[str]:
    """Each cell as text ("" where missing; a number as its digits, :func:`cell_text`: a Parquet column of numbers
    with a gap holds 1995.0, written "1995" as the CSV of it reads). A list or object cell (a JSON array of
    sentences, as SciFact's abstracts come) is refused naming its row, as the BEIR loader refuses it in a
    corpus.jsonl: ``str()`` wrote it as Python's ``['a', 'b']``, brackets and quotes indexed, without a word."""
    cells = values.tolist()
    if file is not None:
        nested = np.fromiter((isinstance(v, (list, tuple, dict, np.ndarray)) for v in cells), dtype=bool,
                             count=len(cells))
        check_rows(nested, lambda pos: "must be a string or number, not an object or list (join a list of sentences "
                   "into one text first)", file=file, column=str(values.name), rows=rows)
    return [cell_text(v) or "" for v in cells]


def _note_unread_title(df: pd.DataFrame, cols: PrepareConfig, label: str) -> None:
    """A warning for a passages table with a title column left unread: the text column has a default name and the
    title none (--passage-title-col), so a table of id, title and text was written with every title "" in silence,
    and BM25 and the encoder never read the titles."""
    if cols.passage_title is not None:
        return
    titles = [c for c in df.columns if str(c).strip().lower() == "title" and c not in (cols.passage_id, cols.passage_text)]
    if titles:
        log.warning("%s: its column %r is not read (no --passage-title-col), so the passages are indexed without their "
                    "titles; pass --passage-title-col %s (PrepareConfig.passage_title) to read them (BEIR's corpus.jsonl keeps a title beside each "
                    "text, and BM25 and the encoder read both)", label, titles[0], shell_arg(str(titles[0])))


def _first_row(df: pd.DataFrame, column: str, value: str) -> int:
    return int(np.flatnonzero((df[column] == value).to_numpy())[0])


def _read_passages(path: Table, cols: PrepareConfig) -> tuple[list[dict[str, str]], dict[str, Any]]:
    wanted = [cols.passage_id, cols.passage_text] + ([cols.passage_title] if cols.passage_title else [])
    roles = ["passage id", "passage text"] + (["passage title"] if cols.passage_title else [])
    df, rows, label = _read(path, wanted, roles, ids=[cols.passage_id], encoding=cols.encoding,
                            one_row="passage (an id and a text)", name="passages")
    _note_unread_title(df, cols, label)
    dup = df[cols.passage_id].duplicated(keep="first").to_numpy()
    check_rows(dup, lambda pos: f"duplicate passage id {df[cols.passage_id].iloc[pos]!r} (first at {rows.unit} "
               f"{rows.number(_first_row(df, cols.passage_id, df[cols.passage_id].iloc[pos]))}); each passage needs "
               "its own id", file=label, column=cols.passage_id, rows=rows)
    texts = _text(df[cols.passage_text], file=label, rows=rows)
    titles = _text(df[cols.passage_title], file=label, rows=rows) if cols.passage_title else [""] * len(df)
    docs = [{"_id": i, "title": t, "text": x} for i, t, x in zip(df[cols.passage_id].tolist(), titles, texts)]
    empty = [d["_id"] for d in docs if not (d["title"].strip() or d["text"].strip())]
    if len(empty) == len(docs):
        raise DataError(f"all {len(docs)} passages have an empty text{' and title' if cols.passage_title else ''}",
                        file=label, column=cols.passage_text)
    return docs, {"passages": len(docs), "empty_passages": len(empty)}


def _read_pairs(path: Table, cols: PrepareConfig, known: set[str], drop_unknown: bool):
    pid_col = cols.pair_passage or cols.passage_id
    wanted = [cols.query, pid_col] + [c for c in (cols.query_id, cols.score, cols.split) if c]
    roles = ["query", "relevant passage id"] + [r for c, r in ((cols.query_id, "query id"), (cols.score, "score"),
                                                               (cols.split, "split")) if c]
    # the passage id may be empty here: a pair with no relevant passage (SciFact's claims without evidence) is
    # dropped with --drop-unknown like an unknown id, or refused naming that flag (_drop_unmatched)
    listed = cols.pair_passage_list
    ids = ([] if listed else [pid_col]) + ([cols.query_id] if cols.query_id else [])  # listed ids: read below
    df, rows, label = _read(path, wanted, roles, ids=ids, encoding=cols.encoding, may_be_empty=(pid_col,),
                            one_row="(query, relevant passage id) pair", name="pairs")
    rows_read = len(df)
    if listed:  # one row per listed id, numbered by the row it came from
        df, rows = expand_id_lists(df, pid_col, listed, file=label, rows=rows)
    queries = _text(df[cols.query], file=label, rows=rows)
    blank = np.array([not q.strip() for q in queries], dtype=bool)
    check_rows(blank, lambda pos: "query text is empty", file=label, column=cols.query, rows=rows)
    scores = _scores(df, cols, rows, label)
    splits = _splits(df, cols, rows, label)
    keep, dropped = _drop_unmatched(df[pid_col], known, drop_unknown, rows, label, pid_col, listed)
    report = {"pair_rows_read": rows_read, "pairs_read": len(df), **dropped}
    qids = _query_ids(df, queries, keep, cols, rows, label)
    pairs = [(q, t, d, s, sp) for q, t, d, s, sp, k in zip(qids, queries, df[pid_col].tolist(), scores, splits, keep)
             if k]
    _check_consistent(pairs, np.flatnonzero(keep), cols, rows, label)
    # a (query, passage) pair given twice is one judgement (a clash of grades was refused above): counted, so that
    # pairs_read minus the drops is the judgements written
    report["duplicate_pairs_dropped"] = len(pairs) - len({(qid, did) for qid, _t, did, _s, _sp in pairs})
    return pairs, report


def _drop_unmatched(ids: pd.Series, known: set[str], drop_unknown: bool, rows: RowNumbers, label: str,
                    column: str, listed: str | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """The pairs to keep, and the counts of those dropped (--drop-unknown) for an empty or an unknown passage id.

    Without --drop-unknown either is refused, naming the rows and the flag; with it, each kind is warned about and
    counted on its own. Nothing left to keep is refused either way, naming every kind: the id column is likely the
    wrong one, or its ids are spelled otherwise than the passages' (``1.0`` for ``1``).
    """
    empty = (ids == "").to_numpy(dtype=bool)
    unknown = ~empty & ~ids.isin(known).to_numpy(dtype=bool)
    bad = empty | unknown
    if len(ids) and bad.all():  # every kind named: the first alone hid the one to fix (empty cells beside 1.0 ids)
        said = " and ".join(_bad_pairs(ids, kind, rows, empty=kind is empty) for kind in (empty, unknown)
                            if kind.any())
        hint = _unknown_hint(ids[unknown], known, listed) if unknown.any() else ""
        raise DataError(f"{said}, so no pair would be left; check the id column (--pair-passage-col) and the "
                        f"passages file{hint}", file=label, row=rows.number(int(np.flatnonzero(bad)[0])),
                        column=column, unit=rows.unit)
    for kind in (empty, unknown):
        if not kind.any():
            continue
        what = _bad_pairs(ids, kind, rows, empty=kind is empty)
        if not drop_unknown:
            hint = _unknown_hint(ids[unknown], known, listed) if kind is unknown else ""
            raise DataError(f"{what}; such a pair can never be retrieved: pass --drop-unknown to leave those pairs "
                            f"out, counted{hint}", file=label, row=rows.number(int(np.flatnonzero(kind)[0])),
                            column=column, unit=rows.unit)
        log.warning("%s: %s; dropped (--drop-unknown)", label, what)
    return ~bad, {"empty_passage_ids_dropped": int(empty.sum()), "unknown_passages_dropped": int(unknown.sum())}


def _bad_pairs(ids: pd.Series, kind: np.ndarray, rows: RowNumbers, *, empty: bool) -> str:
    """``"2 of 5 pairs have an empty passage id (row 3, row 6)"``; an unknown id is quoted after its row."""
    count = int(kind.sum())
    what = ("an empty passage id" if empty else "a passage id that is not in the passages table")
    verb = ("has" if empty else "names") if count == 1 else ("have" if empty else "name")  # agrees with the count
    where = [f"{rows.unit} {rows.number(int(p))}" + ("" if empty else f" ({ids.iloc[int(p)]!r})")
             for p in np.flatnonzero(kind)[:_SHOWN]]
    return f"{count} of {len(ids)} pairs {verb} {what} ({', '.join(where)}{' ...' if count > _SHOWN else ''})"


def _unknown_hint(unknown: pd.Series, known: set[str], listed: str | None) -> str:
    """What the unknown ids look like, where that says what to do: lists of ids, or integers written as floats."""
    return ("" if listed else _list_hint(unknown)) or _float_hint(unknown, known)


def _float_hint(unknown: pd.Series, known: set[str]) -> str:
    """Unknown ids that are a passage id with a trailing .0 ('1.0' for '1'): pandas writes an integer column that
    holds a blank as floats, so the pairs' ids went through one; the first such id is the example."""
    for value in unknown.tolist():
        whole = re.fullmatch(r"([+-]?\d+)\.0+", value)
        if whole and whole.group(1) in known:
            return (f"; the unknown ids look like integers written as floats ({value!r} where the passages table has "
                    f"{whole.group(1)!r}; pandas writes an integer id column that holds a blank so): write them as "
                    "integers")
    return ""


def _list_hint(unknown: pd.Series) -> str:
    """Unknown ids that look like lists (SciFact's cited_doc_ids, [14717500, 13734012]): the flag that reads them."""
    for value in unknown.head(_SHOWN).tolist():
        mode = looks_like_a_list(value)
        if mode is not None:
            flag = mode if mode == BRACKETS else repr(mode)  # ';' quoted for the shell
            return (f"; the cells look like lists of ids ({value!r}): pass --pair-passage-list {flag} to read each "
                    "listed id as its own pair")
    return ""


def _check_consistent(pairs, positions: np.ndarray, cols: PrepareConfig, rows: RowNumbers, label: str) -> None:
    """One grade per (query, passage) and one split per query, a clash named by its two rows.

    Checked here, where the rows are known: the qrels writer only sees ids, and a generated id such as ``q4`` is
    not in the user's file (the query text is).
    """
    grade: dict[tuple[str, str], tuple[int, int]] = {}
    split_of: dict[str, tuple[str | None, int]] = {}
    for (qid, text, did, score, split), pos in zip(pairs, positions.tolist()):
        query = f"query {qid!r}" if cols.query_id else f"query {text.strip()!r}"
        first_score, first_pos = grade.setdefault((qid, did), (score, pos))
        if first_score != score:  # which grade counts would be a guess
            raise DataError(f"{query} and passage {did!r} are paired again with another score ({score}; "
                            f"{first_score} at {rows.unit} {rows.number(first_pos)}); keep one row",
                            file=label, row=rows.number(pos), column=cols.score, unit=rows.unit)
        first_split, first_pos = split_of.setdefault(qid, (split, pos))
        if first_split != split:
            raise DataError(f"{query} is in split {split!r} here and {first_split!r} at {rows.unit} "
                            f"{rows.number(first_pos)}: a query is scored in one split only",
                            file=label, row=rows.number(pos), column=cols.split, unit=rows.unit)


def _query_ids(df: pd.DataFrame, queries: list[str], keep: np.ndarray, cols: PrepareConfig, rows: RowNumbers,
               label: str) -> list[str | None]:
    """Each row's query id: the --query-id-col value, else one generated id per distinct query text.

    Generated ids are q1, q2, ... in order of first appearance among the kept rows only: numbered before the
    drops, a query whose every pair was dropped (--drop-unknown) left a gap (q1, q3) in queries.jsonl. A dropped
    row whose text has no kept row gets None (the row is left out).
    """
    if cols.query_id is None:  # the same question asked twice is one query with two relevant passages
        ids: dict[str, str] = {}
        for q in (q.strip() for q, k in zip(queries, keep.tolist()) if k):
            if q not in ids:
                ids[q] = f"q{len(ids) + 1}"
        return [ids.get(q.strip()) for q in queries]
    qids = df[cols.query_id].tolist()
    text_of: dict[str, tuple[str, int]] = {}
    for pos, (qid, text) in enumerate(zip(qids, queries)):
        first = text_of.setdefault(qid, (text.strip(), pos))
        if first[0] != text.strip():
            raise DataError(f"query id {qid!r} has another text than at {rows.unit} {rows.number(first[1])}: "
                            f"{text!r} vs {first[0]!r}; one id, one text", file=label, row=rows.number(pos),
                            column=cols.query, unit=rows.unit)
    return qids


def _scores(df: pd.DataFrame, cols: PrepareConfig, rows: RowNumbers, label: str) -> list[int]:
    if cols.score is None:
        return [1] * len(df)
    raw = df[cols.score]
    num = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(num) | (np.nan_to_num(num) != np.round(np.nan_to_num(num)))
    check_rows(bad, lambda pos: f"score {raw.iloc[pos]!r} is not a whole number (relevance grades are integers; "
               "0 = judged not relevant)", file=label, column=cols.score, rows=rows)
    return num.astype(np.int64).tolist()


def _splits(df: pd.DataFrame, cols: PrepareConfig, rows: RowNumbers, label: str) -> list[str | None]:
    if cols.split is None:
        return [None] * len(df)
    values = [s.strip() for s in _text(df[cols.split])]
    bad = np.array([not s or not all(c.isalnum() or c in "-_" for c in s) for s in values], dtype=bool)
    check_rows(bad, lambda pos: f"split {values[pos]!r} is not a split name (letters, digits, '-' or '_'; it "
               "names the qrels file)", file=label, column=cols.split, rows=rows)
    _warn_split_case(sorted(set(values)), label, cols.split)
    return values


#: the split names the search commands default to (evaluate: test, train: train) or commonly name
_USUAL_SPLITS = ("train", "dev", "test")


def _warn_split_case(values: list[str], label: str, column: str) -> None:
    """Split values that are a usual split name in another case (``Test``) name their own qrels file
    (qrels/Test.tsv), which ``--split test`` does not find: said now, not renamed (the file's names are the user's)."""
    odd = [v for v in values if v.lower() in _USUAL_SPLITS and v not in _USUAL_SPLITS]
    if odd:
        log.warning("%s, column %r: split %s %s %s from %s only by case; split names are case-sensitive, so %s "
                    "written as %s and read only as %s (search evaluate reads --split test and search train --split "
                    "train by default); rename them in the file if you meant %s", label, column,
                    "value" if len(odd) == 1 else "values", ", ".join(repr(v) for v in odd),
                    "differs" if len(odd) == 1 else "differ", "/".join(_USUAL_SPLITS),
                    "it is" if len(odd) == 1 else "they are", ", ".join(f"qrels/{v}.tsv" for v in odd),
                    ", ".join(f"--split {v}" for v in odd), "/".join(_USUAL_SPLITS))


def _assign_splits(pairs, test_share: float, seed: int) -> dict[str, Qrels]:
    """qrels per split: the pairs' own split column, else a grouped train/test cut of the queries.

    One grade per (query, passage) and one split per query were checked with their rows (``_check_consistent``).
    """
    qrels: Qrels = {}
    for qid, _text_, did, score, _split in pairs:
        qrels.setdefault(qid, {})[did] = score
    if pairs and pairs[0][4] is not None:
        out: dict[str, Qrels] = {}
        for qid, _text_, did, score, split in pairs:
            out.setdefault(split, {}).setdefault(qid, {})[did] = score
        return out
    if test_share == 0:
        return {"test": qrels}
    if len(qrels) < 2:
        raise ConfigError(f"--test-share {test_share}: {len(qrels)} query cannot be split into train and test; "
                          "pass --test-share 0 to write it all as the test split")
    try:
        train, test = validation_split_by_group(qrels, test_share, seed)
    except ConfigError as e:  # it names its own parameter (frac: 0.99): say which flag and what to do instead
        raise ConfigError(f"--test-share {test_share}: {str(e).replace(f'frac: {test_share} ', '')} ({len(qrels)} "
                          "queries); pass a smaller --test-share, or --test-share 0 to write them all as the test "
                          "split") from None
    return {"train": train, "test": test}


def _write(folder: Path, docs, queries: dict[str, str], splits: dict[str, Qrels], report: dict[str, Any]) -> None:
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in queries.items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    (folder / "qrels").mkdir()
    for name, qrels in splits.items():
        with open(folder / "qrels" / f"{name}.tsv", "w", encoding="utf-8") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for qid, judged in qrels.items():
                for did, score in judged.items():
                    fh.write(f"{qid}\t{did}\t{score}\n")
    (folder / MARKER).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _check_tsv_safe(docs, pairs, passages: str, pairs_file: str, cfg: PrepareConfig) -> None:
    """qrels are tab-separated: an id holding a tab or a line break would split its row. Refused naming the file
    and column it came from, as every other refusal of ``search prepare`` names them (a query id made from the
    query's text never holds one: only a --query-id-col's can)."""
    for what, ids, where in (("passage", (d["_id"] for d in docs), (passages, cfg.passage_id)),
                             ("query", (p[0] for p in pairs), (pairs_file, cfg.query_id))):
        for i in ids:
            if any(c in i for c in "\t\r\n"):
                raise DataError(f"{what} id {i!r} holds a tab or a line break, which the qrels TSV cannot carry; "
                                "rename it", file=str(where[0]), column=where[1])


@writes_folder("out", "prepare_beir",
               check=out_check("prepared BEIR folder", is_prepared_beir, inputs=("passages", "pairs"),
                               own_files=prepared_files))
def prepare_beir(
    passages: Table,
    pairs: Table,
    out: str | os.PathLike[str],
    cfg: PrepareConfig = PrepareConfig(),
    *,
    force: bool = False,
) -> dict[str, Any]:
    """Read ``passages`` and ``pairs``, write the BEIR folder ``out`` (atomically), return its report. An earlier
    prepared folder ``out`` holding files it did not write is refused, before any work, unless ``force``.
    ``passages`` and ``pairs`` may be DataFrames, read as their files would be and named ``<DataFrame passages>`` /
    ``<DataFrame pairs>`` in errors and in the report."""
    docs, doc_report = _read_passages(passages, cfg)
    read, pair_report = _read_pairs(pairs, cfg, {d["_id"] for d in docs}, cfg.drop_unknown)
    _check_tsv_safe(docs, read, _label(passages, "passages"), _label(pairs, "pairs"), cfg)
    queries: dict[str, str] = {}
    for qid, text, *_ in read:  # stripped: queries are told apart (and ids given) by their stripped text
        queries.setdefault(qid, text.strip())
    splits = _assign_splits(read, cfg.test_share, cfg.seed)
    report = {
        "passages_file": _label(passages, "passages"), "pairs_file": _label(pairs, "pairs"), "settings": asdict(cfg), **doc_report,
        **pair_report, "queries": len(queries),
        "splits": {name: {"queries": len(q), "judgements": sum(len(j) for j in q.values())}
                   for name, q in splits.items()},
    }
    with atomic_dir(out) as tmp:
        _write(tmp, docs, queries, splits, report)
    return report
