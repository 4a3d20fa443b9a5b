"""Text that looks like personal data and is not, refused by both detectors.

Dates are never national ids, and identifiers made of ordinary words (a run id `token-run-1`) are no secrets.
"""

from __future__ import annotations

import re

# A calendar date in a common written format: year first (`1989-12-13`, `1989/12/13`, `1989.12.13`) or day/month
# first (`13.12.1989`, `12/13/1989`, `13-12-89`), the same separator twice, not inside a longer digit run.
_DATE = re.compile(
    r"(?<![0-9])(?:(?P<y>(?:1[89]|20)[0-9]{2})(?P<s1>[-/.])(?P<m>[0-9]{1,2})(?P=s1)(?P<d>[0-9]{1,2})"
    r"|(?P<a>[0-9]{1,2})(?P<s2>[-/.])(?P<b>[0-9]{1,2})(?P=s2)(?P<y2>(?:1[89]|20)?[0-9]{2}))(?![0-9])"
)
# Words that name a secret; an identifier holding one as a part names something (a run, a test), it is no secret.
_SECRET_WORDS = frozenset({"token", "tokens", "passwd", "password", "passwords", "pwd", "secret", "secrets", "key",
                           "keys", "apikey", "auth", "bearer", "credential", "credentials"})  # fmt: skip
# A lowercase identifier of two or more parts joined by `-`, `_` or `.` (`token-run-1`, `passwd_reset_eval`).
_SLUG = re.compile(r"[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)+")
_PARTS = re.compile(r"[-_.]")


def _valid_date(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31


def holds_date(text: str) -> bool:
    """True when `text` holds a calendar date written with separators (year, month and day in a valid range)."""
    for match in _DATE.finditer(text):
        if match.group("y") is not None:
            if _valid_date(int(match.group("m")), int(match.group("d"))):
                return True
        else:
            a, b = int(match.group("a")), int(match.group("b"))
            if _valid_date(b, a) or _valid_date(a, b):  # day-month or month-day
                return True
    return False


def identifier_of_words(value: str) -> bool:
    """True when `value` is a lowercase identifier that starts with a word naming a secret (`token-run-1`).

    Only the first part counts: a run or test is named after the word (`passwd_reset_eval`), while a password made of
    words (`my-secret-pass`) merely contains one and stays a secret."""
    return _SLUG.fullmatch(value) is not None and _PARTS.split(value, maxsplit=1)[0] in _SECRET_WORDS
