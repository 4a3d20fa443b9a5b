"""Polars' allocator: importing the package sets its options before polars loads, unless the user set their own."""

import os
import subprocess
import sys

from eval_pipeline.allocator import POLARS_ALLOCATOR_OPTIONS, POLARS_ALLOCATOR_VARIABLE


def _run(code: str, value: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != POLARS_ALLOCATOR_VARIABLE}
    if value is not None:
        env[POLARS_ALLOCATOR_VARIABLE] = value
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


# The variable right after the imports named, then once polars loaded: polars writes its own defaults into it at
# import and appends what it found there, so the later options win.
_OPTIONS = "import os\nimport {first}\nprint(os.environ.get('{name}'))\nimport polars\nprint(os.environ.get('{name}'))"
POLARS_DEFAULTS = "dirty_decay_ms:500,muzzy_decay_ms:1000"


def _options(first: str, value: str | None = None) -> list[str]:
    return _run(_OPTIONS.format(first=first, name=POLARS_ALLOCATOR_VARIABLE), value).stdout.split()


def test_importing_the_package_first_sets_the_options_polars_then_appends_to_its_defaults():
    assert POLARS_ALLOCATOR_OPTIONS == "narenas:2,dirty_decay_ms:2000,muzzy_decay_ms:0"
    assert _options("eval_pipeline") == [POLARS_ALLOCATOR_OPTIONS, f"{POLARS_DEFAULTS},{POLARS_ALLOCATOR_OPTIONS}"]


def test_options_the_user_set_are_kept():
    assert _options("eval_pipeline", "narenas:4") == ["narenas:4", f"{POLARS_DEFAULTS},narenas:4"]


def test_polars_loaded_before_the_package_keeps_its_defaults():
    assert _options("polars, eval_pipeline") == [POLARS_DEFAULTS, POLARS_DEFAULTS]


def test_polars_jemalloc_reads_options_set_in_the_process_before_it_loads():
    # what the package relies on: the variable set at run time, not at process start, reaches polars' jemalloc
    code = (
        f"import os; os.environ['{POLARS_ALLOCATOR_VARIABLE}'] = 'stats_print:true,narenas:3,dirty_decay_ms:5000'\n"
        "import polars as pl; pl.DataFrame({'a': range(100_000)}).sum()"
    )
    stats = _run(code).stderr
    assert "opt.narenas: 3" in stats
    assert "opt.dirty_decay_ms: 5000" in stats
