"""Each detector on text as a user writes it (through scan_text), and the values it must leave alone."""

from __future__ import annotations

import pytest

from eval_pipeline.deid.detectors import mask
from eval_pipeline.deid.identifiers import iban_valid, luhn_valid
from eval_pipeline.deid.names import name_variants
from eval_pipeline.deid.scan import scan_text
from eval_pipeline_harness.deid_compare import iban_check_digits, luhn_complete


def _types(text: str) -> list[str]:
    return scan_text(text, "t")["entity_type"].to_list()


@pytest.mark.parametrize(
    ("text", "entity_type"),
    [
        ("write to jane.doe@example.com today", "EMAIL"),
        ("write to Jane_Doe+tickets@mail.example.co.uk.", "EMAIL"),
        ("call +1 415-555-0132 now", "PHONE"),
        ("call (212) 555-0199 now", "PHONE"),
        ("call 415.555.0132 now", "PHONE"),
        ("call 1-800-555-0199 now", "PHONE"),
        ("call +44 20 7946 0958 now", "PHONE"),
        ("call 020 7946 0958 now", "PHONE"),
        ("appelez le 01 42 68 53 00", "PHONE"),
        ('{"phone":"4155550132"}', "PHONE"),
        ("card 4111 1111 1111 1111 on file", "CARD"),
        ("card 5555-5555-5555-4444 on file", "CARD"),
        ("amex 378282246310005 on file", "CARD"),
        ("card 2221 0000 0000 0009 on file", "CARD"),
        ("IBAN GB82 WEST 1234 5698 7654 32 please", "IBAN"),
        ("IBAN DE89370400440532013000 please", "IBAN"),
        ("SSN 078-05-1120 verified", "NATIONAL_ID"),
        ("social security number: 078051120", "NATIONAL_ID"),
        ("ITIN 912-70-1234 on the form", "NATIONAL_ID"),
        ("NINO AB 12 34 56 C on the form", "NATIONAL_ID"),
        ("from 203.0.113.77 at noon", "IP"),
        ("from 2001:db8:85a3::8a2e:370:7334 at noon", "IP"),
        ("from fe80::1ff:fe23:4567:890a at noon", "IP"),
        ("key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w leaked", "API_KEY"),
        ("key AKIAIOSFODNN7EXAMPLE leaked", "API_KEY"),
        ("key ghp_1234567890abcdefghijklmnopqrstuvwxyzAB leaked", "API_KEY"),
        ("key xoxb-123456789012-abcdefABCDEF leaked", "API_KEY"),
        ("key sk_live_4eC39HqLyjWDarjtT1zdp7dc leaked", "API_KEY"),
        ("Authorization: Bearer 9f8e7d6c5b4a39281706aBcD", "SECRET"),
        ("password=hunter2-Secret in config", "SECRET"),
        ('{"client_secret":"Zx9-77-AbCdEf"}', "SECRET"),
        (
            "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
            "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "SECRET",
        ),
        ("see https://admin:s3cretPass@api.example.com/refunds.", "URL"),
        ("see https://files.example.com/r.pdf?id=7&token=abc123XYZ789 now", "URL"),
    ],
)
def test_each_detector_finds_its_value_exactly_once(text, entity_type):
    assert _types(text) == [entity_type]


