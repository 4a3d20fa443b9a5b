"""Arrow's pool: jemalloc once the definitions are built, unless the environment names a pool."""

import os
import subprocess
import sys

import pytest

_PROBE = "import eval_pipeline.defs.build, pyarrow as pa; print(pa.default_memory_pool().backend_name)"


def _pool_after_import(env_pool: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env_pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = env_pool
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_building_the_definitions_makes_jemalloc_arrows_pool():
    # the Linux wheels carry jemalloc; a wheel without it gets the system allocator
    import pyarrow as pa

    try:
        expected = pa.jemalloc_memory_pool().backend_name
    except NotImplementedError:
        expected = "system"
    assert _pool_after_import(None) == expected


@pytest.mark.parametrize("pool", ["mimalloc", "system"])
def test_a_pool_named_in_the_environment_is_kept(pool):
    assert _pool_after_import(pool) == pool
