"""Any FAISS ``index_factory`` string behind the :class:`VectorIndex` interface.

Legend: ``Q`` queries, ``N`` catalogue vectors, ``D`` dim, ``F`` fetched per query.

Shortcut names (resolved at :meth:`FaissIndex.build`, when ``N`` and ``D`` are known):

==========  ==========================================================
``flat``    ``Flat`` (exact)
``ivf``     ``IVF{nlist},Flat`` with ``nlist ~ 4*sqrt(N)``, clipped to [1, N/39]
``hnsw``    ``HNSW32``
``ivfpq``   ``IVF{nlist},PQ{D//4}x8``; below 9,984 vectors (39 per centroid of 8 bits) fewer bits,
            ``2**nbits * 39 <= N``, and more sub-quantisers for as long a code; add a refine stage with a suffix:
            ``ivfpq,RFlat`` (exact re-scoring) or ``ivfpq,Refine(SQ8)``
==========  ==========================================================

Any other string goes to ``faiss.index_factory`` unchanged, except that
``{nlist}`` is replaced by the default list count (``"IVF{nlist},PQ32x8"``).
Every index uses ``METRIC_INNER_PRODUCT``.

Ids: an IVF index stores the caller's ids itself (and removes them for real);
any other index is wrapped in ``IndexIDMap2``. Indexes FAISS cannot delete
from (HNSW, refine) hide removed ids instead, filtering them like exclusions.
"""
from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from twotower.errors import ConfigError, DataError
from twotower.index.base import VectorIndex, check_ids, check_vectors, describe
from twotower.index.exact import count_reaching, max_norm, sgemm_eps, use_blas_for
from twotower.results import PAD_ID, Results
from twotower.utils.arguments import check_seed
from twotower.utils.progress import RateLog, heartbeat

__all__ = ["FaissIndex", "SHORTCUTS", "resolve_factory", "default_nlist", "factory_knobs", "needs_training",
           "seed_training", "pq_sizing_note", "POINTS_PER_CENTROID", "check_factory_sizes", "MAX_NLIST",
           "HNSW_M_RANGE", "PQ_NBITS_RANGE", "NSG_R_RANGE", "MAX_TRANSFORM_DIM", "skip_polysemous_training",
           "refuse_idmap"]

log = logging.getLogger(__name__)

SHORTCUTS = ("flat", "ivf", "hnsw", "ivfpq")
#: FAISS's k-means wants this many training points per centroid (fewer: "please provide at least N training points")
POINTS_PER_CENTROID = 39
#: Public knob name -> FAISS ParameterSpace name.
_KNOBS = {"nprobe": "nprobe", "efSearch": "efSearch", "k_factor": "k_factor_rf"}
#: How much deeper a search on GPU fetches again when hits still tie at its cut of an exact index. Every fetch is a
#: scan of the whole catalogue whatever its depth, so doubling through a group of ~1,000 equal vectors (1M items:
#: the items without training signal) took 7 scans, 0.18 s for one /similar-items; 8x takes 3. On CPU one
#: counting scan sizes the single deeper fetch instead (:meth:`FaissIndex._settle_depth`).
TIE_FETCH_GROWTH = 8
#: SGEMM scores per block of the scan that counts the items a tie at the cut may reach (16 MiB of float32).
_COUNT_BLOCK_ELEMS = 1 << 22
_ADD_CHUNK = 1 << 17  # vectors added per faiss call (bounds the temporary assignment buffers)


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as e:  # pragma: no cover - faiss-cpu is a dependency
        raise ConfigError("FaissIndex needs FAISS: pip install faiss-cpu (or faiss-gpu)") from e
    return faiss


