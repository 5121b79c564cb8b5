

def test_flush_denormals_is_scoped() -> None:
    """Training flushes subnormals for speed, and leaves IEEE behaviour to the code that runs after it."""
    import numpy as np
    import torch

    from twotower.utils.runtime import flush_denormals

    tiny = 1e-40  # subnormal in float32
    with flush_denormals():
        assert float(torch.tensor(tiny) * 1.0) == 0.0
    assert float(torch.tensor(tiny) * 1.0) != 0.0
    assert np.float32(tiny) * np.float32(1.0) != 0.0
    try:
        with flush_denormals():
            raise KeyError("x")
    except KeyError:
        pass
    assert float(torch.tensor(tiny) * 1.0) != 0.0


def test_flush_denormals_puts_back_a_callers_flush() -> None:
    """A caller that flushes subnormals itself (``torch.set_flush_denormal(True)``) still flushes them after a
    training epoch, and after one that raised: the block ended with IEEE behaviour whatever the caller had."""
    import torch

    from twotower.utils.runtime import flush_denormals

    tiny = 1e-40  # subnormal in float32
    torch.set_flush_denormal(True)
    try:
        with flush_denormals():
            pass
        assert float(torch.tensor(tiny) * 1.0) == 0.0
        try:
            with flush_denormals():
                raise KeyError("x")
        except KeyError:
            pass
        assert float(torch.tensor(tiny) * 1.0) == 0.0
    finally:
        torch.set_flush_denormal(False)
    assert float(torch.tensor(tiny) * 1.0) != 0.0


def test_malloc_thresholds_come_back_as_the_process_started_with_them(monkeypatch) -> None:
    """After a training, glibc's thresholds are the ones it read at start (tunables, else the MALLOC_*_ variables),
    else where its dynamic rule settles (32 MiB): glibc has no getter for what they were."""
    from twotower.utils.runtime import GLIBC_MMAP_THRESHOLD_MAX, _startup_malloc_threshold

    def mmap() -> int:
        return _startup_malloc_threshold("mmap_threshold", "MALLOC_MMAP_THRESHOLD_", GLIBC_MMAP_THRESHOLD_MAX)

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert mmap() == GLIBC_MMAP_THRESHOLD_MAX == 32 * 2**20
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert mmap() == 65536
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1:glibc.malloc.mmap_threshold=0x100000")
    assert mmap() == 1 << 20
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=lots")
    assert mmap() == 65536


def test_after_a_training_a_middle_sized_array_comes_from_the_heap(monkeypatch) -> None:
    """Put back at 128 KiB with glibc's dynamic rule off, every array over 128 KiB was an mmap of its own after a
    train_run (a 1 MiB array allocated and freed 3,000 times: 12x slower; the test suite 666 -> 1,207 s): after
    the training's thresholds are released, a freed 1 MiB array is reused from the heap, not mapped again."""
    import ctypes

    import numpy as np
    import pytest

    from twotower.utils.runtime import _glibc, release_freed_memory, retain_freed_memory

    libc = _glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        pytest.skip("glibc >= 2.33 (mallinfo2) needed to count mapped blocks")
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]

    libc.mallinfo2.restype = MallInfo2
    assert retain_freed_memory() and release_freed_memory()
    mapped = libc.mallinfo2().hblks  # blocks mmapped on their own, outside the heap
    block = np.ones(2**20 // 8)  # 1 MiB
    assert libc.mallinfo2().hblks == mapped, "a 1 MiB array was mapped on its own after the release"
    del block  # (an array over 32 MiB is mapped unless a free block of the heap holds it: not asserted here)
