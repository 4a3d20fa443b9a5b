"""Judge profiles: the YAML contract, the digest that versions verdicts, and the threshold fit by hand."""

from __future__ import annotations

import numpy as np
import pytest

from eval_pipeline.judge import JudgeConfigError, make_judge
from eval_pipeline.judge.profile import JudgeProfile, default_profile, fit_support_threshold, resolve_profile


def test_a_profile_round_trips_and_its_digest_ignores_provenance():
    profile = JudgeProfile(
        backend="local", support_threshold=0.6, contradiction_overlap=0.8, source="x", fitted={"n": 3}
    )
    again = JudgeProfile.from_yaml(profile.to_yaml(), "again")
    assert (again.backend, again.support_threshold, again.contradiction_overlap, again.fitted) == (
        "local",
        0.6,
        0.8,
        {"n": 3},
    )
    assert (
        again.digest
        == profile.digest
        == JudgeProfile(backend="local", support_threshold=0.6, contradiction_overlap=0.8).digest
    )
    assert JudgeProfile(support_threshold=0.61).digest != profile.digest
    assert profile.to_yaml().startswith(f"# eval_pipeline judge profile (digest {profile.digest})")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("backend: local\nthresholds: {support: 0.7}\nextra: 1\n", "unknown key"),
        ("backend: local\nthresholds: {support: 0.7, other: 1}\n", "unknown threshold"),
        ("backend: local\nthresholds: {}\n", "thresholds.support is required"),
        ("backend: local\nthresholds: {support: yes}\n", "must be a number"),
        ("backend: local\nthresholds: {support: 0.4}\n", r"must be in \(0.5, 1\]"),
        ("backend: openai\nthresholds: {support: 0.7}\n", "scoring backend"),
        ("backend: local\nthresholds: {support: 0.7}\nprofile_version: 9\n", "profile_version"),
        ("- a list\n", "a mapping"),
        ("backend: [local\n", "not valid YAML"),
    ],
)
def test_a_bad_profile_is_a_clear_error(text, message):
    with pytest.raises(JudgeConfigError, match=message):
        JudgeProfile.from_yaml(text, "p.yaml")


def test_a_profile_of_another_backend_is_refused(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text(JudgeProfile(backend="model", support_threshold=0.4).to_yaml())
    with pytest.raises(JudgeConfigError, match="is for the model backend, not local"):
        make_judge("local", profile=str(path))
    with pytest.raises(JudgeConfigError, match="a judge profile applies to the local and model backends"):
        make_judge("openai", profile=str(path), model="m")
    assert resolve_profile("local", None) == default_profile("local")


def test_the_fit_maximises_mean_balanced_accuracy_in_the_middle_of_the_best_interval():
    # Set A: grounded at 0.8 and 0.9, not at 0.6 and 0.85; set B: grounded at 0.7, 0.95, not at 0.55.
    # Thresholds that matter: (0.55, 0.6] → A 0.5, B 1.0; (0.6, 0.7] → A 0.75, B 1.0; (0.7, 0.8] → A 0.75, B 0.75;
    # the best mean is 0.875 for a threshold in (0.6, 0.7]: its middle is 0.65.
    fit = fit_support_threshold(
        [
            ("A", np.array([0.6, 0.8, 0.85, 0.9]), np.array([False, True, False, True])),
            ("B", np.array([0.55, 0.7, 0.95]), np.array([False, True, True])),
        ],
        n_boot=200,
        seed=1,
    )
    assert fit.threshold == 0.65 and fit.balanced_accuracy == 0.875
    assert [p["balanced_accuracy"] for p in fit.per_set] == [0.75, 1.0]
    assert fit.ci_low <= fit.balanced_accuracy <= fit.ci_high
    same = fit_support_threshold(
        [
            ("A", np.array([0.6, 0.8, 0.85, 0.9]), np.array([False, True, False, True])),
            ("B", np.array([0.55, 0.7, 0.95]), np.array([False, True, True])),
        ],
        n_boot=200,
        seed=1,
    )
    assert (same.ci_low, same.ci_high) == (fit.ci_low, fit.ci_high)
    with pytest.raises(ValueError, match="only one class"):
        fit_support_threshold([("A", np.array([0.6, 0.9]), np.array([True, True]))])
