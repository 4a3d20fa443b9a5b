"""Key resolution and keyed tokens."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest

from eval_pipeline.deid import DEMO_KEY, KEY_ENV_VAR, DeidKeyError, Pseudonymizer, resolve_key

KEY = b"0123456789abcdef0123456789abcdef"


def test_key_comes_from_the_environment_variable():
    assert KEY_ENV_VAR == "EVAL_PIPELINE_DEID_KEY"
    assert resolve_key({KEY_ENV_VAR: "a-long-enough-secret-value"}) == b"a-long-enough-secret-value"
    # An explicit key wins over demo mode.
    assert resolve_key({KEY_ENV_VAR: "a-long-enough-secret-value"}, demo=True) == b"a-long-enough-secret-value"


def test_no_key_refuses_unless_demo_mode_is_chosen():
    with pytest.raises(DeidKeyError) as excinfo:
        resolve_key({})
    message = str(excinfo.value)
    assert "EVAL_PIPELINE_DEID_KEY" in message and "demo" in message and "--deid-demo" in message
    assert resolve_key({}, demo=True) == DEMO_KEY == b"eval-pipeline-local-demo-key--not-a-secret"
    # An empty variable is no key.
    with pytest.raises(DeidKeyError):
        resolve_key({KEY_ENV_VAR: ""})


def test_short_key_is_refused():
    with pytest.raises(DeidKeyError, match="only 6 bytes"):
        resolve_key({KEY_ENV_VAR: "secret"})


def test_token_is_hmac_sha256_of_type_and_normal_form():
    token = Pseudonymizer(KEY).token("EMAIL", "Jane.Doe@Example.com")
    digest = hmac.new(KEY, b"EMAIL\x1fjane.doe@example.com", hashlib.sha256).hexdigest()
    # 16 hex characters are 64 bits: at 100k distinct values of one type a collision has odds of about 3e-10.
    assert token == f"<EMAIL_{digest[:16]}>"
    assert re.fullmatch(r"<EMAIL_[0-9a-f]{16}>", token)
    assert Pseudonymizer(KEY, hex_chars=32).token("EMAIL", "jane.doe@example.com") == f"<EMAIL_{digest[:32]}>"


def test_tokens_shorter_than_64_bits_are_refused():
    with pytest.raises(ValueError, match="16..64"):
        Pseudonymizer(KEY, hex_chars=8)


def test_no_two_of_100k_distinct_values_share_a_token():
    pseudonymizer = Pseudonymizer(KEY)
    tokens = {pseudonymizer.token("EMAIL", f"user{i}@example.com") for i in range(100_000)}
    assert len(tokens) == 100_000


@pytest.mark.parametrize(
    ("entity_type", "spellings"),
    [
        ("EMAIL", ["jane.doe@example.com", "JANE.DOE@EXAMPLE.COM"]),
        ("PHONE", ["+1 415-555-0132", "(415) 555-0132", "415.555.0132", "1-415-555-0132"]),
        ("CARD", ["4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111"]),
        ("IBAN", ["GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765432"]),
        ("NATIONAL_ID", ["078-05-1120", "078 05 1120", "078051120"]),
        ("IP", ["2001:db8:0:0:0:0:0:1", "2001:db8::1"]),
        ("PERSON", ["Mia Li", "MIA  LI", "mia li"]),
    ],
)
def test_spellings_of_one_value_share_a_token(entity_type, spellings):
    pseudonymizer = Pseudonymizer(KEY)
    assert len({pseudonymizer.token(entity_type, s) for s in spellings}) == 1


def test_types_and_keys_separate_tokens():
    a, b = Pseudonymizer(KEY), Pseudonymizer(DEMO_KEY)
    assert a.token("SECRET", "hunter2-Secret") != a.token("API_KEY", "hunter2-Secret")
    assert a.token("EMAIL", "jane@x.com") != b.token("EMAIL", "jane@x.com")
    assert a.token("EMAIL", "jane@x.com") != a.token("EMAIL", "john@x.com")
    with pytest.raises(ValueError, match="unknown entity type"):
        a.token("ADDRESS", "1 Main St")
    with pytest.raises(DeidKeyError):
        Pseudonymizer(b"")
