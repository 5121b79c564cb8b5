

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
    else its own 128 KiB: glibc has no getter for what they were."""
    from twotower.utils.runtime import GLIBC_MALLOC_THRESHOLD, _startup_malloc_threshold

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert _startup_malloc_threshold("mmap_threshold", "MALLOC_MMAP_THRESHOLD_") == GLIBC_MALLOC_THRESHOLD == 128 * 1024
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert _startup_malloc_threshold("mmap_threshold", "MALLOC_MMAP_THRESHOLD_") == 65536
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1:glibc.malloc.mmap_threshold=0x100000")
    assert _startup_malloc_threshold("mmap_threshold", "MALLOC_MMAP_THRESHOLD_") == 1 << 20
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=lots")
    assert _startup_malloc_threshold("mmap_threshold", "MALLOC_MMAP_THRESHOLD_") == 65536