def default_nlist(n: int) -> int:
    """IVF list count for ``n`` vectors: about ``4*sqrt(n)``, at most ``n/39`` (FAISS's training minimum)."""
    return int(max(1, min(round(4 * math.sqrt(max(n, 1))), n // POINTS_PER_CENTROID, 1 << 16)))


#: catalogue size from which the ``ivf`` shortcut uses an HNSW coarse quantizer
IVF_HNSW_MIN = 200_000


def ivf_hnsw_nlist(n: int) -> int:
    """About ``16*sqrt(n)`` lists, rounded to a power of two (1M -> 16384, 10M -> 65536)."""
    target = 16 * math.sqrt(max(n, 1))
    nlist = 1 << max(0, round(math.log2(target)))
    return int(max(1, min(nlist, n // POINTS_PER_CENTROID, 1 << 18)))


#: bits per PQ sub-quantiser of the ``ivfpq`` shortcut once the catalogue trains all 256 centroids (9,984 vectors)
PQ_FULL_NBITS = 8


def _divisor_at_least(dim: int, m: int) -> int:
    """The smallest divisor of ``dim`` that is >= ``m`` (``dim`` itself at most): PQ splits D evenly."""
    return next((d for d in range(max(1, m), dim + 1) if dim % d == 0), dim)


def _pq_shape(n: int, dim: int) -> tuple[int, int]:
    """Sub-quantisers and bits of the ``ivfpq`` shortcut's PQ for ``n`` vectors of ``dim``: every codebook fully
    trained (``2**nbits * 39 <= n``), the code at least as long as the 8-bit one's (``D//4`` bytes; at most one
    sub-quantiser per dimension).

    Fewer bits alone recall less (ML-100K, 1,682 x 128, recall@10 at its best nprobe: the under-trained PQ32x8
    0.853, a fully trained PQ32x5 0.722), more sub-quantisers win it back (PQ64x5 0.856, PQ128x5 0.942): each
    quantises fewer dimensions.
    """
    m = max(1, dim // 4)
    while dim % m:  # PQ needs D divisible by the number of sub-quantisers
        m -= 1
    nbits = PQ_FULL_NBITS
    while nbits > 1 and (POINTS_PER_CENTROID << nbits) > n:
        nbits -= 1
    nbits = min(nbits, max(1, int(math.log2(max(n, 2)))))  # k-means needs >= 2**nbits points at all
    if nbits < PQ_FULL_NBITS:  # keep the code's bits: m * nbits >= m8 * 8
        m = _divisor_at_least(dim, -(-m * PQ_FULL_NBITS // nbits))
    return m, nbits


def pq_sizing_note(n: int, dim: int) -> str | None:
    """Why the ``ivfpq`` shortcut's PQ has fewer than 8 bits for ``n`` vectors (None when it has 8)."""
    m, nbits = _pq_shape(n, dim)
    if nbits >= PQ_FULL_NBITS:
        return None
    need, full = POINTS_PER_CENTROID << nbits, POINTS_PER_CENTROID << PQ_FULL_NBITS
    m8 = _pq_shape(full, dim)[0]
    trained = "so FAISS trains every codebook fully" if need <= n else "the fewest possible, still under-trained"
    return (f"ivfpq: PQ{m}x{nbits} for {n:,} vectors: {nbits} bit{'s' if nbits > 1 else ''} per sub-quantiser "
            f"({1 << nbits} centroids, {POINTS_PER_CENTROID} training vectors each = {need:,}), {trained} "
            f"(8 bits want {full:,}); {m} sub-quantisers for a {m * nbits}-bit code (PQ{m8}x8's: {m8 * 8}), "
            "since fewer bits alone recall less")


def resolve_factory(spec: str, n: int, dim: int) -> str:
    """Turn a shortcut name or factory template into a FAISS ``index_factory`` string."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"index factory must be a non-empty string such as {', '.join(SHORTCUTS)}; got {spec!r}")
    head, _, rest = spec.strip().partition(",")
    name = head.strip().lower()
    nlist = default_nlist(n)
    if name in ("flat", "ivf", "hnsw") and rest:
        raise ConfigError(f"the shortcut {name!r} takes no suffix (got {spec!r}); write the full FAISS factory instead")
    if name == "flat":
        return "Flat"
    if name == "ivf":
        if n >= IVF_HNSW_MIN:
            # FAISS's guideline for ~1M+ vectors: many more lists, found through an HNSW
            # coarse quantizer (a flat one would cost a scan of every centroid per query)
            return f"IVF{ivf_hnsw_nlist(n)}_HNSW32,Flat"
        return f"IVF{nlist},Flat"
    if name == "hnsw":
        return "HNSW32"
    if name == "ivfpq":
        m, nbits = _pq_shape(n, dim)
        return f"IVF{nlist},PQ{m}x{nbits}" + (f",{rest.strip()}" if rest.strip() else "")
    factory = spec.strip().replace("{nlist}", str(nlist))
    check_factory_sizes(spec, factory)
    return factory


#: The most IVF lists a factory string may name: 2**20, the count FAISS's guidelines give for a billion vectors
#: (which k-means wants 41M training vectors for, 39 a list). FAISS allocates every list as the index is created,
#: before any check of the catalogue: `IVF100000000,Flat` grew to 15 GB and hung before anything was refused
MAX_NLIST = 1 << 20
#: FAISS reads a k or M suffix as x1024 or x1024^2 (`IVF1M,Flat`: 1,048,576 lists); the check read `IVF100M` as 100
_IVF_RE = re.compile(r"(?<![A-Za-z])IVF(\d+)([kM]?)")
_NLIST_SCALE = {"": 1, "k": 1 << 10, "M": 1 << 20}
#: HNSW's M (neighbours a node links to; 2*M on the bottom layer), as FAISS's factory takes it: from 2 (HNSW0 aborted
#: the process in FAISS's graph build, HNSW1 crashed it) to 512. FAISS's guidance is 4 to 64 and its default 32;
#: each vector holds 2*M 32-bit links on the bottom layer, 4 KB at M=512 (more than a 1024-dim float vector), and
#: `HNSW100000000` failed with std::bad_alloc 12 s into the build
HNSW_M_RANGE = (2, 512)
_HNSW_RE = re.compile(r"(?<![A-Za-z])HNSW(\d+)")
#: Bits per code of a product / residual quantiser (PQ{M}x{nbits}, RQ{M}x{nbits}): 1 to 16. A codebook holds
#: 2**nbits centroids of its sub-vector (PQ: all D floats together per sub-quantiser set; RQ: D floats each), and
#: k-means wants 39 training vectors each: 16 bits want 2.6M, 24 bits 654M and 16.8M x D floats of codebook
#: (`IVF{nlist},PQ64x24` was refused by FAISS only after 30 s and 8.7 GB RSS); 0 bits crashed the process in FAISS.
#: FAISS's own defaults are 8 bits, 4 for its fast-scan codes
PQ_NBITS_RANGE = (1, 16)
_PQ_RE = re.compile(r"(?<![A-Za-z])(PQ|RQ|LSQ)(\d+)(?:x(\d+))?")


#: NSG's R (out-degree of each node), as FAISS's factory takes it (NSG{R}, IVF{n}_NSG{R}): 24 to 512. With a small R
#: its graph build never finished (3,000 random vectors: NSG16 and under at dim 128, NSG8 and under at dim 32, killed
#: after 15-60 s; NSG17-NSG31 built in 1.3-1.8 s), a bound that moves with the data: 24 leaves a margin.
#: NSG100000000 hung the same way; FAISS's default is 32, and each vector stores R links, as HNSW's M
NSG_R_RANGE = (24, 512)
_NSG_RE = re.compile(r"(?<![A-Za-z])NSG(\d+)")
#: The most dimensions a transform may output (PCA{n}, OPQ{M}_{d}, RR{n}, ITQ{n}, Pad{n}): a rotation of that many
#: is a 1 GiB float32 matrix. `OPQ16_100000000,PQ16` failed with std::bad_alloc; 0 dimensions crashed the process
#: (OPQ16_0: SIGFPE, RR0: SIGSEGV) or built an index of empty vectors (PCA0)
MAX_TRANSFORM_DIM = 1 << 14
_TRANSFORM_RE = re.compile(r"(?<![A-Za-z])(PCAW?R?|ITQ|RR|Pad|OPQ)(\d+)(?:_(\d+))?")
#: A product additive quantiser (PRQ / PLSQ{splits}x{M}x{nbits}): 0 sub-quantisers or 0 bits crashed the process
_PAQ_RE = re.compile(r"(?<![A-Za-z])(PRQ|PLSQ)(\d+)x(\d+)x(\d+)")


def _shown(spec: str, factory: str) -> str:
    return factory if factory == spec.strip() else f"{factory} (from {spec!r})"


def check_factory_sizes(spec: str, factory: str, n: int | None = None, dim: int | None = None) -> None:
    """Refuse, before FAISS allocates anything, a size in the factory string ``factory`` (resolved from ``spec``)
    that no catalogue can use: more than :data:`MAX_NLIST` IVF lists, an HNSW M outside :data:`HNSW_M_RANGE`, PQ /
    RQ bits outside :data:`PQ_NBITS_RANGE`; with the catalogue's ``n`` known, more IVF lists or PQ / RQ centroids
    than vectors (k-means cannot place more centroids than points); with ``dim`` known, a PQ whose sub-quantisers
    do not divide it. ``n`` and ``dim`` None: only the bounds that hold for any catalogue (the string is checked
    before the run loads). Also the transforms', NSG's and PRQ / PLSQ's sizes (:func:`_check_transform_sizes`,
    :func:`_check_graph_and_product_sizes`); a transform's first, as what follows it sees its output."""
    _check_transform_sizes(spec, factory, dim)
    for match in _IVF_RE.finditer(factory):
        nlist = int(match.group(1)) * _NLIST_SCALE[match.group(2)]
        if nlist < 1:
            raise _no_lists(spec, factory)
        if nlist > MAX_NLIST:
            raise ConfigError(f"index {_shown(spec, factory)}: {match.group(0)} asks for {nlist:,} IVF lists, more than "
                              f"the {MAX_NLIST:,} (2^20) FAISS's guidelines give a billion vectors, and FAISS "
                              "allocates every list before training; name at most that many, or IVF{nlist} to size "
                              "the count to the catalogue")
        if n is not None and nlist > n:
            fit = max(1, n // POINTS_PER_CENTROID)
            raise ConfigError(f"index {_shown(spec, factory)}: {match.group(0)} asks for {nlist:,} IVF lists over "
                              f"{n:,} vectors, and k-means cannot place more centroids than vectors (FAISS wants "
                              f"{POINTS_PER_CENTROID} training vectors a list: at most {fit:,} lists here); name "
                              f"fewer (IVF{fit}), or IVF{{nlist}} to size the count to the catalogue")
        _check_coarse_codebooks(spec, factory, match, nlist)
    low, high = HNSW_M_RANGE
    for match in _HNSW_RE.finditer(factory):
        m = int(match.group(1))
        if not low <= m <= high:
            raise ConfigError(f"index {_shown(spec, factory)}: HNSW{m} links each vector to {m:,} neighbours (M), "
                              f"outside {low}..{high}: FAISS's HNSW needs M >= {low}, and its guidance is 4 to 64 "
                              f"(each vector stores 2*M links, {8 * high:,} bytes at M={high}); HNSW32 is the usual")
    for match in _PQ_RE.finditer(factory):
        kind, m, nbits = match.group(1), int(match.group(2)), int(match.group(3) or 8)  # FAISS's default: 8 bits
        low, high = PQ_NBITS_RANGE
        what = f"{kind}{m}x{nbits}" if match.group(3) else f"{kind}{m} ({nbits} bits, FAISS's default)"
        if not low <= nbits <= high:
            count = "" if nbits < 1 else f", {1 << nbits:,}" if nbits <= 40 else f", 2^{nbits}"
            count += " centroids per codebook" if count else ""
            raise ConfigError(f"index {_shown(spec, factory)}: {what} codes with {nbits} bits{count}; "
                              f"the bits must be {low} to {high} ({1 << high:,} centroids, "
                              f"{POINTS_PER_CENTROID << high:,} training vectors to train them): 8 is FAISS's "
                              "default, 4 its fast-scan codes'")
        if m < 1:
            raise ConfigError(f"index {_shown(spec, factory)}: {what} has no sub-quantisers; name 1 or more")
        seen = None if dim is None else _dim_at(factory, match.start(), dim)  # after PCA / OPQ_d / RR / Pad
        if kind == "PQ" and seen is not None and seen % m:
            fits = [d for d in range(1, seen + 1) if seen % d == 0 and d <= max(m, 1)][-1:] + \
                [d for d in range(m + 1, seen + 1) if seen % d == 0][:1]
            after = "" if seen == dim else f" (after the transform from {dim})"
            raise ConfigError(f"index {_shown(spec, factory)}: {kind}{m} splits each vector into {m:,} sub-vectors, "
                              f"and the dim {seen}{after} is not a multiple of {m:,}; name a divisor of {seen} "
                              f"(the nearest: {' or '.join(map(str, fits))})")
        if kind in ("PQ", "RQ") and n is not None and (1 << nbits) > n:
            fit = max(1, min(high, int(math.log2(max(n // POINTS_PER_CENTROID, 1))) or 1))
            raise ConfigError(f"index {_shown(spec, factory)}: {what} has {1 << nbits:,} centroids per codebook "
                              f"over {n:,} vectors, and k-means cannot place more centroids than vectors (FAISS "
                              f"wants {POINTS_PER_CENTROID} training vectors a centroid: {fit} bits here); name "
                              f"fewer bits ({kind}{m}x{fit}), or the ivfpq shortcut, which sizes them to the catalogue")
    _check_graph_and_product_sizes(spec, factory, n, dim)


def _check_coarse_codebooks(spec: str, factory: str, ivf: re.Match, nlist: int) -> None:
    """Refuse a PQ / RQ coarse quantiser (``IVF8(PQ4x4)``) with more centroids per codebook than the IVF has lists:
    it is trained on the ``nlist`` centroids alone, and k-means cannot place 2**nbits centroids on fewer points
    (FAISS refused ``IVF8(PQ4x4),Flat`` only at training, "Number of training points (8) should be at least as large
    as number of clusters (16)"; ``IVF8(RQ2x4),Flat`` failed there with a PCAMatrix assertion)."""
    if not factory.startswith("(", ivf.end()):
        return
    close = factory.find(")", ivf.end())
    inner = factory[ivf.end() + 1:close if close != -1 else len(factory)]
    for match in _PQ_RE.finditer(inner):
        kind, m, nbits = match.group(1), int(match.group(2)), int(match.group(3) or 8)
        if kind not in ("PQ", "RQ") or not 1 <= nbits <= PQ_NBITS_RANGE[1] or (1 << nbits) <= nlist:
            continue  # bits outside the range are refused below, in the PQ / RQ check's words
        what = f"{kind}{m}x{nbits}" if match.group(3) else f"{kind}{m} ({nbits} bits, FAISS's default)"
        fewer = nlist.bit_length() - 1  # the most bits whose 2**bits centroids the nlist centroids can train
        name = f"fewer bits ({kind}{m}x{fewer}) or more lists" if fewer >= 1 else "more lists"
        raise ConfigError(f"index {_shown(spec, factory)}: the coarse quantiser {what} of {ivf.group(0)} has "
                          f"{1 << nbits:,} centroids per codebook, and it is trained on the {nlist:,} list "
                          f"centroids alone: k-means cannot place more centroids than points; name {name} "
                          f"(IVF{1 << nbits}({match.group(0)}))")


def _dim_at(factory: str, pos: int, dim: int) -> int:
    """The dimension FAISS hands the part of ``factory`` at ``pos`` for vectors of ``dim``: the output of the
    transforms before it (``PCA32,PQ16`` quantises 32 dimensions, ``OPQ12_72,PQ12`` 72); a refine stage's index
    (``Refine(PQ16)``) sees the vectors themselves, as FAISS parses it apart from the chain."""
    refine = factory.find("Refine(")
    if refine != -1 and pos > refine:
        return dim
    for match in _TRANSFORM_RE.finditer(factory, 0, pos):
        kind, first, second = match.group(1), int(match.group(2)), match.group(3)
        if kind == "OPQ":
            dim = int(second) if second is not None else dim
        elif second is None:
            dim = max(first, dim) if kind == "Pad" else first
    return dim


def _check_transform_sizes(spec: str, factory: str, dim: int | None) -> None:
    """Refuse a transform's output dimension outside 1..:data:`MAX_TRANSFORM_DIM`; with ``dim`` known, a PCA or ITQ
    to more dimensions than the vectors have (FAISS refused it only at training), an OPQ whose output its M does not
    divide, or one padded past the next multiple of M (zeros the PQ then encodes)."""
    shown = _shown(spec, factory)
    for match in _TRANSFORM_RE.finditer(factory):
        kind, first, second = match.group(1), int(match.group(2)), match.group(3)
        if kind != "OPQ" and second is not None:
            continue  # not a transform FAISS parses (it refuses the string itself)
        if kind == "OPQ" and first < 1:
            raise ConfigError(f"index {shown}: {match.group(0)} has no sub-quantisers; name 1 or more (OPQ16)")
        d_out = (int(second) if second is not None else dim) if kind == "OPQ" else first
        if d_out is None:
            continue  # OPQ{M} outputs the vectors' dim, unknown before the run loads
        if not 1 <= d_out <= MAX_TRANSFORM_DIM:
            raise ConfigError(f"index {shown}: {match.group(0)} outputs {d_out:,} dimensions, outside "
                              f"1..{MAX_TRANSFORM_DIM:,} (a {MAX_TRANSFORM_DIM:,}-square float32 matrix is 1 GiB); "
                              "name an output dimension at most the vectors' own")
        if dim is None:
            continue
        if kind.startswith("PCA") or kind == "ITQ":
            if d_out > dim:
                raise ConfigError(f"index {shown}: {match.group(0)} keeps {d_out:,} principal components of vectors "
                                  f"of dim {dim}, which have at most {dim}; name at most {kind}{dim} (fewer reduce "
                                  "the dimension, which is what PCA is for)")
        elif kind == "OPQ":
            m = first
            if d_out % m:
                raise ConfigError(f"index {shown}: {match.group(0)} rotates to {d_out} dimensions for {m} "
                                  f"sub-quantisers, and {d_out} is not a multiple of {m}; name an output dimension "
                                  f"that is (OPQ{m}_{-(-d_out // m) * m})")
            padded = -(-dim // m) * m
            if d_out > padded:
                raise ConfigError(f"index {shown}: {match.group(0)} rotates vectors of dim {dim} to {d_out:,} "
                                  f"dimensions; past {padded} (the dim rounded up to a multiple of {m}) the rest are "
                                  f"zeros the PQ then encodes; name at most OPQ{m}_{padded}")


def _check_graph_and_product_sizes(spec: str, factory: str, n: int | None, dim: int | None) -> None:
    """Refuse an NSG R outside :data:`NSG_R_RANGE` and a PRQ / PLSQ with 0 splits or sub-quantisers, bits outside
    :data:`PQ_NBITS_RANGE`, splits that do not divide ``dim`` or more centroids than the ``n`` vectors."""
    shown = _shown(spec, factory)
    low, high = NSG_R_RANGE
    for match in _NSG_RE.finditer(factory):
        r = int(match.group(1))
        if not low <= r <= high:
            raise ConfigError(f"index {shown}: NSG{r} links each vector to {r:,} neighbours (R), outside "
                              f"{low}..{high}: with a small R FAISS's NSG graph build never finished (NSG16 on 3,000 "
                              "vectors of dim 128: still running after 60 s), and each vector stores R links; NSG32 "
                              "is FAISS's default")
    for match in _PAQ_RE.finditer(factory):
        kind, splits, m, nbits = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))
        what = match.group(0)
        if splits < 1 or m < 1:
            raise ConfigError(f"index {shown}: {what} has {splits} splits of {m} sub-quantisers each; name 1 or "
                              f"more of both ({kind}2x4x8)")
        low_bits, high_bits = PQ_NBITS_RANGE
        if not low_bits <= nbits <= high_bits:
            raise ConfigError(f"index {shown}: {what} codes with {nbits} bits; the bits must be {low_bits} to "
                              f"{high_bits}: 8 is FAISS's default, 4 its fast-scan codes'")
        if dim is not None and dim % splits:
            raise ConfigError(f"index {shown}: {what} splits each vector into {splits:,} parts, and the dim {dim} "
                              f"is not a multiple of {splits:,}; name a divisor of {dim}")
        if n is not None and (1 << nbits) > n:
            raise ConfigError(f"index {shown}: {what} has {1 << nbits:,} centroids per codebook over {n:,} vectors, "
                              "and k-means cannot place more centroids than vectors; name fewer bits")


def _nested_indexes(index: Any) -> list[Any]:
    """``index`` and every index FAISS trains inside it, downcast: an ID map's, a pre-transform's (OPQ, PCA), a
    refine's base and refine indexes (``PQ4x4,RFlat``: the PQ is the refine's base, which the checks of
    :func:`min_training_points` and :func:`_said_once` did not reach: FAISS repeated its warning per sub-quantiser),
    an IVF's coarse quantizer (``IVF{nlist}_HNSW32``: an HNSW graph of the centroids; ``IVF64(PQ8x4)``: a PQ) and an
    HNSW graph's storage (``HNSW32,PQ16``: a PQ)."""
    faiss = _faiss()
    found, todo = [], [index]
    while todo:
        one = faiss.downcast_index(todo.pop())
        found.append(one)
        if isinstance(one, (faiss.IndexIDMap, faiss.IndexPreTransform)):
            todo.append(one.index)
        elif isinstance(one, faiss.IndexRefine):
            todo += [one.refine_index, one.base_index]
        elif isinstance(one, faiss.IndexIVF) and one.quantizer is not None:
            todo.append(one.quantizer)
        elif isinstance(one, faiss.IndexHNSW) and one.storage is not None:
            todo.append(one.storage)
    return found


def skip_polysemous_training(index: Any) -> None:
    """Turn off FAISS's polysemous training in ``index`` and every PQ nested in it (``PQ16``, ``OPQ16,PQ16``,
    ``HNSW32,PQ16``, a refine's PQ, an IVF's PQ quantizer), not only an IVF-PQ's.

    ``index_factory`` turns it on for every PQ it makes; it only reorders each codebook's centroids so that Hamming
    distances between codes approximate theirs, for polysemous (Hamming-filtered) search, which no index here uses:
    the scores searches return are the same either way. Its annealing costs seconds per sub-quantiser whatever the
    catalogue size: `index build --index PQ16` on the 1,682 items of the ML-100K demo trained in 31.6 s, 0.1 s
    without it."""
    for one in _nested_indexes(index):
        if hasattr(one, "do_polysemous_training"):  # IndexPQ, IndexIVFPQ
            one.do_polysemous_training = False


#: The bits of the PQ an OPQ rotation trains for itself (FAISS's OPQMatrix, unless its ``pq`` is set): 8 whatever
#: the index's own PQ uses, so ``OPQ4,PQ4x4`` wants 39 x 256 = 9,984 vectors, not the 624 of its 4-bit PQ
_OPQ_PQ_BITS = 8


def _opq_matrices(index: Any) -> list[Any]:
    """The OPQ rotations in the pre-transforms of ``index`` and its nested indexes, downcast."""
    faiss = _faiss()
    found = []
    for one in _nested_indexes(index):
        if isinstance(one, faiss.IndexPreTransform):
            for i in range(one.chain.size()):
                vt = faiss.downcast_VectorTransform(one.chain.at(i))
                if isinstance(vt, faiss.OPQMatrix):
                    found.append(vt)
    return found


def min_training_points(index: Any) -> int:
    """Training vectors FAISS wants for ``index``: 39 per k-means centroid (IVF lists, PQ / SQ codebooks), of
    whichever of its nested indexes wants most."""
    faiss = _faiss()
    need = 0
    for sub in _nested_indexes(index):
        if isinstance(sub, faiss.IndexIVF):
            need = max(need, 39 * int(sub.nlist))
            if isinstance(sub, faiss.IndexIVFPQ):
                need = max(need, 39 * int(sub.pq.ksub))
        elif isinstance(sub, faiss.IndexPQ):
            need = max(need, 39 * int(sub.pq.ksub))
    for opq in _opq_matrices(index):  # it trains a PQ of its own, 50 times over (OPQMatrix.niter)
        need = max(need, 39 * (int(opq.pq.ksub) if opq.pq is not None else 1 << _OPQ_PQ_BITS))
    return need


def training_sample_size(spec: str, n: int, dim: int, cap: int) -> int:
    """How many of ``n`` vectors to train index ``spec`` on when at most ``cap`` are sampled: ``cap``, raised
    to FAISS's 39 vectors per centroid (:func:`min_training_points`), at most ``n``.

    The torchrun build samples on rank 0 (100,000 by default); IVF16384 needs 638,976, and FAISS trained on
    fewer gives poor lists, as :meth:`FaissIndex.build` says when it raises ``max_train`` the same way.
    """
    faiss = _faiss()
    factory = resolve_factory(spec, n, dim)
    check_factory_sizes(spec, factory, n, dim)
    need = min_training_points(faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT))
    return _raised_to_need(factory, need, cap, n, "the training sample")


def _raised_to_need(factory: str, need: int, cap: int, n: int, what: str) -> int:
    """``cap`` training vectors raised to the ``need`` of ``factory`` (39 per centroid), at most ``n``; says so."""
    if need > cap:
        # FAISS's k-means wants >= 39 points per centroid; fewer gives poor lists (and its warning)
        log.info("%s needs %d training vectors (39 per centroid); raising %s %d to %d", factory, need, what, cap,
                 min(need, n))
    return min(n, max(cap, need))


def _said_once(index: Any) -> list[tuple[Any, Any]]:
    """Stop FAISS repeating the too-few-training-points warning our own log line has just given.

    Its k-means prints "please provide at least N training points" to stderr once per
    clustering: once per PQ sub-quantiser (16 lines for PQ16). Lowering the threshold only
    changes that check; the clustering itself is the same.

    An OPQ rotation trains a PQ of its own, which prints it once per sub-quantiser per iteration (200 lines for
    ``OPQ4,PQ4x4``): it is given that PQ, the one FAISS would make (8 bits, FAISS's seed) with the check lowered.
    FAISS holds only a pointer to it: the (rotation, PQ) pairs returned must outlive the training, and
    :func:`_drop_opq_pqs` then unsets them.
    """
    faiss = _faiss()
    for owner in _nested_indexes(index):
        if hasattr(owner, "cp"):
            owner.cp.min_points_per_centroid = 1
        pq = getattr(owner, "pq", None)
        if pq is not None and hasattr(pq, "cp"):
            pq.cp.min_points_per_centroid = 1
    lent = []
    for opq in _opq_matrices(index):
        if opq.pq is None:
            pq = faiss.ProductQuantizer(int(opq.d_out), int(opq.M), _OPQ_PQ_BITS)
            opq.pq = pq
            lent.append((opq, pq))
        opq.pq.cp.min_points_per_centroid = 1
    return lent


def _drop_opq_pqs(lent: list[tuple[Any, Any]]) -> None:
    """Unset the PQs :func:`seed_training` and :func:`_said_once` lent OPQ rotations, before Python frees them (only training reads them)."""
    for opq, _ in lent:
        opq.pq = None


#: FAISS's own seeds (ClusteringParameters.seed, HNSW's level generator, a RandomRotationMatrix's, LocalSearchQuantizer's):
#: ``seed`` is added to them, so the default seed 0 builds the very index FAISS built before the seed reached it
#: (documented figures rebuild byte for byte)
_FAISS_KMEANS_SEED, _FAISS_HNSW_SEED, _FAISS_ROTATION_SEED, _FAISS_LSQ_SEED = 1234, 12345, 12345, 0x12345


def _offset(faiss_seed: int, seed: int) -> int:
    return (faiss_seed + int(seed)) % (2**31)  # FAISS takes a C int


def seed_training(index: Any, seed: int) -> list[tuple[Any, Any]]:
    """Seed FAISS's own random draws in ``index`` and every index and transform nested in it from ``seed``: the
    k-means of IVF lists and PQ / residual codebooks, HNSW levels, random rotations, OPQ's start and its PQ.

    FAISS seeds them with constants, so ``index build --seed`` changed only the query sample and the training
    subsample, never the centroids, and meta.json's ``seed`` did not say what chose them. Offset from FAISS's
    constants so that seed 0 keeps them. Reaching only the outer index and its IVF left FAISS's constants in the
    indexes inside: the PQ of ``OPQ16,PQ16x4``, the HNSW graph of ``HNSW32,Refine(Flat)`` or of ``PCA32,HNSW32``,
    the centroid graph of ``IVF{nlist}_HNSW32,Flat`` (the ``ivf`` shortcut from 200,000 vectors) and OPQ's rotation
    were the same whatever the seed.

    Returns the (rotation, PQ) pairs lent to OPQ rotations (as :func:`_said_once`): they must outlive the
    training, and :func:`_drop_opq_pqs` then unsets them.
    """
    faiss = _faiss()
    for part in _nested_indexes(index):
        if isinstance(part, faiss.IndexIVF):
            part.cp.seed = _offset(_FAISS_KMEANS_SEED, seed)
        for name in ("pq", "rq"):  # IndexPQ, IndexIVFPQ; IndexResidualQuantizer, IndexIVFResidualQuantizer
            quantizer = getattr(part, name, None)
            if quantizer is not None and hasattr(quantizer, "cp"):
                quantizer.cp.seed = _offset(_FAISS_KMEANS_SEED, seed)
        lsq = getattr(part, "lsq", None)
        if lsq is not None:
            lsq.random_seed = _offset(_FAISS_LSQ_SEED, seed)
        hnsw = getattr(part, "hnsw", None)
        if hnsw is not None:
            hnsw.rng = faiss.RandomGenerator(_offset(_FAISS_HNSW_SEED, seed))
        if isinstance(part, faiss.IndexPreTransform):
            for i in range(part.chain.size()):
                vt = faiss.downcast_VectorTransform(part.chain.at(i))
                if isinstance(vt, faiss.RandomRotationMatrix) and not vt.is_trained:
                    vt.init(_offset(_FAISS_ROTATION_SEED, seed))  # what its train() does with FAISS's constant
    lent = []
    for opq in _opq_matrices(index):
        if opq.pq is None:  # the PQ FAISS would make for itself (8 bits), with the seed
            pq = faiss.ProductQuantizer(int(opq.d_out), int(opq.M), _OPQ_PQ_BITS)
            opq.pq = pq
            lent.append((opq, pq))
        opq.pq.cp.seed = _offset(_FAISS_KMEANS_SEED, seed)
        if seed and opq.A.size() == 0:  # FAISS starts from a rotation drawn with its constant seed 1234
            faiss.copy_array_to_vector(_random_rotation(int(opq.d_in), int(opq.d_out), seed), opq.A)
    return lent


def _random_rotation(d_in: int, d_out: int, seed: int) -> np.ndarray:
    """The ``d_out`` first rows of a random ``d x d`` rotation (``d = max(d_in, d_out)``), flat float32: the
    starting point OPQMatrix.train draws for itself when its ``A`` is empty."""
    d = max(d_in, d_out)
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    q *= np.sign(np.diag(r))  # a uniformly random rotation, not one biased by QR's sign convention
    return np.ascontiguousarray(q[:d_out], dtype=np.float32).ravel()


def _knobs(inner: Any) -> tuple[str, ...]:
    """The runtime knobs of a FAISS index (unwrapped from its id map): a subset of nprobe, efSearch, k_factor."""
    faiss = _faiss()
    out = []
    if faiss.try_extract_index_ivf(inner) is not None:
        out.append("nprobe")
    base = faiss.downcast_index(inner.base_index) if isinstance(inner, faiss.IndexRefine) else inner
    if isinstance(base, faiss.IndexHNSW):
        out.append("efSearch")
    if isinstance(inner, faiss.IndexRefine):
        out.append("k_factor")
    return tuple(out)


def factory_knobs(spec: str, n: int, dim: int) -> tuple[str, tuple[str, ...], int | None]:
    """The FAISS factory ``spec`` resolves to for ``n`` vectors of ``dim``, its runtime knobs and IVF list count.

    Read from an empty, untrained index: a setting pinned for a build is checked before the minutes of training.
    """
    faiss = _faiss()
    factory, index = _empty_index(spec, n, dim)
    ivf = faiss.try_extract_index_ivf(index)
    return factory, _knobs(faiss.downcast_index(index)), None if ivf is None else int(ivf.nlist)


def _empty_index(spec: str, n: int, dim: int) -> tuple[str, Any]:
    """The FAISS factory ``spec`` resolves to for ``n`` vectors of ``dim``, and an empty index of it (a bad
    factory string refused in the user's words)."""
    faiss = _faiss()
    factory = resolve_factory(spec, n, dim)
    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise _factory_error(spec, factory, e) from e
    _check_lists(spec, factory, index)
    return factory, index


#: How the refusal of an IVF index without lists begins (check_factory_parses passes it on before any data is read).
NO_LISTS = "has no IVF lists"


def _check_lists(spec: str, factory: str, index: Any) -> None:
    """Refuse an IVF index of 0 lists (``IVF0,Flat``): FAISS parses and builds it, and the first search failed with
    "'cur_nprobe > 0' failed" once the run had loaded, the index trained and its vectors added."""
    ivf = _faiss().try_extract_index_ivf(index)
    if ivf is not None and int(ivf.nlist) < 1:
        raise _no_lists(spec, factory)


def _no_lists(spec: str, factory: str) -> ConfigError:
    return ConfigError(f"index {_shown(spec, factory)} {NO_LISTS}: IVF0 puts the vectors in 0 lists, which no search "
                       "can probe; name a list count of 1 or more (IVF1024,Flat), or IVF{nlist} to size it to the "
                       "catalogue")


def refuse_idmap(spec: str, name: str = "factory") -> None:
    """Refuse a factory string that starts with FAISS's ``IDMap`` / ``IDMap2`` (``name``: the argument or flag that
    gave it). FaissIndex keeps the caller's ids itself (IVF lists store them natively, any other index is wrapped
    in an IDMap2 of its own), so such an index was handed plain vectors and the build failed with FAISS's C++
    RuntimeError "add does not make sense with IndexIDMap, use add_with_ids"."""
    head, _, rest = spec.strip().partition(",")
    if head.strip().lower() not in ("idmap", "idmap2"):
        return
    bare = rest.strip()
    instead = f"write {bare!r}" if bare else "name the index alone, e.g. 'Flat' or 'HNSW32'"
    raise ConfigError(f"{name}: must not start with {head.strip()} (twotower maps the ids itself, so FAISS's id map "
                      f"would be given no ids and refuse the vectors), got {spec!r}; {instead}")


def check_factory_parses(spec: str) -> None:
    """Refuse, without any vectors, an index ``spec`` FAISS cannot parse at all (`HNSWxx`, `IVF8,Flatt`): such a
    string was refused only once the run had loaded and the build began. FAISS's "could not parse" does not depend
    on the dimension or the vector count (placeholders here); a string it parses but refuses at some dimension (a
    PQ whose m must divide D) is left to the build, which knows D."""
    if spec.strip().lower() in ("auto", "exact"):
        return
    check_factory_sizes(spec, spec.strip())  # a size no catalogue can use: refused before FAISS allocates it
    n, dim = 100_000, 64
    try:
        _empty_index(spec, n, dim)
    except ConfigError as e:
        if NO_LISTS in str(e):  # IVF0: refused whatever the catalogue
            raise
        if "could not parse" not in str(e):
            return
        if resolve_factory(spec, n, dim) != spec.strip():  # a shortcut or {nlist}: its sizes are placeholders here
            raise ConfigError(f"{e} (list count and PQ shape as sized for {n:,} vectors of dim {dim}, to check the "
                              "string before any data is read; the build sizes them to the catalogue)") from None
        raise


def needs_training(spec: str, n: int, dim: int) -> tuple[str, bool]:
    """The FAISS factory ``spec`` resolves to for ``n`` vectors of ``dim``, and whether FAISS trains it (IVF lists,
    PQ / SQ codebooks): ``max_train`` caps a sample that only such an index draws."""
    factory, index = _empty_index(spec, n, dim)
    return factory, not index.is_trained


def _factory_error(spec: str, factory: str, err: Exception) -> ConfigError:
    import difflib

    reason = " ".join(str(err).split()).split("Error: ")[-1]  # drop FAISS's C++ location prefix
    reason = re.sub(r"^Error in .*? at \S+:\d+: ", "", reason)  # the prefix of a FAISS_THROW_FMT without "Error: "
    # a typo of a shortcut (`--index hnws`) is the likely mistake: name the shortcut first
    near = difflib.get_close_matches(spec.strip().lower(), SHORTCUTS, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return ConfigError(
        f"FAISS rejected the index {factory!r} (from {spec!r}): {reason.strip()}. {hint}"
        f"Use a shortcut ({', '.join(SHORTCUTS)}; 'ivfpq,RFlat' or 'ivfpq,Refine(SQ8)' add a refine stage) "
        "or a FAISS index_factory string such as 'IVF1024,Flat', 'HNSW32', 'IVF{nlist},PQ16x8,Refine(SQ8)'"
    )


class FaissIndex(VectorIndex):
    """A FAISS index (any ``index_factory`` string or shortcut), inner product, caller's ids.

    ``nprobe`` / ``efSearch`` / ``k_factor_rf`` set the runtime knobs after
    build (an error if the index has no such knob). ``max_train`` caps the
    vectors used for training (a seeded sample); ``seed`` also seeds FAISS's
    k-means (IVF lists, PQ / residual codebooks) and HNSW's level draws, in
    nested indexes too (a pre-transform's, a refine stage's, an IVF's coarse
    quantizer), and OPQ's starting rotation, which FAISS otherwise seeds with
    its own constants (seed 0 keeps them); ``device="cuda"`` searches
    on GPU when faiss-gpu is installed. ``log_every_s``: seconds between
    progress lines while vectors are added (None: none).
    """

    backend = "faiss"
    _example_args = "'flat'"
    stored_files = ("index.faiss", "ids.npy")

    def __init__(
        self,
        factory: str = "flat",
        *,
        nprobe: int | None = None,
        efSearch: int | None = None,  # noqa: N803 - FAISS's own spelling
        k_factor_rf: float | None = None,
        device: str = "cpu",
        max_train: int | None = None,
        seed: int = 0,
        log_every_s: float | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(factory, str):  # FaissIndex(vectors): a whole array's repr as "the factory"
            raise ConfigError(f"FaissIndex(factory): the index type, one of {', '.join(SHORTCUTS)} or a FAISS "
                              f"index_factory string, got {describe(factory)}; the vectors go to build: "
                              "FaissIndex('flat').build(vectors, ids)")
        refuse_idmap(factory)  # FAISS parses it, and its C++ error came only from build()
        resolve_factory(factory, 1000, 8)  # validate the type early; FAISS validates the rest at build
        check_factory_parses(factory)  # a string FAISS cannot parse at all ('zzz') was refused only by build()
        if device not in ("cpu", "cuda"):
            raise ConfigError(f"device: must be 'cpu' or 'cuda', got {device!r}")
        if device == "cuda" and not hasattr(_faiss(), "StandardGpuResources"):
            raise ConfigError("device='cuda' needs faiss-gpu (pip install faiss-gpu); use device='cpu'")
        if max_train is not None and (isinstance(max_train, bool) or int(max_train) < 1):
            raise ConfigError(f"max_train: must be a positive integer or None, got {max_train!r}")
        self.spec = factory
        self.device = device
        self.max_train = None if max_train is None else int(max_train)
        self.seed = check_seed(seed)
        self.log_every_s = log_every_s  # progress lines while training and adding (None: none); not part of the index
        self._initial_params = {
            k: v for k, v in {"nprobe": nprobe, "efSearch": efSearch, "k_factor": k_factor_rf}.items() if v is not None
        }
        self._params: dict[str, Any] = {}
        self._index: Any = None  # CPU master copy
        self._gpu: Any = None
        self._mapped = False  # _index reads its codes from the saved file (load_index(mmap=True)), read-only
        self._ids = np.empty(0, dtype=np.int64)  # live ids [N]
        self._tomb = np.empty(0, dtype=np.int64)  # removed but still stored (index cannot delete)
        self._max_norm: float | None = None  # cache for a flat index's tie scan, reset whenever the contents change
        self.factory: str | None = None
        self._build_params: dict[str, Any] = {}

    # ------------------------------------------------------------------ structure
    @property
    def _native_ids(self) -> bool:
        return isinstance(self._index, _faiss().IndexIVF)

    def _inner(self) -> Any:
        faiss = _faiss()
        idx = self._index
        if isinstance(idx, faiss.IndexIDMap):
            idx = faiss.downcast_index(idx.index)
        return idx

    @property
    def is_exact(self) -> bool:  # type: ignore[override]
        """Whether searches return the exact top-k (a flat index)."""
        return isinstance(self._inner(), _faiss().IndexFlat)

    @property
    def knobs(self) -> tuple[str, ...]:
        """Runtime knobs this index has: a subset of ``("nprobe", "efSearch", "k_factor")``."""
        inner = self._inner()
        return () if inner is None else _knobs(inner)

    @property
    def nlist(self) -> int | None:
        """Number of IVF lists, or None for a non-IVF index."""
        ivf = _faiss().try_extract_index_ivf(self._inner()) if self._index is not None else None
        return None if ivf is None else int(ivf.nlist)

    # ------------------------------------------------------------------ contents
    def build(self, vectors: np.ndarray, ids: np.ndarray) -> "FaissIndex":
        faiss = _faiss()
        vectors = check_vectors(vectors)
        n, dim = vectors.shape
        ids = check_ids(ids, n)
        self.factory = resolve_factory(self.spec, n, dim)
        note = pq_sizing_note(n, dim) if self.spec.partition(",")[0].strip().lower() == "ivfpq" else None
        if note:  # the shortcut chose fewer than 8 bits: say what and why, as the factory string alone does not
            log.info("%s", note)
        check_factory_sizes(self.spec, self.factory, n, dim)  # before FAISS allocates what they name
        try:
            index = faiss.index_factory(dim, self.factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as e:
            raise _factory_error(self.spec, self.factory, e) from e
        _check_lists(self.spec, self.factory, index)
        lent = seed_training(index, self.seed)  # PQs lent to OPQ rotations, kept alive until trained
        skip_polysemous_training(index)
        if not isinstance(index, faiss.IndexIVF):
            index = faiss.IndexIDMap2(index)
        t0 = time.perf_counter()
        n_train = 0
        if not index.is_trained:
            train = vectors
            need = min_training_points(index)
            want = None if self.max_train is None else _raised_to_need(self.factory, need, self.max_train, n, "max_train")
            if need > n:
                small = ("; a catalogue this small is searched exactly in well under a millisecond: --index flat, "
                         "or auto" if n < 100_000 else "")
                log.warning("%s wants %d training vectors (39 per centroid) but only %d exist, so FAISS trains it "
                            "on fewer; the recall measured next says what that costs (fewer lists or PQ bits would "
                            "train fully; fewer bits recall less unless more sub-quantisers keep the code as long, "
                            "as the ivfpq shortcut sizes them)%s", self.factory, need, n, small)
                lent += _said_once(index)
            if want is not None and n > want:
                rows = np.sort(np.random.default_rng(self.seed).choice(n, want, replace=False))
                train = vectors[rows]
            n_train = int(train.shape[0])
            log.info("training %s on %d vectors of dim %d", self.factory, n_train, dim)
            # k-means assigns points by flat search: SGEMM, whatever setting an earlier search left (a
            # single-query one made IVF1024 training on 200K x 64 take 11-14 s instead of 4.1 s, one thread),
            # and the same centroids whether or not one ran before
            use_blas_for(n_train)
            try:
                with heartbeat(log, f"training {self.factory}", self.log_every_s):
                    index.train(train)
            except RuntimeError as e:
                raise _factory_error(self.spec, self.factory, e) from e
            finally:
                _drop_opq_pqs(lent)
            # FAISS's k-means says nothing through logging (its verbose mode writes \r lines): minutes at 1M items
            log.info("trained %s in %.1fs", self.factory, time.perf_counter() - t0)
        train_s = time.perf_counter() - t0
        self._index, self._gpu, self._mapped = index, None, False
        self._ids = np.empty(0, dtype=np.int64)
        self._tomb = np.empty(0, dtype=np.int64)
        self._params = {}
        self._add_checked(vectors, ids)
        self._build_params = {
            "n_train": n_train,
            "train_seconds": round(train_s, 3),
            "add_seconds": round(time.perf_counter() - t0 - train_s, 3),
            "max_train": self.max_train,
            "seed": self.seed,
        }
        if self._initial_params:
            self.set_search_params(**self._initial_params)
        self._sync_gpu()
        return self

    def _add_checked(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        n = vectors.shape[0]
        progress = RateLog(log, f"adding to {self.factory}", n, "vectors", self.log_every_s, rate_unit="vectors")
        with progress.between_updates():  # a chunk can outlast the interval (an HNSW graph's, on one thread)
            for s in range(0, n, _ADD_CHUNK):
                use_blas_for(min(_ADD_CHUNK, n - s))  # an IVF index assigns lists by flat search over its centroids
                self._index.add_with_ids(vectors[s : s + _ADD_CHUNK], ids[s : s + _ADD_CHUNK])
                progress.update(min(s + _ADD_CHUNK, n))
        self._ids = np.concatenate([self._ids, ids])
        self._max_norm = None

    def _own_index(self) -> None:
        """Read a mapped index into memory before it changes: FAISS writes into its codes and lists in place, and on
        the read-only file map that killed the process (a segfault, or "cannot be performed on a viewed vector")."""
        if self._mapped:
            faiss = _faiss()
            self._index = faiss.deserialize_index(faiss.serialize_index(self._index))
            self._mapped = False

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        if self._index is None:
            self.build(vectors, ids)
            return
        vectors = check_vectors(vectors, self.dim)
        ids = check_ids(ids, vectors.shape[0])
        clash = np.intersect1d(ids, self._ids)
        if clash.size:
            raise DataError(f"ids already in the index: {clash[:10].tolist()}; remove them first to replace them")
        reused = np.intersect1d(ids, self._tomb)
        if reused.size:
            raise DataError(
                f"ids {reused[:10].tolist()} were removed from a {self.factory} index, which FAISS cannot "
                "delete from; rebuild the index to reuse them"
            )
        self._own_index()
        self._add_checked(vectors, ids)
        self._sync_gpu()

    def remove(self, ids: np.ndarray) -> int:
        if self._index is None:
            return 0
        present = np.intersect1d(np.asarray(ids, dtype=np.int64).ravel(), self._ids)
        if not present.size:
            return 0
        self._own_index()
        try:
            self._index.remove_ids(present)
        except RuntimeError:
            log.debug("%s cannot delete; hiding %d ids", self.factory, present.size)
            self._tomb = np.union1d(self._tomb, present)
        self._ids = self._ids[~np.isin(self._ids, present)]
        self._max_norm = None
        self._sync_gpu()
        return int(present.size)

    def _hidden_ids(self) -> np.ndarray:
        return self._tomb

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    @property
    def dim(self) -> int:
        """Dimension of the indexed vectors (the index must be built)."""
        if self._index is None:
            raise self._not_built()
        return int(self._index.d)

    # ------------------------------------------------------------------ knobs
    @property
    def search_params(self) -> dict[str, Any]:
        """The runtime knobs searches use (``nprobe``, ``efSearch``, ``k_factor``, as set), a copy."""
        return dict(self._params)

    def set_search_params(self, **params: Any) -> None:
        """Set ``nprobe`` (IVF), ``efSearch`` (HNSW) and/or ``k_factor`` (refine); None leaves a knob alone."""
        unknown = sorted(set(params) - set(_KNOBS))
        if unknown:
            raise ConfigError(f"unknown search parameter(s) {unknown}; choose from {sorted(_KNOBS)}")
        if self._index is None:
            self._initial_params.update({k: v for k, v in params.items() if v is not None})
            return
        faiss = _faiss()
        space = faiss.ParameterSpace()
        for name, value in params.items():
            if value is None:
                continue
            if name not in self.knobs:
                raise ConfigError(
                    f"{self.factory} has no {name!r} knob; its knobs are {list(self.knobs) or 'none'}"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or value < 1:
                raise ConfigError(f"{name}: must be a number >= 1 (a search parameter), got {value!r}")
            value = float(value) if name == "k_factor" else int(value)
            space.set_index_parameter(self._index, _KNOBS[name], value)
            self._params[name] = value
            if name == "nprobe":
                self._widen_hnsw_quantizer(int(value))
        self._sync_gpu()

    def _widen_hnsw_quantizer(self, nprobe: int) -> None:
        """An HNSW coarse quantizer searches ``max(32, 2 * nprobe)`` deep, so the ``nprobe`` lists it returns are
        the nearest ones: at its default depth (16) it misses centroids once nprobe grows, and recall stops
        rising (1M x 64, IVF16384_HNSW32: 0.93 from nprobe 16 to 48 at the default depth)."""
        faiss = _faiss()
        ivf = faiss.try_extract_index_ivf(self._inner())
        if ivf is None:
            return
        quantizer = faiss.downcast_index(ivf.quantizer)
        if isinstance(quantizer, faiss.IndexHNSW):
            quantizer.hnsw.efSearch = max(32, 2 * nprobe)

    def _sync_gpu(self) -> None:
        if self.device != "cuda" or self._index is None:
            return
        faiss = _faiss()
        if not hasattr(self, "_gpu_res"):
            self._gpu_res = faiss.StandardGpuResources()
        self._gpu = faiss.index_cpu_to_gpu(self._gpu_res, 0, self._index)

    # ------------------------------------------------------------------ search
    def _search_candidates(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        index = self._gpu if self._gpu is not None else self._index
        use_blas_for(queries.shape[0])
        total = int(index.ntotal)
        if not self.is_exact:
            params = self._hnsw_depth(fetch) or self._refine_params(fetch)
            scores, ids = index.search(queries, fetch, params=params) if params else index.search(queries, fetch)
            return _sorted(scores, ids, fetch)
        # Exact: make the cut tie-correct (smaller id wins) by fetching past any tie at the boundary.
        f = min(fetch + 1, total)
        scores, ids = index.search(queries, f)  # [Q, f]
        while f < total and f > fetch:
            # the last fetched hit still ties the k-th: more tied hits may lie beyond it
            straddle = (scores[:, -1] == scores[:, fetch - 1]) & (ids[:, -1] != PAD_ID)
            if not straddle.any():
                break
            f = self._settle_depth(queries[straddle], scores[straddle, fetch - 1], f)
            # the whole batch again, never the straddling rows alone: a score's float32 bits depend on the batch
            # (FAISS's SGEMM blocks, its SIMD loop for few queries, its split of the catalogue over threads)
            scores, ids = index.search(queries, f)
            if self._gpu is None:
                break  # _settle_depth counted every hit that can reach the cut
        return _top_of_descending(scores, ids, fetch)

    def _settle_depth(self, queries: np.ndarray, cut: np.ndarray, f: int) -> int:
        """How deep to fetch ``queries[T, D]`` again, whose ``F``-th hit scored ``cut[T]`` and ties the ``f``-th.

        Every item that may score ``>= cut`` in FAISS: an upper bound from one counting scan of the stored vectors
        (:func:`~twotower.index.exact.count_reaching`, blocks of at most :data:`_COUNT_BLOCK_ELEMS` scores), so
        the fetch at that depth holds the whole tie and settles it by the smaller ids, as fetching 8x deeper until
        the tie fitted did: the same lists and score bits, one more fetch instead of ``log8(tie / F)``. FAISS's own
        scores cannot be recomputed outside a search of the same batch (see the caller), so only the depth is
        scanned for; on GPU (no vectors here to scan) the fetch grows 8x per retry.
        """
        total = int(self._index.ntotal)
        if self._gpu is not None:
            return min(TIE_FETCH_GROWTH * f, total)
        faiss = _faiss()
        inner = self._inner()
        vectors = faiss.rev_swig_ptr(inner.get_xb(), total * inner.d).reshape(total, inner.d)  # [N, D], no copy
        if self._max_norm is None:
            self._max_norm = max_norm(vectors)
        # FAISS's score and the counting SGEMM are each within sgemm_eps / 4 of the exact one
        counts = count_reaching(vectors, queries, cut, sgemm_eps(queries, self._max_norm), _COUNT_BLOCK_ELEMS)
        return int(min(total, max(f + 1, counts.max())))

    def _hnsw_depth(self, fetch: int) -> Any:
        """FAISS search parameters searching an HNSW graph at least ``fetch`` deep, or None when efSearch suffices.

        FAISS returns at most about efSearch hits from the graph, whatever k (1.15: k=1000 at efSearch 16 gives
        184 of 1,682), so a deep fetch (a large k, or k plus a long exclusion list) needs efSearch >= fetch;
        efSearch itself stays the shallow depth that autotune chose for ordinary k."""
        faiss = _faiss()
        if "efSearch" not in self.knobs or self._gpu is not None:
            return None
        inner = self._inner()
        refine = inner if isinstance(inner, faiss.IndexRefine) else None
        hnsw = faiss.downcast_index(refine.base_index) if refine is not None else inner
        k_factor = (self._refine_factor(fetch) or refine.k_factor) if refine is not None else 1.0
        depth = int(np.ceil(fetch * k_factor)) if refine is not None else fetch  # the base fetches k_factor*k
        if depth <= int(hnsw.hnsw.efSearch):
            return None
        params = faiss.SearchParametersHNSW(efSearch=depth)
        if refine is None:
            return params
        outer = faiss.IndexRefineSearchParameters(k_factor=k_factor, base_index_params=params)
        outer._keep = params  # FAISS holds a raw pointer: keep the Python object alive
        return outer

    def _refine_factor(self, fetch: int) -> float | None:
        """The k_factor for a search of ``fetch`` hits when ``fetch * k_factor`` passes the index's size, else None.

        A refine stage has its base index fetch ``k_factor * fetch`` candidates (FAISS's ``IndexRefine``), and
        ``set_search_params(k_factor=)`` cannot know the k of later searches: a k_factor tuned at k=10 searched at a
        larger k (a serve request, a deep fetch past exclusions) asked for more candidates than the index holds,
        the heaps and an HNSW base's depth sized to match. Capped per call so the base fetches the whole index and no
        more (``int(fetch * k_factor)`` = its size): the same candidates, the same answer.
        """
        faiss = _faiss()
        inner = self._inner()
        if self._gpu is not None or not isinstance(inner, faiss.IndexRefine):
            return None
        total = int(inner.ntotal)
        if fetch * float(inner.k_factor) <= total:
            return None
        return max(1.0, (total + 0.5) / fetch)

    def _refine_params(self, fetch: int) -> Any:
        """FAISS search parameters capping the refine stage's k_factor for ``fetch`` hits (:meth:`_refine_factor`),
        or None when the index's own serves."""
        k_factor = self._refine_factor(fetch)
        return None if k_factor is None else _faiss().IndexRefineSearchParameters(k_factor=k_factor)

    def _ivf_widening(self, depth: int, fetch: int | None = None) -> Any:
        """FAISS search parameters with nprobe multiplied by 2**depth, or None if not applicable; ``fetch`` (the
        hits asked for) caps a refine stage's k_factor as :meth:`_refine_factor` does."""
        faiss = _faiss()
        if depth == 0 or "nprobe" not in self.knobs or self._gpu is not None:
            return None
        ivf = faiss.try_extract_index_ivf(self._inner())
        nprobe = min(int(ivf.nlist), int(ivf.nprobe) << depth)
        ivf_params = faiss.SearchParametersIVF(nprobe=nprobe)
        inner = self._inner()
        if isinstance(inner, faiss.IndexRefine):
            if faiss.try_extract_index_ivf(inner.base_index) is None:
                return None
            k_factor = (self._refine_factor(fetch) if fetch is not None else None) or inner.k_factor
            params = faiss.IndexRefineSearchParameters(k_factor=k_factor, base_index_params=ivf_params)
            params._keep = ivf_params  # keep the Python object alive while FAISS holds a pointer
            return params
        # an IVF of its own, or one behind a pre-transform (PCA, OPQ) in our id map: FAISS's IndexIDMap2 and
        # IndexPreTransform hand the parameters on to it. Without them such an index never probed past its nprobe,
        # and a filtered search came back short though eligible ids were left (PCA32,IVF64,Flat: 181 of 200 hits)
        return ivf_params

    def _selector_params(self, depth: int, allow: np.ndarray) -> Any:
        """FAISS search parameters that restrict an IVF search to ``allow`` (sorted ids), or None.

        The allow-list is applied inside FAISS (an ``IDSelectorBatch``), so a
        narrow filter does not need a catalogue-wide over-fetch, and widening
        nprobe up to every list makes it complete; other index types (flat,
        HNSW, refine) are filtered after the search by the caller.
        """
        faiss = _faiss()
        if self._gpu is not None:
            return None
        sel = faiss.IDSelectorBatch(allow)
        inner = self._inner()
        if self._native_ids and "nprobe" in self.knobs:
            ivf = faiss.try_extract_index_ivf(inner)
            params = faiss.SearchParametersIVF(nprobe=min(int(ivf.nlist), int(ivf.nprobe) << depth), sel=sel)
        else:  # HNSW with a selector can miss allowed ids for good (the graph walk is cut): post-filter instead
            return None
        params._keep = (sel, allow)  # FAISS holds raw pointers: keep the Python objects alive
        return params

    def _lossless_vectors(self) -> bool:
        """True when ``reconstruct`` returns the stored vectors exactly (flat, HNSW-flat, flat refine)."""
        faiss = _faiss()
        if self._native_ids or self._gpu is not None or self._index is None:
            return False
        inner = self._inner()
        if isinstance(inner, faiss.IndexRefine):
            return isinstance(faiss.downcast_index(inner.refine_index), faiss.IndexFlat)
        return isinstance(inner, (faiss.IndexFlat, faiss.IndexHNSWFlat))

    def _stored_vectors(self, ids: np.ndarray) -> np.ndarray | None:
        if not self._lossless_vectors():
            return None
        return np.asarray(self._index.reconstruct_batch(np.asarray(ids, dtype=np.int64)), dtype=np.float32)

    def _scores_exact(self) -> bool:
        # an IVF-Flat index scores its stored vectors exactly, though they are not read back without a direct map
        return self._lossless_vectors() or (self._index is not None and self._gpu is None
                                            and isinstance(self._inner(), _faiss().IndexIVFFlat))

    def _scores_allowed_exactly(self) -> bool:
        return self._lossless_vectors()  # an IVF restricts its own search with a selector, at its tuned nprobe

    def _search_allowed_exactly(
        self, query: np.ndarray, k: int, allow: np.ndarray, exclude: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Small allow-lists on flat / HNSW / refined indexes: re-read those vectors and score them exactly."""
        if not self._scores_allowed_exactly():  # the rule ranks_filter_exactly reports by
            return None
        from twotower.index.exact import canonical_scores

        ids = allow[np.isin(allow, self._ids)]
        if exclude.size:
            ids = ids[~np.isin(ids, exclude)]
        if ids.size == 0:
            return np.empty(0, np.float32), ids
        vectors = np.asarray(self._index.reconstruct_batch(ids), dtype=np.float32)  # [M, D]
        scores = canonical_scores(query[None, :], vectors, np.arange(ids.size)[None, :])[0]  # [M]
        order = np.lexsort((ids, -scores))[:k]
        return scores[order], ids[order]

    def _search_deeper(
        self, queries: np.ndarray, fetch: int, depth: int, allow: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        params = self._selector_params(depth, allow) if allow is not None else None
        if params is None:
            params = self._ivf_widening(depth, fetch)
        if params is None:
            return self._search_candidates(queries, fetch)
        use_blas_for(queries.shape[0])
        scores, ids = self._index.search(queries, fetch, params=params)  # [Q, F], wider nprobe / filtered
        return _sorted(scores, ids, fetch)

    def _exhausted(self, fetch: int, depth: int) -> bool:
        if fetch < len(self) + len(self._tomb):
            return False
        if self._ivf_widening(depth + 1) is None:
            return True
        ivf = _faiss().try_extract_index_ivf(self._inner())
        return (int(ivf.nprobe) << depth) >= int(ivf.nlist)  # every list already probed

    # ------------------------------------------------------------------ storage
    def cpu_index(self) -> Any:
        """The underlying FAISS index (CPU copy)."""
        return self._index

    def nbytes(self) -> int:
        """Serialised size of the FAISS index plus the id array."""
        return int(_faiss().serialize_index(self._index).nbytes + self._ids.nbytes)

    def _write(self, directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        _faiss().write_index(self._index, str(directory / "index.faiss"))
        np.save(directory / "ids.npy", self._ids, allow_pickle=False)
        config = {"factory": self.spec, "device": self.device, "max_train": self.max_train, "seed": self.seed}
        return config, dict(self._build_params)

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], *, mmap: bool = False) -> "FaissIndex":
        faiss = _faiss()
        config = dict(meta.get("config", {}))
        if config.get("device") == "cuda" and not hasattr(faiss, "StandardGpuResources"):
            log.warning("index was saved with device='cuda' but faiss-gpu is not installed; searching on CPU")
            config["device"] = "cpu"
        seed = config.pop("seed", 0)
        index = cls(**config)
        # as saved, unchecked: it chose the index's training draws, which loading does not repeat, and an index built
        # with seed=-1 before the seed was checked still loads
        index.seed = seed
        # IO_FLAG_MMAP_IFC maps flat codes and IVF lists read-only (FAISS >= 1.10); HNSW graphs and
        # quantizers are still read into memory
        flags = (faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY) if mmap and hasattr(faiss, "IO_FLAG_MMAP_IFC") else 0
        index._index = faiss.read_index(str(directory / "index.faiss"), flags)
        index._mapped = bool(flags)
        index.factory = meta.get("factory")
        index._ids = np.load(directory / "ids.npy", allow_pickle=False, mmap_mode="r" if mmap else None)
        index._build_params = dict(meta.get("build_params", {}))
        if isinstance(index._index, faiss.IndexIDMap):
            stored = faiss.vector_to_array(index._index.id_map).astype(np.int64)
            index._tomb = np.setdiff1d(stored, index._ids)
        index.set_search_params(**meta.get("params", {}))
        return index


def _sorted(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    res = Results.from_scores_and_ids(scores, ids.astype(np.int64, copy=False), k)  # ties -> smaller id
    return res.scores, res.ids


def _top_of_descending(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_sorted` of a deep fetch ``scores[Q, f]`` whose rows FAISS sorted by descending score.

    Only the hits above each row's ``k``-th score (fewer than ``k``, in the first ``k`` places) and the ``k``
    smallest ids that tie with it can be in its top-``k``: those go to :func:`_sorted`, not all ``f`` (a full
    lexsort of 64 x 100,000 hits took 1.1 s)."""
    if (ids == PAD_ID).any():
        return _sorted(scores, ids, k)
    none = np.iinfo(np.int64).max
    cut = scores[:, k - 1 : k]  # [Q, 1]
    tied = np.partition(np.where(scores == cut, ids, none), k - 1, axis=1)[:, :k]  # [Q, k] smallest tied ids
    head = scores[:, :k]
    above = np.where(head > cut, head, -np.inf)  # [Q, k]; the tied ones among them come from `tied`, once
    cand_s = np.concatenate([above, np.where(tied != none, cut, -np.inf)], axis=1).astype(np.float32)  # [Q, 2k]
    return _sorted(cand_s, np.concatenate([ids[:, :k], tied], axis=1), k)
