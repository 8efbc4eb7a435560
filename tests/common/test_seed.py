"""The seed of the randomised Python tests, the convention of tests/common/test_seed.hpp: every test
that draws random inputs takes its seed from here, prints it, and can be repeated with the same
inputs:

    [   seed   ] name seed N (repeat with SPARSERING_TEST_SEED=N)

The run seed is SPARSERING_TEST_SEED if set, else fresh from the OS; each test mixes it with its
own name. A test whose random fixture is fixed data passes its constant as `fixed`: it is used
unless SPARSERING_TEST_SEED is set.

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from test_seed import seed_for, numpy_rng
"""
import os
import zlib

_RUN_SEED = None


def _env_seed():
    value = os.environ.get("SPARSERING_TEST_SEED", "")
    if not value:
        return None
    try:
        seed = int(value)
    except ValueError:
        raise ValueError(f"SPARSERING_TEST_SEED must be an unsigned integer, got {value!r}") from None
    if seed < 0:
        raise ValueError(f"SPARSERING_TEST_SEED must be an unsigned integer, got {value!r}")
    return seed


def run_seed():
    """SPARSERING_TEST_SEED if set, else a fresh 63-bit seed, the same for the whole process."""
    global _RUN_SEED
    if _RUN_SEED is None:
        env = _env_seed()
        _RUN_SEED = env if env is not None else int.from_bytes(os.urandom(8), "little") >> 1
    return _RUN_SEED


def seed_for(name, fixed=None):
    """The seed of test `name`, printed. Without `fixed`: the run seed mixed with the name. With
    `fixed`: `fixed` itself unless SPARSERING_TEST_SEED is set, then a mix of both. Returns a
    non-negative int below 2**63."""
    env = _env_seed()
    if fixed is not None and env is None:
        print(f"[   seed   ] {name} seed {fixed} (fixed; SPARSERING_TEST_SEED=N draws other inputs)", flush=True)
        return fixed
    seed = run_seed()
    print(f"[   seed   ] {name} seed {seed} (repeat with SPARSERING_TEST_SEED={seed})", flush=True)
    salt = fixed if fixed is not None else zlib.crc32(name.encode())
    return (seed * 0x9E3779B97F4A7C15 + salt * 0xBF58476D1CE4E5B9 + zlib.crc32(name.encode())) % (1 << 63)


def numpy_rng(name, fixed=None):
    """numpy Generator seeded by seed_for(name, fixed)."""
    import numpy as np
    return np.random.default_rng(seed_for(name, fixed))
