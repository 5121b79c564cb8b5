

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
