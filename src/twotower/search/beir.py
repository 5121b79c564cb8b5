"""Load BEIR-layout retrieval data and plain (query, positive, negatives) pairs.

BEIR layout::

    corpus.jsonl        {"_id": str, "title": str, "text": str} per line
    queries.jsonl       {"_id": str, "text": str} per line
    qrels/{split}.tsv   header "query-id<TAB>corpus-id<TAB>score", then one row per judgement

Ids are strings everywhere; corpus rows are int64 ``0..n-1`` in file order.
Every problem raises :class:`~twotower.errors.DataError` naming file, row
(1-based, header = row 1 for TSV; line number for JSONL) and field.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from twotower.errors import ConfigError, DataError
from twotower.utils.arguments import check_seed
from twotower.utils.shell import shell_arg
from twotower.utils.wording import json_error, plural

log = logging.getLogger(__name__)

__all__ = [
    "Corpus",
    "BeirData",
    "TrainPair",
    "resolve_beir_dir",
    "load_corpus",
    "load_queries",
    "load_qrels",
    "load_beir",
    "load_pairs",
    "pairs_from_qrels",
    "relevant_rows",
    "validation_split_by_group",
]

Qrels = dict[str, dict[str, int]]  # query id -> {doc id: relevance}


@dataclass(frozen=True)
class Corpus:
    """Documents in file order; ``row_of[doc_id]`` is the internal row."""

    ids: list[str]
    titles: list[str]
    texts: list[str]
    row_of: dict[str, int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def doc_texts(self) -> list[str]:
        """``"title text"`` per document (the BEIR / MTEB convention for encoders)."""
        return [f"{t.strip()} {x.strip()}".strip() for t, x in zip(self.titles, self.texts)]


@dataclass(frozen=True)
class BeirData:
    corpus: Corpus
    queries: dict[str, str]  # query id -> text (only queries judged in ``qrels``)
    qrels: Qrels


@dataclass(frozen=True)
class TrainPair:
    query: str
    positive_id: str
    negative_ids: tuple[str, ...] = ()


def resolve_beir_dir(path: str | os.PathLike[str], *, arg: str = "beir_dir") -> Path:
    """Accept the BEIR directory itself or a parent holding ``beir/``.

    ``arg``: what the messages call ``path``: the Python argument by default, the flag for a command (``--beir``);
    a Python caller was told to "point --beir/--data at a BEIR directory"."""
    if not str(path).strip():  # `--beir "$BEIR_DIR"` (as the README writes it) with the variable unset
        raise DataError(f"{arg} is empty; give the BEIR directory (corpus.jsonl, queries.jsonl, qrels/), e.g. set "
                        "BEIR_DIR=/path/to/scifact/beir as the README does and pass it")
    p = Path(path)
    for cand in (p, p / "beir"):
        if (cand / "corpus.jsonl").is_file():
            return cand
    raise DataError(
        f"no corpus.jsonl in {p} or {p / 'beir'}; point {arg} at a BEIR directory "
        f"(corpus.jsonl, queries.jsonl, qrels/<split>.tsv){_prepare_hint(p, arg)}",
        file=str(p),
    )


def _prepare_hint(p: Path, arg: str) -> str:
    """For a file given as the BEIR folder (a newcomer's own passages table, say): how such a table becomes one,
    in the caller's terms (the command for a flag, the function for a Python argument)."""
    if not p.is_file():
        return ""
    how = (f"`twotower search prepare --passages {shell_arg(p)} --pairs PAIRS --out DIR`" if arg.startswith("--")
           else f"twotower.search.prepare_beir({str(p)!r}, PAIRS, OUT)")
    return f"; {p} is a file: a passages table and a (query, relevant passage) pairs table become one with {how}"


def _lines(path: Path):
    """``(line number, text)`` of a UTF-8 file; a bad byte is a DataError naming the file and line."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"not UTF-8 text ({e.reason} at byte {e.start}); re-save the file as UTF-8",
                                file=str(path), row=lineno) from e
            # a byte-order mark (Windows editors write one) is not part of the first field
            yield lineno, (text.removeprefix("\ufeff") if lineno == 1 else text)


def _tsv_rows(path: Path):
    """``(row number, fields)`` of a UTF-8 TSV file (row 1 = header)."""
    for lineno, line in _lines(path):
        line = line.rstrip("\r\n")
        yield lineno, (line.split("\t") if line else [])


def _read_jsonl(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise DataError("file not found", file=str(path))
    rows = []
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"not valid JSON ({json_error(e)})", file=str(path), row=lineno) from e
        if not isinstance(obj, dict):
            raise DataError("each line must be a JSON object", file=str(path), row=lineno)
        for key in required:
            if key not in obj:
                raise DataError(f"missing field (need {', '.join(required)})", file=str(path), row=lineno, column=key)
            if isinstance(obj[key], (dict, list)):
                raise DataError("must be a string or number, not an object or list", file=str(path),
                                row=lineno, column=key)
        _check_types(obj, path, lineno)
        rows.append((lineno, obj))
    return rows


def _check_types(obj: dict, path: Path, lineno: int) -> None:
    """``_id``: a non-empty string or an integer; ``text``/``title``: a string or null (an empty text).

    ``str()`` of anything else would turn ``null`` into the id ``"None"`` and ``true`` into the text ``"True"``.
    """
    if "_id" in obj:
        qid = obj["_id"]
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
            raise DataError(f"id must be a non-empty string, got {json.dumps(qid)}", file=str(path), row=lineno,
                            column="_id")
    for key in ("text", "title"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise DataError(f"must be a string, got {json.dumps(obj[key])}", file=str(path), row=lineno, column=key)


def load_corpus(path: str | os.PathLike[str]) -> Corpus:
    """A BEIR ``corpus.jsonl`` (``{"_id", "title", "text"}`` per line) as a :class:`Corpus`, rows in file order.

    Ids are trimmed; a duplicate id, a bad line or an empty file is a DataError naming file and line; documents with
    an empty title and text are kept (and counted in a warning)."""
    path = Path(path)
    ids, titles, texts, row_of = [], [], [], {}
    empty: list[str] = []
    for lineno, obj in _read_jsonl(path, ("_id", "text")):
        # trimmed as the qrels' ids are: " p4" in corpus.jsonl was "not in corpus.jsonl" for qrels naming p4
        doc_id = str(obj["_id"]).strip()
        title = str(obj.get("title") or "")
        text = str(obj["text"] or "")
        if not (title.strip() or text.strip()):
            # real collections hold a few (BEIR's and Pyserini's loaders index them): keep it, count it, say so once
            empty.append(doc_id)
        if doc_id in row_of:
            raise DataError(f"duplicate document id {doc_id!r}", file=str(path), row=lineno, column="_id")
        row_of[doc_id] = len(ids)
        ids.append(doc_id)
        titles.append(title)
        texts.append(text)
    if not ids:
        raise DataError("corpus is empty", file=str(path))
    if len(empty) == len(ids):
        raise DataError(("the only document has" if len(ids) == 1 else f"all {len(ids):,} documents have")
                        + " an empty title and text", file=str(path), column="text")
    if empty:
        shown = ", ".join(repr(d) for d in empty[:5]) + (" ..." if len(empty) > 5 else "")
        # BM25 never matches them, but the dense encoder embeds the empty text like any other: they can rank
        # ("1 of 6 documents have": the verb agrees with the count)
        one = len(empty) == 1
        log.warning("%s: %s of %s %s an empty title and text (%s); %s: BM25 never matches %s, dense and hybrid "
                    "search may still return %s", path, f"{len(empty):,}", plural(len(ids), "document"),
                    "has" if one else "have", shown,
                    "it is indexed as an empty document" if one else "they are indexed as empty documents",
                    *(("it", "it") if one else ("them", "them")))
    return Corpus(ids, titles, texts, row_of)


def load_queries(path: str | os.PathLike[str], *, keep_empty: bool = False) -> dict[str, str]:
    """A BEIR ``queries.jsonl`` (``{"_id", "text"}`` per line) as ``{query id: text}`` in file order; an empty text
    or a duplicate id is a DataError naming file and line. ``keep_empty``: an empty text is kept as ``""`` (for
    :func:`load_beir`, which refuses it only when the split judges that query)."""
    path = Path(path)
    out: dict[str, str] = {}
    for lineno, obj in _read_jsonl(path, ("_id", "text")):
        qid, text = str(obj["_id"]).strip(), str(obj["text"] or "")  # trimmed as the qrels' ids are
        if not text.strip() and not keep_empty:
            raise DataError("query text is empty", file=str(path), row=lineno, column="text")
        if qid in out:
            raise DataError(f"duplicate query id {qid!r}", file=str(path), row=lineno, column="_id")
        out[qid] = text
    if not out:
        raise DataError(f"{path.name} is empty (no queries)", file=str(path))
    return out


def load_qrels(path: str | os.PathLike[str], *, corpus: Corpus | None = None, queries: dict[str, str] | None = None,
               keep_unknown: bool = False, unknown_fix: str = "") -> Qrels:
    """Read ``query-id corpus-id score`` rows; ids are checked when corpus/queries are given.

    A corpus id not in ``corpus`` is refused (``unknown_fix`` is added to the message), or with ``keep_unknown`` kept
    in the qrels, with one warning naming how many pairs and an example: BEIR's evaluation counts such a pair as
    relevant and never retrieved (the caller must map the id to a row no search returns: :func:`with_unknown_rows`).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("qrels file not found (expected qrels/<split>.tsv)", file=str(path))
    qrels: Qrels = {}
    row_of: dict[tuple[str, str], int] = {}  # (query, doc) -> the row that first judged it
    duplicates: list[tuple[int, int]] = []
    unknown: list[tuple[str, int]] = []  # (corpus id, row) kept with keep_unknown
    rows = _tsv_rows(path)
    _, header = next(rows, (1, None))
    if header is None:  # was "header must be ..., got None", which reads like a bug rather than an empty file
        raise DataError("file is empty; expected the header 'query-id<TAB>corpus-id<TAB>score' and one row per "
                        "judgement", file=str(path))
    if [h.strip() for h in header[:3]] != ["query-id", "corpus-id", "score"]:
        raise DataError(f"header must be 'query-id<TAB>corpus-id<TAB>score', got {header!r}{_header_hint(header)}",
                        file=str(path), row=1)
    for rowno, rec in rows:
        if not rec or not "".join(rec).strip():
            continue
        if len(rec) != 3:
            raise DataError(f"expected 3 tab-separated fields, got {len(rec)}", file=str(path), row=rowno)
        qid, did, score = (x.strip() for x in rec)
        try:
            value = int(float(score))
        except (ValueError, OverflowError) as e:  # "inf" overflows int(), "nan" is a ValueError
            raise DataError(f"score {score!r} is not a finite number", file=str(path), row=rowno,
                            column="score") from e
        if value != float(score):
            # int() would cut 0.5 to 0 (not relevant) and 1.5 to 1: the query would be skipped or its grade changed
            # silently. Relevance grades are integers (BEIR, pytrec_eval and `search prepare` read them so); "1.0"
            # is still read as 1
            raise DataError(f"score {score!r} is not a whole number (relevance grades are integers; 0 = judged "
                            "not relevant)", file=str(path), row=rowno, column="score")
        if queries is not None and qid not in queries:
            raise DataError(f"query id {qid!r} is not in queries.jsonl", file=str(path), row=rowno, column="query-id")
        if corpus is not None and did not in corpus.row_of:
            if not keep_unknown:
                raise DataError(f"corpus id {did!r} is not in corpus.jsonl{unknown_fix}", file=str(path), row=rowno,
                                column="corpus-id")
            unknown.append((did, rowno))
        judged = qrels.setdefault(qid, {})
        if did in judged:
            first = row_of[(qid, did)]
            if judged[did] != value:  # which one counts is a guess: say so rather than keep the last silently
                raise DataError(f"query {qid!r} and document {did!r} are judged twice with different scores "
                                f"(row {first}: {judged[did]}, row {rowno}: {value}); keep one row",
                                file=str(path), row=rowno)
            duplicates.append((first, rowno))
        row_of.setdefault((qid, did), rowno)
        judged[did] = value
    if duplicates:
        shown = ", ".join(f"row {b} repeats row {a}" for a, b in duplicates[:5]) + (" ..." if len(duplicates) > 5 else "")
        log.warning("%s: %d duplicate judgement(s) with the same score, counted once (%s)", path, len(duplicates),
                    shown)
    if not qrels:
        raise DataError("qrels file has no rows", file=str(path))
    if unknown:
        # "1 (query, document) pair name a corpus id": the verb agrees with the count too
        log.warning("%s: %s %s a corpus id that is not in corpus.jsonl (e.g. %r, row %d); counted as judged and never "
                    "retrieved, as BEIR's evaluation counts them", path, plural(len(unknown), "(query, document) pair"),
                    "names" if len(unknown) == 1 else "name", unknown[0][0], unknown[0][1])
    return qrels


def with_unknown_rows(corpus: Corpus, qrels: Qrels) -> Corpus:
    """``corpus`` with each qrels document id it lacks mapped to a row past its last (``len(corpus)`` on), a row no
    search returns, so metrics count such a relevant document as never retrieved (BEIR's evaluation does); the
    documents themselves are unchanged. ``corpus`` itself when every id is in it."""
    missing = sorted({d for judged in qrels.values() for d in judged if d not in corpus.row_of}, key=_natural)
    if not missing:
        return corpus
    return Corpus(corpus.ids, corpus.titles, corpus.texts,
                  {**corpus.row_of, **{d: len(corpus) + i for i, d in enumerate(missing)}})


def _header_hint(header: list[str] | None) -> str:
    """What a refused qrels first row most likely is, and the fix: files written without the header (or with spaces
    between the fields) were refused with the expected header only, leaving the user to work out why."""
    if header is not None and len(header) == 3:
        try:
            float(header[2])
        except ValueError:
            return ""
        # never read as data: BEIR's own loader skips row 1 whatever it holds, so this judgement would be lost there
        return "; this is a judgement, not the header: add the header line 'query-id<TAB>corpus-id<TAB>score' first"
    if header is not None and len(header) == 1 and len(header[0].split()) >= 3:
        return "; the fields must be separated by tabs, not spaces"
    return ""


def available_splits(beir_dir: Path) -> list[str]:
    """The splits a resolved BEIR folder judges (its ``qrels/*.tsv``), sorted."""
    return sorted(p.stem for p in (beir_dir / "qrels").glob("*.tsv")) if (beir_dir / "qrels").is_dir() else []


def load_beir(beir_dir: str | os.PathLike[str], split: str = "test", *, arg: str = "beir_dir",
              keep_unknown: bool = False, unknown_fix: str = "") -> BeirData:
    """Corpus, the queries judged in ``qrels/{split}.tsv``, and those qrels. ``arg``: what a message about the folder
    calls ``beir_dir`` (:func:`resolve_beir_dir`). ``keep_unknown`` / ``unknown_fix``: a qrels corpus id not in the
    corpus kept (warned) or refused with that fix (:func:`load_qrels`)."""
    d = resolve_beir_dir(beir_dir, arg=arg)
    qrels_path = d / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():  # first: a mistyped --split was reported only once every query read cleanly
        have = available_splits(d)
        raise DataError(f"no qrels for split {split!r}; available splits: {have or 'none'}", file=str(qrels_path))
    corpus = load_corpus(d / "corpus.jsonl")
    # an empty query text is refused only where this split judges it: one in another split's queries (or none's)
    # refused the whole evaluation, where BEIR evaluates the split's queries
    queries = load_queries(d / "queries.jsonl", keep_empty=True)
    qrels = load_qrels(qrels_path, corpus=corpus, queries=queries, keep_unknown=keep_unknown, unknown_fix=unknown_fix)
    empty = [q for q in qrels if not queries[q].strip()]
    if empty:
        row = next(n for n, obj in _read_jsonl(d / "queries.jsonl", ("_id", "text")) if str(obj["_id"]).strip() == empty[0])
        raise DataError(f"query text is empty (query {empty[0]!r}, judged in qrels/{split}.tsv"
                        f"{f'; {len(empty) - 1} more such' if len(empty) > 1 else ''})",
                        file=str(d / "queries.jsonl"), row=row, column="text")
    return BeirData(corpus, {q: queries[q] for q in qrels}, qrels)


def load_pairs(path: str | os.PathLike[str], corpus: Corpus) -> list[TrainPair]:
    """Training pairs from TSV (``query, positive_id[, neg1,neg2,...]``, header row) or JSONL.

    JSONL lines are ``{"query": str, "positive_id": str, "negative_ids": [str, ...]}``.
    Every id must exist in ``corpus``.
    """
    path = Path(path)
    pairs: list[TrainPair] = []

    def check(pair: TrainPair, row: int) -> TrainPair:
        if not pair.query.strip():
            raise DataError("query is empty", file=str(path), row=row, column="query")
        if pair.positive_id not in corpus.row_of:
            raise DataError(f"positive id {pair.positive_id!r} is not in the corpus", file=str(path), row=row, column="positive_id")
        for n in pair.negative_ids:
            if n not in corpus.row_of:
                raise DataError(f"negative id {n!r} is not in the corpus", file=str(path), row=row, column="negative_ids")
        return pair

    if path.suffix == ".jsonl":
        for lineno, obj in _read_jsonl(path, ("query", "positive_id")):
            negs = obj.get("negative_ids") or []
            if not isinstance(negs, list):
                raise DataError("negative_ids must be a list", file=str(path), row=lineno, column="negative_ids")
            pairs.append(check(TrainPair(str(obj["query"]), str(obj["positive_id"]), tuple(map(str, negs))), lineno))
    else:
        if not path.is_file():
            raise DataError("file not found", file=str(path))
        rows = _tsv_rows(path)
        _, header = next(rows, (1, None))
        if header is None or len(header) < 2:
            raise DataError("header must be 'query<TAB>positive_id[<TAB>negative_ids]'", file=str(path), row=1)
        if header[1].strip() in corpus.row_of:
            # a file written without the header: its first pair would be skipped as the header, silently
            raise DataError(f"row 1 names the corpus document {header[1].strip()!r}: it is a pair, not the header; "
                            "add the header line 'query<TAB>positive_id[<TAB>negative_ids]' first",
                            file=str(path), row=1)
        for rowno, rec in rows:
            if not rec:
                continue
            if len(rec) < 2:
                raise DataError(f"expected at least 2 fields, got {len(rec)}", file=str(path), row=rowno)
            negs = tuple(n.strip() for n in rec[2].split(",") if n.strip()) if len(rec) > 2 else ()
            pairs.append(check(TrainPair(rec[0], rec[1].strip(), negs), rowno))
    if not pairs:
        raise DataError("no training pairs", file=str(path))
    return pairs


def pairs_from_qrels(queries: dict[str, str], qrels: Qrels) -> list[TrainPair]:
    """One pair per (query, relevant doc) with relevance > 0, in the qrels file's order (:func:`load_qrels` keeps it):
    each query where it is first judged, its documents in the order of their rows.

    The order ``search train`` / ``rerank train`` train in, so a fine-tuning from Python draws the same batches as
    the command; sorted by id, they drew others (SciFact's train split: pair 51 on already differed)."""
    return [TrainPair(queries[qid], did) for qid, judged in qrels.items() for did, rel in judged.items() if rel > 0]


def relevant_rows(qids: list[str], qrels: Qrels, corpus: Corpus) -> list[np.ndarray]:
    """Per query, the corpus rows judged relevant (relevance > 0), int64."""
    return [
        np.array(sorted(corpus.row_of[d] for d, r in qrels.get(q, {}).items() if r > 0), dtype=np.int64) for q in qids
    ]


def _natural(s: str) -> tuple:
    """Sort key: numeric ids by value ("9" before "10"), then the others as text."""
    if s.isdigit():
        try:
            return (0, int(s), "")
        except ValueError:  # "①" and "²" are digits to str.isdigit() but not to int(): sorted as text
            pass
    return (1, 0, s)


def validation_split_by_group(train_qrels: Qrels, frac: float, seed: int) -> tuple[Qrels, Qrels]:
    """Hold out about ``frac`` of the queries, keeping query groups intact.

    Queries that share any relevant document are joined (union-find) into one
    group, so no relevant document is judged in both parts — a claim and its
    negation citing the same abstract can't leak across the split.
    Returns ``(train, valid)``.
    """
    if not 0.0 < frac < 1.0:
        raise ConfigError(f"frac: must be in (0, 1), got {frac}")
    seed = check_seed(seed)
    qids = sorted(train_qrels, key=_natural)
    parent = {q: q for q in qids}

    def find(q: str) -> str:
        while parent[q] != q:
            parent[q] = parent[parent[q]]
            q = parent[q]
        return q

    owner: dict[str, str] = {}
    for q in qids:
        for d, rel in train_qrels[q].items():
            if rel <= 0:
                continue
            if d in owner:
                ra, rb = find(owner[d]), find(q)
                if ra != rb:
                    parent[rb] = ra
            else:
                owner[d] = q
    groups: dict[str, list[str]] = {}
    for q in qids:
        groups.setdefault(find(q), []).append(q)
    order = sorted(groups, key=_natural)
    rng = np.random.default_rng(seed)
    rng.shuffle(order)
    target = max(1, round(frac * len(qids)))
    valid: set[str] = set()
    for g in order:
        if len(valid) >= target:
            break
        valid.update(groups[g])
    if len(valid) == len(qids):
        raise ConfigError(f"frac: {frac} leaves no training queries; the groups are too large for this split")
    return ({q: train_qrels[q] for q in qids if q not in valid}, {q: train_qrels[q] for q in qids if q in valid})