@pytest.mark.parametrize(
    "text",
    [
        "order 88131 shipped",
        "SKU-88-B and SKU-12-X",
        "error ERR-4412 again",
        "clock 2026-03-01T12:00:00Z",
        "refund 49.00 USD, then 1,249.99",
        "doc policy/refunds-2025 and faq/contact",
        "already tokenized <EMAIL_3f9a2c1d04b5e6f7> and <PERSON_0123abcd45678901>",
        "at 12:30:45 sharp",
        "release v1.2.3 and 10.0",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "card 4111 1111 1111 1112 declined",  # fails Luhn
        "IBAN GB83 WEST 1234 5698 7654 32 rejected",  # fails mod 97
        "number 000-12-3456 is no SSN",  # area 000 is never issued
        "C++ std::vector and a::b",
        "pip install sk-learn-tutorials",
        "unix time 1772366400 and 17 items",
        "ticket T-1042, refund R-552, customer c-771",
        'json {"password":"<SECRET_3f9a2c1d04b5e6f7>","token":"<API_KEY_0123456789012345>"}',
        "tokens: 312, input_tokens=1900",
        "at 01.02.2024 14:30 and on 05/20/2024 12 items",
        'client = OpenAI(api_key=os.environ["OPENAI_API_KEY"]); token=$GITHUB_TOKEN; password: SMTP_PASSWORD',
    ],
)
def test_ordinary_values_are_not_flagged(text):
    assert _types(text) == []


def test_checksums():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert luhn_complete("411111111111111") == "4111111111111111"
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB83WEST12345698765432")
    assert not iban_valid("GB82WEST1234569876543")  # one character short of Britain's 22
    # DE89 3704 0044 0532 0130 00 is the textbook German IBAN: check digits 89 for that BBAN.
    assert iban_check_digits("DE", "370400440532013000") == "89"


def test_mask_never_shows_the_whole_value():
    assert mask("jane@x.com") == "ja******om"  # 10 characters: 2 + 6 masked + 2
    assert mask("Mia Li") == "M****i"  # 6 characters: 1 + 4 masked + 1
    assert mask("Li") == "**"


def test_iban_running_into_a_following_word_is_trimmed_to_its_length():
    # The regex also swallows the group `SENT`; the country length (GB: 22) trims the value back.
    found = scan_text("IBAN GB82 WEST 1234 5698 7654 32 SENT", "t")
    assert found.select("entity_type", "masked_excerpt").rows() == [("IBAN", "GB" + "*" * 23 + "32")]


def test_a_known_name_glued_to_another_value_does_not_hide_it():
    names = ["Ref", "Mia"]
    found = scan_text("Ref-4111 1111 1111 1111 and Mia-sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w, Mia's call", "t", names)
    # `Ref` and both `Mia` are words of known names; the card and the key after the hyphens are still found.
    assert sorted(found["entity_type"].to_list()) == ["API_KEY", "CARD", "PERSON", "PERSON", "PERSON"]


@pytest.mark.parametrize(
    ("text", "types"),
    [
        # An underscore delimits values in ids and file names; a value glued to the token of the one before it is
        # found too (the second pass of deidentify, covered in test_deidentify).
        ("ip_203.0.113.77 and acct_4111111111111111_old", ["CARD", "IP"]),
        # A card followed by its expiry, phone numbers followed by a card: the digit groups run on, and the
        # classification cuts them back and looks at the rest of the match.
        ("card 4111 1111 1111 1111 12/25", ["CARD"]),
        ("call +1 415-555-0132 4111 1111 1111 1111", ["CARD", "PHONE"]),
        ("call +44 20 7946 0958 4111111111111111", ["CARD", "PHONE"]),
        ("write to...jane@x.com", ["EMAIL"]),
    ],
)
def test_values_glued_to_their_neighbours_are_found(text, types):
    assert sorted(_types(text)) == types


def test_name_words_and_their_spellings():
    assert name_variants("Mia O'Brien") == {"Mia", "MIA", "O'Brien", "O'BRIEN", "Brien", "BRIEN"}
    assert name_variants("Dr. Jean-Luc Picard") == {"Jean", "JEAN", "Luc", "LUC", "Picard", "PICARD"}
    names = sorted(name_variants("Mia O'Brien") | name_variants("Jean-Luc"))
    found = scan_text("Dear Mia O'Brien, Mia's order for Jean-Luc; I'm Miami-based", "t", names)
    # Mia, O'Brien, Mia (of Mia's), Jean, Luc; not `I'm`, not `Miami`.
    assert found["masked_excerpt"].to_list() == ["***", "O*****n", "***", "****", "***"]
