"""Shared test fixtures."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

# How hard the property-based tests search, per profile rather than per test: `dev` (the default, the loop while
# working) and `ci` (what scripts/test.sh and CI run: `--hypothesis-profile=ci`). A test keeps its own health-check
# and deadline settings; only the number of examples is the profile's.
settings.register_profile("dev", max_examples=20, deadline=None)
settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
settings.load_profile("dev")

# Fixtures that tests of several package folders share (scoring/, judge/, trec/): registered once, here.
pytest_plugins = [
    "eval_pipeline_tests.fixtures.retrieval",  # rag record builders, trec_eval_dir
    "eval_pipeline_tests.fixtures.generation",  # rag_cases, context, corpus, ragchecker_outputs, the loopback judge
    "eval_pipeline_tests.fixtures.sample_runs",  # planted, sample_copy, scored: the bundled sample materialized once
]

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent


@pytest.fixture(scope="session")
def reference_data() -> Path:
    """Folder holding trec_eval/, ragchecker/ and tau_bench/ reference files."""
    configured = os.environ.get("EVAL_PIPELINE_REFERENCE_DATA")
    path = Path(configured) if configured else TESTS_DIR / "reference_data"
    if not (path / "trec_eval").is_dir():
        pytest.skip(f"reference data not found at {path}")
    return path


@pytest.fixture(scope="session")
def sample_data() -> Path:
    """The committed sample data root."""
    return REPO_ROOT / "data"
