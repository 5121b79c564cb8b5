"""`IndexContract`: the behaviour every VectorIndex backend must share.

Each backend's test class inherits it and provides ``make_index()``; ANN
backends are configured at high nprobe/efSearch so that on these small
catalogues they return the exact top-k, and every test compares against the
brute-force reference (full sort, ties by smaller id).
"""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError, DataError, IntegrityError, NotFoundError
from twotower.index import VectorIndex, load_index, shortfall
from twotower.results import PAD_ID

from index_data import brute_force


class IndexContract:
    def make_index(self) -> VectorIndex:  # pragma: no cover - overridden
        raise NotImplementedError

    def built(self, catalogue) -> VectorIndex:
        x, ids, _ = catalogue
        return self.make_index().build(x, ids)

    def assert_matches(self, got_ids: np.ndarray, ref_ids: np.ndarray) -> None:
        np.testing.assert_array_equal(got_ids, ref_ids)

    # ------------------------------------------------------------------ search
    def test_topk_matches_brute_force(self, catalogue):
        x, ids, q = catalogue
        index = self.built(catalogue)
        res = index.search(q, 10)
        ref_ids, ref_s = brute_force(x, ids, q, 10)
        assert res.ids.shape == (len(q), 10) and res.ids.dtype == np.int64
        self.assert_matches(res.ids, ref_ids)
        assert np.all(np.diff(res.scores, axis=1) <= 1e-6)  # sorted descending
        assert index.metric == "ip" and index.dim == x.shape[1] and len(index) == len(x)

    def test_single_query_vector_and_k_larger_than_catalogue(self, catalogue):
        x, ids, q = catalogue
        index = self.make_index().build(x[:30], ids[:30])
        res = index.search(q[0], 50)  # a [D] query is one query
        assert res.ids.shape == (1, 50)
        valid = res.ids[0][res.ids[0] != PAD_ID]
        assert sorted(valid.tolist()) == sorted(ids[:30].tolist())  # everything, then padding
        assert np.all(res.ids[0, 30:] == PAD_ID) and np.all(np.isneginf(res.scores[0, 30:]))

    def test_exclusions_match_brute_force(self, catalogue):
        x, ids, q = catalogue
        index = self.built(catalogue)
        first = index.search(q, 30).ids
        # each query excludes its own top hits (a user's seen items), different counts per query
        exclude = [first[r, : (r % 4) * 7] for r in range(len(q))]
        exclude[0] = np.array([], dtype=np.int64)
        exclude[1] = np.array([123456789], dtype=np.int64)  # unknown ids are harmless
        res = index.search(q, 10, exclude=exclude)
        ref_ids, _ = brute_force(x, ids, q, 10, exclude)
        self.assert_matches(res.ids, ref_ids)
        for r in range(len(q)):
            assert not np.isin(res.ids[r], exclude[r]).any()

    def test_exclusions_deepen_until_k_survive(self, catalogue):
        x, ids, q = catalogue
        index = self.make_index().build(x[:200], ids[:200])
        # exclude 190 of 200: only 10 can survive, and they must all be returned
        exclude = [ids[:190]] * 2
        res = index.search(q[:2], 10, exclude=exclude)
        for r in range(2):
            assert sorted(res.ids[r].tolist()) == sorted(ids[190:200].tolist())
        # exclude everything: all padding
        res = index.search(q[:1], 5, exclude=[ids[:200]])
        assert np.all(res.ids == PAD_ID)

    def test_allow_list_matches_brute_force(self, catalogue):
        x, ids, q = catalogue
        index = self.built(catalogue)
        rng = np.random.default_rng(5)
        wide = rng.choice(ids, 1200, replace=False)  # over-fetch path
        narrow = rng.choice(ids, 40, replace=False)  # small allow-list (scored exactly where the backend can)
        for allowed in (wide, narrow):
            res = index.search(q, 10, allow=allowed)
            keep = np.isin(ids, allowed)
            ref_ids, _ = brute_force(x[keep], ids[keep], q, 10)
            self.assert_matches(res.ids, ref_ids)

    def test_exact_subset_max_decides_when_an_allow_list_is_scored_exactly(self, catalogue, monkeypatch):
        """``exact_subset_max`` (the service's ``filter_exact_max``) is what decides: an allow-list of at most
        that many ids goes to the exact subset scoring, a larger one to the widened search; both equal brute
        force over the allowed ids."""
        x, ids, q = catalogue
        index = self.built(catalogue)
        asked: list[int] = []  # allow-list sizes sent to the exact subset scoring
        real = index._search_allowed_exactly

        def spy(query, k, allow, exclude):
            asked.append(int(allow.size))
            return real(query, k, allow, exclude)

        monkeypatch.setattr(index, "_search_allowed_exactly", spy)
        allowed = np.random.default_rng(7).choice(ids, 40, replace=False)
        keep = np.isin(ids, allowed)
        ref_ids, _ = brute_force(x[keep], ids[keep], q[:3], 10)
        for limit, exact in ((40, True), (39, False), (0, False), (10**9, True)):
            asked.clear()
            res = index.search(q[:3], 10, allow=allowed, exact_subset_max=limit)
            assert asked == ([40] * 3 if exact else []), limit
            self.assert_matches(res.ids, ref_ids)
        for bad in (-1, 2.5, True):
            with pytest.raises(ConfigError, match="exact_subset_max"):
                index.search(q[:1], 5, allow=allowed, exact_subset_max=bad)

    def test_allow_per_query_with_exclusions_states_the_shortfall(self, catalogue):
        x, ids, q = catalogue
        index = self.built(catalogue)
        narrow = np.random.default_rng(6).choice(ids, 40, replace=False)
        allow = [narrow if r % 2 else None for r in range(len(q))]
        allow[0] = np.append(narrow[:3], 123456789)  # 3 real ids + one unknown: only 3 can come back
        exclude = [narrow[30:33]] * len(q)
        res = index.search(q, 10, exclude=exclude, allow=allow)
        for r in range(len(q)):
            keep = ~np.isin(ids, exclude[r]) & (np.isin(ids, allow[r]) if allow[r] is not None else True)
            ref_ids, _ = brute_force(x[keep], ids[keep], q[r : r + 1], 10)
            self.assert_matches(res.ids[r : r + 1], ref_ids)
        assert shortfall(res, 10).tolist() == [7] + [0] * (len(q) - 1)
        with pytest.raises(DataError, match="one id array"):
            index.search(q[:3], 5, allow=[narrow])

    def test_exclude_needs_one_array_per_query(self, catalogue):
        index = self.built(catalogue)
        with pytest.raises(DataError, match="one array per query"):
            index.search(catalogue[2][:3], 5, exclude=[np.array([1])])

    def test_bad_input_is_a_data_error(self, catalogue):
        x, ids, q = catalogue
        index = self.built(catalogue)
        with pytest.raises(DataError, match="dimension"):
            index.search(q[:, :8], 5)
        with pytest.raises(DataError, match="duplicates"):
            self.make_index().build(x[:3], np.array([1, 1, 2]))
        with pytest.raises(DataError, match="already in the index"):
            index.add(x[:1], ids[:1])

    # ------------------------------------------------------------------ add / remove
    def test_add_and_remove_by_id(self, catalogue):
        x, ids, q = catalogue
        index = self.make_index().build(x[:1500], ids[:1500])
        index.add(x[1500:], ids[1500:])
        assert len(index) == len(x)
        gone = index.search(q, 3).ids[:, 0]  # every query's best hit
        assert index.remove(np.unique(gone)) == len(np.unique(gone))
        assert index.remove(np.array([987654321])) == 0
        assert len(index) == len(x) - len(np.unique(gone))
        res = index.search(q, 10)
        keep = ~np.isin(ids, gone)
        ref_ids, _ = brute_force(x[keep], ids[keep], q, 10)
        self.assert_matches(res.ids, ref_ids)
        assert not np.isin(res.ids, gone).any()

    # ------------------------------------------------------------------ storage
    def test_save_load_round_trip_gives_identical_results(self, catalogue, tmp_path):
        x, ids, q = catalogue
        index = self.built(catalogue)
        index.remove(ids[:5])
        exclude = [ids[5:10]] * len(q)
        before = index.search(q, 10, exclude=exclude)
        index.save(tmp_path / "idx", model_fingerprint="abc")
        loaded = load_index(tmp_path / "idx", expected_fingerprint="abc")
        assert type(loaded) is type(index) and len(loaded) == len(index)
        assert loaded.search_params == index.search_params and loaded.is_exact == index.is_exact
        after = loaded.search(q, 10, exclude=exclude)
        np.testing.assert_array_equal(after.ids, before.ids)
        np.testing.assert_array_equal(after.scores, before.scores)
        assert type(index).load(tmp_path / "idx").model_fingerprint == "abc"

    def test_corrupted_or_truncated_file_is_refused(self, catalogue, tmp_path):
        index = self.built(catalogue)
        index.save(tmp_path / "idx")
        data_file = next(p for p in sorted((tmp_path / "idx").iterdir()) if p.name != "meta.json" and p.name != "ids.npy")
        raw = bytearray(data_file.read_bytes())
        raw[len(raw) // 2] ^= 0x01  # one flipped bit
        data_file.write_bytes(bytes(raw))
        with pytest.raises(IntegrityError, match=data_file.name):
            load_index(tmp_path / "idx")
        index.save(tmp_path / "idx2")
        ids_file = tmp_path / "idx2" / "ids.npy"
        ids_file.write_bytes(ids_file.read_bytes()[:-8])  # truncated
        with pytest.raises(IntegrityError, match="ids.npy"):
            load_index(tmp_path / "idx2")

    def test_edited_meta_is_refused(self, catalogue, tmp_path):
        index = self.built(catalogue)
        index.save(tmp_path / "idx")
        meta = tmp_path / "idx" / "meta.json"
        meta.write_text(meta.read_text().replace('"count": ', '"count": 1'))
        with pytest.raises(IntegrityError, match="meta.json"):
            load_index(tmp_path / "idx")
        with pytest.raises(NotFoundError):
            load_index(tmp_path / "missing")

    def test_fingerprint_mismatch_is_refused(self, catalogue, tmp_path):
        index = self.built(catalogue)
        index.save(tmp_path / "idx", model_fingerprint="model-A")
        with pytest.raises(IntegrityError, match="built for model model-A, run has model-B.*twotower index build"):
            load_index(tmp_path / "idx", expected_fingerprint="model-B")
        assert load_index(tmp_path / "idx").model_fingerprint == "model-A"  # no expectation: loads

    def test_failed_save_leaves_the_old_index(self, catalogue, tmp_path, monkeypatch):
        x, ids, q = catalogue
        old = self.make_index().build(x[:500], ids[:500])
        old.save(tmp_path / "idx")
        expected = old.search(q, 5)
        new = self.built(catalogue)

        def fail_midway(target, arr, **kw):  # writes half a file, then dies
            with open(target, "wb") as fh:
                fh.write(b"\x93NUMPY half")
            raise OSError("disk full")

        monkeypatch.setattr(np, "save", fail_midway)
        with pytest.raises(OSError, match="disk full"):
            new.save(tmp_path / "idx")
        monkeypatch.undo()
        loaded = load_index(tmp_path / "idx")
        assert len(loaded) == 500
        np.testing.assert_array_equal(loaded.search(q, 5).ids, expected.ids)
        assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temp dirs left behind
