"""Detectors of personal data: regex bodies shared by polars (Rust regex) and Python, plus checksum validators.

The hot path runs one combined regex over whole columns in polars; Python only classifies the unique candidate
matches here: which detector matched, whether its checksum holds, and which part of the match is the value.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import phonenumbers
from stdnum.br import cpf as _br_cpf
from stdnum.de import idnr as _de_idnr
from stdnum.es import dni as _es_dni
from stdnum.es import nie as _es_nie
from stdnum.fr import nir as _fr_nir
from stdnum.in_ import aadhaar as _in_aadhaar
from stdnum.it import codicefiscale as _it_cf
from stdnum.nl import bsn as _nl_bsn
from stdnum.us import itin as _us_itin

from eval_pipeline.deid.folding import fold_text
from eval_pipeline.deid.lookalikes import holds_date, identifier_of_words

# Entity types; a token is `<TYPE_hex>`.
EMAIL = "EMAIL"
PHONE = "PHONE"
CARD = "CARD"
IBAN = "IBAN"
NATIONAL_ID = "NATIONAL_ID"
IP = "IP"
API_KEY = "API_KEY"
SECRET = "SECRET"
URL = "URL"
PERSON = "PERSON"
ENTITY_TYPES = (EMAIL, PHONE, CARD, IBAN, NATIONAL_ID, IP, API_KEY, SECRET, URL, PERSON)

TOKEN_PATTERN = r"<(?:EMAIL|PHONE|CARD|IBAN|NATIONAL_ID|IP|API_KEY|SECRET|URL|PERSON)_[0-9a-f]{8,64}>"
TOKEN_RE = re.compile(TOKEN_PATTERN)
# A token as an HTML report writes it (`&lt;EMAIL_…&gt;`): scanned whole as well, so its hex is never read as digits.
ESCAPED_TOKEN_PATTERN = TOKEN_PATTERN.replace("<", "&lt;").replace(">", "&gt;")

# `{B}` is a word boundary: ASCII in Rust so the lazy DFA never falls back on non-ASCII text, Unicode in Python
# (which only ever sees the isolated match, so the two agree on every body below: all of them are ASCII).
_RUST_B = r"(?-u:\b)"
_PY_B = r"\b"
# `{U}` inside a character class: letters, marks and digits of every script (an e-mail's local part or domain may be
# `josé.garcía@ejemplo.es`). Python only fullmatches what Rust matched, so any non-ASCII character will do there.
_RUST_LETTERS = r"\p{L}\p{M}\p{Nd}"
_PY_LETTERS = "\x80-\U0010ffff"
# `{T}`: a top-level domain holding a non-ASCII letter (`.españa`, `.рф`), as the first alternative of a TLD.
_RUST_UNICODE_TLD = r"[A-Za-z]{0,23}[\p{L}\p{M}&&[^\x00-\x7f]][A-Za-z\p{L}\p{M}\p{Nd}]{0,23}|"
_PY_UNICODE_TLD = "[A-Za-z]{0,23}[\x80-\U0010ffff][A-Za-z\x80-\U0010ffff]{0,23}|"
# In the column scan an underscore also delimits a value (`ip_203.0.113.7`, `card_4111…_old`): `\b` would refuse
# it, so the regex takes the underscore into the match and classification sets it aside again.
_RUST_EDGE = rf"(?:{_RUST_B}|_)"
# A JSON string escape (`\n`, `\t`, ...) glued to a value: the value starts after it, and the escape is kept.
_ESCAPE = r"\\[nrtbf]"
# Characters a value may never span: JSON string delimiters and escapes, whitespace, angle brackets (tokens).
_STOP = "\\s\"'<>\\\\"
# Separator between a context keyword and its value: plain `key: v`, `key=v`, or JSON `"key":"v"`.
_KV_SEP = '"?[ \\t]*[:=][ \\t]*"?'
# Phone and SSN keywords are also written without a colon (`SSN 078051120`, `phone +1 …`).
_KV_SEP_LOOSE = '"?[ \\t]*[:=#]?[ \\t]*"?'
# A run of whitespace inside one value (`4111 1111\n1111 1111`, an IBAN split by a tab): real whitespace in plain
# text, JSON escapes `\n` `\t` `\r` in JSON text. Bounded so a value never spans a paragraph.
_WS = r"(?:(?:[ \t\r\n\f\v]|\\[nrt]){1,6})"
# Between the digit groups of a phone number: a dot, a hyphen or any whitespace run.
_PSEP = rf"(?:[.-]|{_WS})"
_WS_RE = re.compile(r"\s+|\\[nrt]")
# Keys and words that announce a national id or tax number (`"national_id":`, `Steuer-ID:`, `DNI`, `BSN`, ...).
_NATIONAL_ID_KEYS = (
    r"(?i:national_?id(?:entifier|_?number|_?no)?|national[ _]id(?:entity)?[ _]number|id_?number|identity_?number|"
    r"personal_?id(?:_?number)?|tax_?id(?:entification)?(?:_?number|_?no)?|tax[ _]id|tax_?number|tin|"
    r"steuer[_-]?id(?:_?nr)?|steuer[_-]?identifikationsnummer|identifikationsnummer|idnr|steuernummer|"
    r"dni|nie|nif|nir|insee|codice_?fiscale|bsn|burgerservicenummer|cpf|aadhaa?r(?:_?number|_?no)?|nino|"
    r"national_?insurance(?:_?number|_?no)?)"
)
_SECRET_KEYS = (
    r"(?i:password|passwd|passphrase|pwd|client_?secret|secret_?key|secret|api_?key|apikey|access_?key|"
    r"access_?token|auth_?token|refresh_?token|id_?token|private_?key|session_?token|token)"
)
_PHONE_KEYS = r"(?i:phone_?number|phone|telephone|tel|mobile|cell|fax|msisdn|whatsapp)"
_SSN_KEYS = r"(?i:ssn|social_?security_?number|social security number|social security no\.?|itin)"
_URL_SECRET_PARAMS = (
    r"(?i:access_token|id_token|refresh_token|token|api_key|apikey|key|secret|password|pwd|sig|signature|auth|"
    r"session|sessionid|x-amz-signature|x-amz-credential|x-goog-signature)"
)


@dataclass(frozen=True)
class Detector:
    """One regex detector: the body (with `{B}` boundaries and an optional `(?P<v>…)` value group) and its checks."""

    name: str
    entity_type: str
    body: str
    lead_boundary: bool
    # Returns a non-None value when the matched text is the entity, None when a checksum or rule fails.
    validate: Callable[[str], str | None]
    # A context detector's match holds a keyword; only group `v` is the value, classified by the value detectors first.
    context: bool = False
    # Characters trimmed off the end of a match (trailing punctuation after a URL, for instance).
    trim: str = ""
    # Digit groups may run on past the value (`4111 1111 1111 1111 12/25`, a phone before a card): when the whole
    # match fails, shorter prefixes cut at a separator are tried, longest first.
    shrink: bool = False
    # Regions (ISO 3166 codes) whose run locale turns this detector on; empty means always on. Bare digit ids
    # (an 11-digit Steuer-ID, a 9-digit BSN) have one or two check digits: alone they would flag order ids.
    regions: frozenset[str] = frozenset()
    # The validator also takes the run's regions (libphonenumber needs a region for national numbers).
    regional: bool = False

    def check(self, value: str, regions: frozenset[str]) -> str | None:
        """The validated value, or None; region-gated detectors refuse outside their regions."""
        if self.regions and not self.regions & regions:
            return None
        return self.validate(value, regions) if self.regional else self.validate(value)  # type: ignore[call-arg]

    def rust(self, unicode: bool = False) -> str:
        """This detector as one alternative of the combined Rust regex (value group made non-capturing); `unicode`
        lets e-mails hold letters of any script (three times slower, so only for values holding non-ASCII text)."""
        letters, tld = (_RUST_LETTERS, _RUST_UNICODE_TLD) if unicode else ("", "")
        body = self.body.replace("{B}", _RUST_EDGE).replace("{U}", letters).replace("{T}", tld)
        body = body.replace("(?P<v>", "(?:")
        lead = f"(?:{_ESCAPE}|{_RUST_EDGE})" if self.lead_boundary else f"(?:{_ESCAPE})?"
        return f"{lead}(?:{body})"

    def python(self) -> re.Pattern[str]:
        """This detector's body as a Python pattern for fullmatch on an isolated candidate."""
        return re.compile(self.body.replace("{B}", _PY_B).replace("{U}", _PY_LETTERS).replace("{T}", _PY_UNICODE_TLD))


# ---------------------------------------------------------------- validators


def luhn_valid(digits: str) -> bool:
    """True when a digit string passes the Luhn checksum."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def squeeze(value: str) -> str:
    """`value` without whitespace runs and JSON whitespace escapes (the compact form of a split value)."""
    return _WS_RE.sub("", value)


def _card(value: str) -> str | None:
    digits = squeeze(value).replace("-", "")
    if not digits.isdigit():
        return None
    # Issuer prefixes 2-6 (Mastercard 2-series, Amex/Diners 3, Visa 4, Mastercard 5, Discover/UnionPay 6).
    if 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits):
        return digits
    return None


# Lengths of IBANs per country (SWIFT IBAN registry).
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29,
    "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_valid(compact: str) -> bool:
    """True when an IBAN without spaces has its country's length and passes the ISO 13616 mod-97 check."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _iban_prefix(value: str) -> int | None:
    """Length of the valid IBAN at the start of `value` (the regex may run into a following group), else None."""
    want = IBAN_LENGTHS.get(value[:2])
    if want is None:
        return None
    seen, pos = 0, 0
    while pos < len(value):
        gap = _WS_RE.match(value, pos)
        if gap is not None:
            pos = gap.end()
            continue
        seen, pos = seen + 1, pos + 1
        if seen == want:
            return pos if iban_valid(squeeze(value[:pos])) else None
    return None


def _iban(value: str) -> str | None:
    compact = squeeze(value)
    return compact if iban_valid(compact) else None


def _ssn(value: str) -> str | None:
    digits = re.sub(r"[ .-]", "", value)
    if len(digits) != 9 or not digits.isdigit():
        return None
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or group == "00" or serial == "0000":
        return None
    if area[0] == "9":
        # 9xx areas are ITINs (their middle digits lie in 50-65, 70-88, 90-92 or 94-99): stdnum knows the ranges.
        return digits if _us_itin.is_valid(digits) else None
    return digits


_NINO_BAD_PREFIXES = {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"}


def _nino(value: str) -> str | None:
    compact = squeeze(value)
    return None if compact[:2] in _NINO_BAD_PREFIXES else compact


def _phone(value: str) -> str | None:
    digits = re.sub(r"[^0-9]", "", value)
    if value.lstrip().startswith("+"):
        if digits[0] == "1":
            return digits if len(digits) == 11 else None  # +1 is North America: ten digits after it, no more
        return digits if 8 <= len(digits) <= 15 else None
    if len(digits) == 10 and digits[0] in "23456789":
        return "1" + digits  # a North American number, written without its country code
    if len(digits) == 11 and digits[0] == "1":
        return digits
    return digits if 7 <= len(digits) <= 15 else None


_DATE_PREFIX = re.compile(r"[0-9]{1,2}[./-][0-9]{1,2}[./-][0-9]{2,4}")


# Regions whose national numbers start with a trunk 0, tried for a short national number when the run has no locale.
DEFAULT_PHONE_REGIONS = ("DE", "GB", "FR", "IT", "NL")


def phone_valid_in(value: str, regions: Iterable[str]) -> bool:
    """True when libphonenumber holds `value` for a valid number of one of `regions` (or of its own +code)."""
    text = squeeze(value)
    for region in regions:
        try:
            number = phonenumbers.parse(text, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            return True
    return False


def _phone_national(value: str, regions: frozenset[str] = frozenset()) -> str | None:
    if _DATE_PREFIX.match(value):
        return None  # `01.02.2024 14` is a date and an hour, not a number
    digits = re.sub(r"[^0-9]", "", squeeze(value))
    if 10 <= len(digits) <= 12:
        return digits
    # Shorter national numbers (Berlin `030 901820`) only when libphonenumber knows them in the run's region.
    phone_regions = sorted(r for r in regions if r in _PHONE_REGIONS) or DEFAULT_PHONE_REGIONS
    return digits if 6 <= len(digits) <= 9 and phone_valid_in(value, phone_regions) else None


_PHONE_REGIONS = frozenset(phonenumbers.SUPPORTED_REGIONS)


def _stdnum(module) -> Callable[[str], str | None]:
    """A validator from one python-stdnum module: the compact form when its check digits hold."""

    def validate(value: str) -> str | None:
        compact = squeeze(value).replace(".", "").replace("-", "").replace("/", "").upper()
        return compact if module.is_valid(compact) else None

    return validate


_dni, _nie, _idnr, _nir = _stdnum(_es_dni), _stdnum(_es_nie), _stdnum(_de_idnr), _stdnum(_fr_nir)
_codice_fiscale, _bsn, _cpf, _aadhaar = _stdnum(_it_cf), _stdnum(_nl_bsn), _stdnum(_br_cpf), _stdnum(_in_aadhaar)
# Every national id with check digits; after a keyword (`national_id:`, `Steuer-ID`) any of them is accepted.
_NATIONAL_VALIDATORS = (_dni, _nie, _idnr, _nir, _codice_fiscale, _bsn, _cpf, _aadhaar)


def _national_any(value: str) -> str | None:
    if holds_date(value):
        return None  # `DNI: 1989-12-13 P…`: a date is never a national id
    for validate in _NATIONAL_VALIDATORS:
        if (found := validate(value)) is not None:
            return found
    return _ssn(value)


def _ipv4(value: str) -> str | None:
    parts = value.split(".")
    # Leading zeros are refused, as the ipaddress module does (`010` could be read as octal).
    if len(parts) != 4 or any(not p.isdigit() or int(p) > 255 or len(p) > 1 and p[0] == "0" for p in parts):
        return None
    return value


@functools.lru_cache(maxsize=1 << 16)
def _ipv6(value: str) -> str | None:
    try:
        address = ipaddress.IPv6Address(value)
    except ValueError:
        return None
    groups = [g for g in value.split(":") if g]
    # `a::b` or `std::` in code parse as addresses: require a full 4-hex group or at least four groups, with a digit.
    if not any(len(g) == 4 for g in groups) and len(groups) < 4:
        return None
    if not any(ch.isdigit() for ch in value):
        return None
    return address.compressed


def email_normal_form(address: str) -> str:
    """An address lowercased with its domain in IDNA ASCII form: `jane@bücher.de` and `jane@xn--bcher-kva.de` agree."""
    local, _, domain = address.rpartition("@")
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        pass  # not a valid IDN (an over-long label): its lowercase spelling stands for it
    return f"{local}@{domain}".lower()


def _email(value: str) -> str | None:
    value = squeeze(value)  # `maria.lopez @example.com` is the address maria.lopez@example.com
    local = value.rpartition("@")[0]
    if not local or local.startswith(".") or local.endswith(".") or ".." in local:
        return None
    return value.lower()


def _jwt(value: str) -> str | None:
    header = value.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, binascii.Error):
        return None
    return value if isinstance(decoded, dict) else None


def _api_key(value: str) -> str | None:
    # Real keys mix letters and digits; this keeps words such as `sk-learn-...` out.
    tail = value[4:]
    return value if any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail) else None


# Values that name a secret rather than hold one: `os.environ`, `settings.API_KEY`, `OPENAI_API_KEY`, `$TOKEN`.
_SECRET_REFERENCE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|\$.*"
)


def _secret(value: str) -> str | None:
    if identifier_of_words(value):
        return None  # `token: token-run-1`: a run or test named after the word, not a secret
    return value if len(value) >= 6 and not _SECRET_REFERENCE.fullmatch(value) else None


def _bearer(value: str) -> str | None:
    return value if len(value) >= 12 and not identifier_of_words(value) else None


def _exact(value: str) -> str | None:
    return value


# ---------------------------------------------------------------- detectors, in priority order

DETECTORS: tuple[Detector, ...] = (
    Detector(
        "url_credentials",
        URL,
        r"[A-Za-z][A-Za-z0-9+.-]{1,15}://[^" + _STOP + r"/?#@:]+:[^" + _STOP + r"/?#@]+@[^" + _STOP + r"]+",
        True,
        _exact,
        trim=".,;:!?)]}",
    ),
    Detector(
        "url_secret_param",
        URL,
        rf"[A-Za-z][A-Za-z0-9+.-]{{1,15}}://[^{_STOP}?#]+\?(?:[^{_STOP}#]*&)?{_URL_SECRET_PARAMS}=[^{_STOP}&#]+[^{_STOP}]*",
        True,
        _exact,
        trim=".,;:!?)]}",
    ),
    Detector(
        "secret_kv",
        SECRET,
        _SECRET_KEYS + _KV_SEP + r"(?P<v>[^" + _STOP + r",;&()\[\]{}]{4,})",
        True,
        _secret,
        context=True,
    ),
    Detector(
        "bearer",
        SECRET,
        r"(?i:bearer|basic|token)[ \t]+(?P<v>[A-Za-z0-9._~+/-]*[0-9][A-Za-z0-9._~+/-]*=*)",
        True,
        _bearer,
        context=True,
    ),
    Detector(
        "phone_kv",
        PHONE,
        _PHONE_KEYS + _KV_SEP_LOOSE + r"(?P<v>\+?[0-9][0-9 .()-]{5,18}[0-9])",
        True,
        _phone,
        context=True,
    ),
    Detector(
        "ssn_kv",
        NATIONAL_ID,
        _SSN_KEYS + _KV_SEP_LOOSE + r"(?P<v>[0-9]{9}|[0-9]{3}[ .-][0-9]{2}[ .-][0-9]{4}){B}",
        True,
        _ssn,
        context=True,
    ),
    Detector(
        "national_id_kv",
        NATIONAL_ID,
        _NATIONAL_ID_KEYS + _KV_SEP_LOOSE + r"(?:(?i:is|ist|lautet|es|est|nummer|number|no\.?|nr\.?)[ \t]+)?"
        r"(?P<v>[0-9A-Z](?:[ ./-]?[0-9A-Z]){7,17}){B}",
        True,
        _national_any,
        context=True,
    ),
    Detector("jwt", SECRET, r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", True, _jwt),
    Detector(
        "api_key",
        API_KEY,
        r"(?:sk-(?:proj-|live-|test-|ant-api03-|ant-)?[A-Za-z0-9_-]{20}[A-Za-z0-9_-]*"
        r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16}[A-Za-z0-9]*"
        r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}"
        r"|gh[pousr]_[A-Za-z0-9]{36}[A-Za-z0-9]*"
        r"|github_pat_[A-Za-z0-9_]{22}[A-Za-z0-9_]*"
        r"|xox[abposr]-[A-Za-z0-9-]{10}[A-Za-z0-9-]*"
        r"|AIza[0-9A-Za-z_-]{35}"
        r"|glpat-[A-Za-z0-9_-]{20}[A-Za-z0-9_-]*"
        r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"
        r"|hf_[A-Za-z0-9]{30}[A-Za-z0-9]*"
        r"|npm_[A-Za-z0-9]{36})",
        True,
        _api_key,
    ),
    Detector(
        "email",
        EMAIL,
        r"[A-Za-z0-9_%+{U}-][A-Za-z0-9._%+{U}-]*[ \t]?@[ \t]?[A-Za-z0-9{U}](?:[A-Za-z0-9{U}-]*[A-Za-z0-9{U}])?"
        r"(?:\.[A-Za-z0-9{U}](?:[A-Za-z0-9{U}-]*[A-Za-z0-9{U}])?)*\.(?:xn--[A-Za-z0-9-]{1,59}{B}|{T}[A-Za-z]{2,24}{B})",
        False,
        _email,
    ),
    Detector(
        "iban", IBAN, rf"[A-Z]{{2}}[0-9]{{2}}(?:{_WS}?[A-Z0-9]{{4}}){{2,7}}(?:{_WS}?[A-Z0-9]{{1,3}})?{{B}}", True, _iban
    ),
    Detector("card", CARD, r"[0-9](?:[ -]?[0-9]){12,18}{B}", True, _card, shrink=True),
    # Groups of four (Amex 4-6-5) split by any whitespace run: `4111 1111\n1111 1111`.
    Detector(
        "card_split",
        CARD,
        rf"[0-9]{{4}}(?:{_WS}[0-9]{{4}}){{3}}(?:{_WS}?[0-9]{{1,3}})?{{B}}|[0-9]{{4}}{_WS}[0-9]{{6}}{_WS}[0-9]{{5}}{{B}}",
        True,
        _card,
        shrink=True,
    ),
    # National ids with check digits, validated by python-stdnum. Letters or separators make them rare enough
    # to look for everywhere; bare digit runs only in their country's runs or after a keyword (national_id_kv).
    Detector("es_dni", NATIONAL_ID, r"[0-9]{8}[ -]?[A-Z]{B}", True, _dni),
    Detector("es_nie", NATIONAL_ID, r"[XYZ][ -]?[0-9]{7}[ -]?[A-Z]{B}", True, _nie),
    Detector(
        "it_codice_fiscale",
        NATIONAL_ID,
        r"[A-Z]{6}[0-9LMNPQRSTUV]{2}[ABCDEHLMPRST][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]{B}",
        True,
        _codice_fiscale,
    ),
    Detector(
        "fr_nir",
        NATIONAL_ID,
        r"[12] [0-9]{2} (?:0[1-9]|1[0-2]|[2-9][0-9]) (?:[0-9]{2}|2[AB]) [0-9]{3} [0-9]{3} [0-9]{2}{B}",
        True,
        _nir,
    ),
    Detector("de_idnr", NATIONAL_ID, r"[1-9][0-9] [0-9]{3} [0-9]{3} [0-9]{3}{B}", True, _idnr),
    Detector("nl_bsn", NATIONAL_ID, r"[0-9]{4}\.[0-9]{2}\.[0-9]{3}{B}", True, _bsn),
    Detector("br_cpf", NATIONAL_ID, r"[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}{B}", True, _cpf),
    Detector("in_aadhaar", NATIONAL_ID, r"[2-9][0-9]{3}[ -][0-9]{4}[ -][0-9]{4}{B}", True, _aadhaar),
    Detector(
        "us_ssn",
        NATIONAL_ID,
        r"[0-9]{3}-[0-9]{2}-[0-9]{4}{B}|[0-9]{3} [0-9]{2} [0-9]{4}{B}|[0-9]{3}\.[0-9]{2}\.[0-9]{4}{B}",
        True,
        _ssn,
    ),
    Detector(
        "uk_nino",
        NATIONAL_ID,
        r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]{B}",
        True,
        _nino,
    ),
    Detector(
        "phone_north_america",
        PHONE,
        rf"\+1{_PSEP}?(?:\([2-9][0-9]{{2}}\)|[2-9][0-9]{{2}}){_PSEP}?[2-9][0-9]{{2}}{_PSEP}?[0-9]{{4}}{{B}}",
        False,
        _phone,
    ),
    Detector(
        "phone_international",
        PHONE,
        rf"\+[2-9][0-9]{{0,2}}{_PSEP}?(?:\([0-9]{{1,4}}\){_PSEP}?)?[0-9]{{1,4}}(?:{_PSEP}?[0-9]{{2,5}}){{1,4}}{{B}}",
        False,
        _phone,
        shrink=True,
    ),
    # An area code in parentheses: North America `(415) 555-0132`, Brazil `(11) 91234-5678`, and the like.
    Detector(
        "phone_paren",
        PHONE,
        rf"(?:1{_PSEP}?)?\([0-9]{{2,5}}\){_PSEP}?[0-9]{{3,5}}{_PSEP}?[0-9]{{4}}{{B}}",
        False,
        _phone,
        shrink=True,
    ),
    Detector(
        "phone_nanp", PHONE, rf"(?:1{_PSEP})?[2-9][0-9]{{2}}{_PSEP}[2-9][0-9]{{2}}{_PSEP}[0-9]{{4}}{{B}}", True, _phone
    ),
    # National formats with a trunk 0 (UK `020 7946 0958`, France `01 42 68 53 00`, Germany `030 1234 5678`).
    Detector(
        "phone_national",
        PHONE,
        rf"0[1-9][0-9]{{0,4}}(?:(?:[./-]|{_WS})[0-9]{{2,8}}){{1,4}}{{B}}",
        True,
        _phone_national,
        shrink=True,
        regional=True,
    ),
    Detector("ipv4", IP, r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}{B}", True, _ipv4),
    Detector("ipv6", IP, r"[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){2,7}", True, _ipv6, trim=":"),
    # Bare digit ids, on only when the run's locale is their country's: one or two check digits let about one
    # ordinary number in ten (or a hundred) pass, so everywhere else they need a keyword (national_id_kv).
    Detector("de_idnr_bare", NATIONAL_ID, r"[1-9][0-9]{10}{B}", True, _idnr, regions=frozenset({"DE"})),
    Detector("nl_bsn_bare", NATIONAL_ID, r"[0-9]{9}{B}", True, _bsn, regions=frozenset({"NL"})),
    Detector("br_cpf_bare", NATIONAL_ID, r"[0-9]{11}{B}", True, _cpf, regions=frozenset({"BR"})),
    Detector("in_aadhaar_bare", NATIONAL_ID, r"[2-9][0-9]{11}{B}", True, _aadhaar, regions=frozenset({"IN"})),
    Detector("fr_nir_bare", NATIONAL_ID, r"[12][0-9]{12}(?:[0-9]{2})?{B}", True, _nir, regions=frozenset({"FR"})),
)

_PY_PATTERNS = {d.name: d.python() for d in DETECTORS}
_VALUE_DETECTORS = tuple(d for d in DETECTORS if not d.context)
# JSON escapes are matched (and left alone) so that no match can start on the letter of an escape: replacing
# from there would cut `\n` in two and break the JSON text.
_SKIP = r"\\u[0-9A-Fa-f]{4}|\\[\"\\/bfnrt]"


# A capitalized word, as a candidate for a known name: the pattern stays the same size however many names
# there are (a literal alternation of thousands of names makes the regex DFA thrash or exceed its size limit).
# Letters only, except an apostrophe after a single capital (`O'Brien`, `D'Angelo`): any other apostrophe, a hyphen,
# digit or `_` ends the word (`Mia's`, `Jean-Luc` are two words each), so a word never swallows an email, key or
# card glued after it. An ASCII capital needs a word boundary before it; a non-ASCII one cannot get an ASCII
# boundary, and rarely follows a letter.
_WORD_TAIL = r"(?:['’]\p{Lu})?[\p{L}\p{M}]*"
_CAPITALIZED_WORD = rf"(?:{_ESCAPE}|{_RUST_B})[A-Z]{_WORD_TAIL}|(?:{_ESCAPE})?[\p{{Lu}}--A-Z]{_WORD_TAIL}"


def locale_regions(locale: str | None) -> frozenset[str]:
    """The ISO 3166 regions of a BCP 47 locale (`de-DE` -> DE, `pt_BR` -> BR, `de` -> DE), empty when unknown."""
    if not locale:
        return frozenset()
    parts = re.split(r"[-_]", locale.strip())
    regions = {p.upper() for p in parts[1:] if len(p) == 2 and p.isalpha()}
    if not regions and len(parts[0]) == 2 and parts[0].upper() in _PHONE_REGIONS:
        regions.add(parts[0].upper())  # a language alone (`de`, `fr`, `nl`) names its main country here
    return frozenset(regions)


def combined_pattern(person_words: bool = False, regions: Iterable[str] = (), unicode: bool = False) -> str:
    """The combined Rust regex: tokens to keep whole, every detector on in these regions, capitalized words when
    names are looked for, JSON escapes to skip; `unicode`: e-mails in any script (see Detector.rust)."""
    region_set = frozenset(regions)
    # A token is consumed whole first: its hex digits must never be read as a card or an id.
    alternatives = [TOKEN_PATTERN, ESCAPED_TOKEN_PATTERN]
    alternatives += [d.rust(unicode) for d in DETECTORS if not d.regions or d.regions & region_set]
    if person_words:
        alternatives.append(_CAPITALIZED_WORD)
    alternatives.append(_SKIP)
    return "|".join(alternatives)


@dataclass(frozen=True)
class Finding:
    """One detected value inside a candidate match: its type, span within the candidate, and raw text."""

    entity_type: str
    start: int
    end: int
    value: str


_SEPARATOR = re.compile(r"[\s.()/-]|\\[nrt]")


def _try(detector: Detector, value: str, offset: int, regions: frozenset[str] = frozenset()) -> Finding | None:
    """`value`, or its longest valid prefix, as this value detector's entity; None when nothing validates."""
    pattern = _PY_PATTERNS[detector.name]
    if detector.name == "iban":
        end = _iban_prefix(value) if pattern.fullmatch(value) else None
        return None if end is None else Finding(IBAN, offset, offset + end, value[:end])
    if detector.name == "email" and ".." in value.partition("@")[0]:
        # `see...jane@x.com`: the local part the regex took starts at `see`; the address starts after the dots.
        start = value.rindex("..", 0, value.index("@")) + 2
        start += len(value[start:]) - len(value[start:].lstrip("."))
        return _try(detector, value[start:], offset + start, regions) if start < value.index("@") else None
    text = value
    if detector.trim and not (detector.name == "ipv6" and value.endswith("::")):
        text = value.rstrip(detector.trim)
    cuts = [len(text)]
    if detector.shrink:
        cuts += sorted({m.start() for m in _SEPARATOR.finditer(text)}, reverse=True)
    for cut in cuts:
        prefix = text[:cut]
        if prefix and pattern.fullmatch(prefix) is not None and detector.check(prefix, regions) is not None:
            return Finding(detector.entity_type, offset, offset + cut, prefix)
    return None


# All value detectors as one alternation: the first alternative that fully matches names the likely detector, so
# most candidates cost one regex call; the ordered loop below settles the rest (failed checksums, trims).
_VALUE_ALTERNATION = re.compile("|".join(f"(?P<{d.name}>{_PY_PATTERNS[d.name].pattern})" for d in _VALUE_DETECTORS))
_BY_NAME = {d.name: d for d in DETECTORS}
_CONTEXT_DETECTORS = tuple(d for d in DETECTORS if d.context)
_CONTEXT_ALTERNATION = re.compile(
    "|".join(
        f"(?P<{d.name}>{_PY_PATTERNS[d.name].pattern.replace('(?P<v>', f'(?P<v_{d.name}>')})"
        for d in _CONTEXT_DETECTORS
    )
)
# The combined scan in Python, to search the rest of a match after its first value (a card after a phone's digits).
_PY_SCAN = re.compile(
    "|".join(
        ("(?:_|\\b)" if d.lead_boundary else "") + f"(?:{_PY_PATTERNS[d.name].pattern.replace('(?P<v>', '(?:')})"
        for d in DETECTORS
    )
)


def _classify_value(value: str, offset: int, regions: frozenset[str] = frozenset()) -> Finding | None:
    """The first value detector that fully matches `value` (or a prefix of it) and validates it."""
    first = _VALUE_ALTERNATION.match(value)
    if first is None:
        return None  # no detector matches at the start, so no prefix can validate either
    likely = _BY_NAME[first.lastgroup]  # type: ignore[index]
    if (found := _try(likely, value, offset, regions)) is not None:
        return found
    for detector in _VALUE_DETECTORS:
        if detector is not likely and (found := _try(detector, value, offset, regions)) is not None:
            return found
    return None


def _classify_body(body: str, offset: int, names: frozenset[str], regions: frozenset[str]) -> Finding | None:
    """The value that one candidate (without its escape prefix; it starts at `offset`) begins with, or None."""
    if body in names:
        return Finding(PERSON, offset, offset + len(body), body)
    # After a context match the value is classified by the value detectors first, so `"api_key":"sk-…"` and a
    # bare `sk-…` get the same token: identical values must become identical tokens wherever they are found.
    match = _CONTEXT_ALTERNATION.fullmatch(body)
    if match is None:
        return _classify_value(body, offset, regions)
    detector = _BY_NAME[match.lastgroup]  # type: ignore[index]
    group = f"v_{detector.name}"
    value = match.group(group)
    if TOKEN_RE.fullmatch(value):
        return None
    start = offset + match.start(group)
    inner = _classify_value(value, start, regions)
    if inner is not None and inner.end - inner.start == len(value):
        return inner
    if detector.check(value, regions) is not None:
        return Finding(detector.entity_type, start, start + len(value), value)
    return None


def _first_finding(text: str, offset: int, names: frozenset[str], regions: frozenset[str]) -> Finding | None:
    """The value a candidate starts with, also when an underscore edge was taken into the match (`_203.0.113.7_`)."""
    found = _classify_body(text, offset, names, regions)
    if found is None and (text[0] == "_" or text[-1] == "_"):
        lead = 1 if text[0] == "_" else 0
        trail = len(text) - 1 if text[-1] == "_" else len(text)
        found = _classify_body(text[lead:trail], offset + lead, names, regions) if trail > lead else None
    return found


def classify(
    candidate: str, names: frozenset[str] = frozenset(), regions: frozenset[str] = frozenset()
) -> list[Finding]:
    """The personal values inside one regex candidate, in order, with spans relative to the candidate; `regions`
    (from locale_regions) turn on bare digit ids and set the region of national phone numbers.

    Usually one; more when the regex ran a value on into the next one (a card after a phone number's digits).
    """
    if candidate.startswith("\\"):
        if len(candidate) == 2 or candidate[1] == "u" and len(candidate) == 6 or candidate[1] not in "nrtbf":
            return []
        offset = 2
    else:
        offset = 0
    body = candidate[offset:]
    if not body or TOKEN_RE.fullmatch(body):
        return []
    first = _first_finding(body, offset, names, regions)
    if first is None:
        # A match that fails as a whole (a card failing Luhn) is a look-alike: its digits are not searched again.
        return []
    findings = [first]
    # The regex may have run a value on into the next one (a phone number's digit groups into a card): the rest
    # after the first value is searched again.
    pos = first.end
    while pos < len(candidate):
        match = _PY_SCAN.search(candidate, pos)
        if match is None:
            break
        found = _first_finding(match.group(), match.start(), frozenset(), regions)
        if found is not None and not TOKEN_RE.fullmatch(found.value):
            findings.append(found)
            pos = found.end
        else:
            pos = match.start() + 1
    return findings


def normalize(entity_type: str, value: str) -> str:
    """The normal form hashed into a token: equal normal forms give equal tokens."""
    value = fold_text(value)  # a disguised spelling (`ｊａｎｅ＠…`, `jane%40…`) shares the plain one's token
    if entity_type == EMAIL:
        return email_normal_form(squeeze(value))
    if entity_type == CARD:
        return re.sub(r"[^0-9]", "", squeeze(value))
    if entity_type == PHONE:
        value = squeeze(value)
        return _phone(value) or re.sub(r"[^0-9]", "", value)
    if entity_type == IBAN:
        return squeeze(value).upper()
    if entity_type == NATIONAL_ID:
        return re.sub(r"[.\-/]", "", squeeze(value)).upper()
    if entity_type == IP:
        # A validated IPv4 address has one spelling; IPv6 ones are compressed (cached from validation).
        return (_ipv6(value) or value) if ":" in value else value
    if entity_type == PERSON:
        return " ".join(value.split()).casefold()
    return value


# ---------------------------------------------------------------- names of people from records

NAME_KEYS = (
    r"(?:first|last|full|given|family|middle|maiden|display|legal|preferred|nick)?_?name|surname|"
    r"(?:customer|contact|recipient|sender|cardholder|card_?holder|account_?holder|holder|passenger|patient|"
    r"employee|user|owner|member|guest|traveler|traveller|beneficiary|payee|payer|client|person|buyer|seller|"
    r"assignee|reporter|requester)_?(?:first_?|last_?|full_?)?name"
)


def _field_pattern(keys: str) -> str:
    """`"key": "value"` in JSON text for keys matching `keys`; group 1 is the value, still JSON-escaped."""
    return r'"(?i:' + keys + r')"\s*:\s*"((?:[^"\\]|\\.)*)"'


NAME_FIELD_PATTERN = _field_pattern(NAME_KEYS)
NAME_FIELD_RE = re.compile(NAME_FIELD_PATTERN)
NAME_KEY_RE = re.compile(r"(?i:" + NAME_KEYS + r")")
# Keys that name a person by role rather than by `name` (`signed_by`, `approved_by`, `agent_name`, `assignee`):
# their values count as names when they look like a full name (two or more capitalized words).
ROLE_KEYS = (
    r"[a-z0-9_]*_by|(?:[a-z0-9]+_)*(?:agent|signer|signatory|signee|author|approver|reviewer|assignee|manager|"
    r"representative|witness|officer|contact|recipient|requester|requestor|addressee|customer|employee|"
    r"cardholder|beneficiary|patient|doctor|physician|nurse|spouse|guardian|next_?of_?kin)(?:_?name)?"
)
ROLE_FIELD_PATTERN = _field_pattern(ROLE_KEYS)
ROLE_FIELD_RE = re.compile(ROLE_FIELD_PATTERN)
ROLE_KEY_RE = re.compile(r"(?i:" + ROLE_KEYS + r")")
# Any `"key":"string value"` pair in JSON text: group 1 the key, group 2 the value, both still JSON-escaped.
KV_STRING_PATTERN = r'"((?:[^"\\]|\\.){1,80})"\s*:\s*"((?:[^"\\]|\\.)*)"'
KV_STRING_RE = re.compile(KV_STRING_PATTERN)


def learned_field_pattern(keys: Iterable[str]) -> str | None:
    """A `"key":"value"` pattern for keys learned to hold names (see tables.NameCollector), None when there are none."""
    keys = sorted(set(keys))
    if not keys:
        return None
    return r'"(?:' + "|".join(re.escape(k) for k in keys) + r')"\s*:\s*"((?:[^"\\]|\\.)*)"'


_NAME_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*\.?")
_HONORIFICS = {"mr", "mrs", "ms", "mx", "dr", "prof", "sir", "jr", "sr", "ii", "iii", "iv"}


def person_name(value: str) -> str | None:
    """`value` with whitespace collapsed when it looks like a person's name (1-4 capitalized words), else None."""
    words = value.split()
    if not 1 <= len(words) <= 4:
        return None
    for word in words:
        if not (word[0].isupper() and _NAME_WORD.fullmatch(word)):
            return None
    name = " ".join(words)
    if len(name) < 2 or len(words) == 1 and name.rstrip(".").lower() in _HONORIFICS:
        return None
    return name


def name_variants(name: str) -> set[str]:
    """The words of a name that are replaced wherever they stand as whole words, as written and in upper case.

    Each word is its own pseudonym, so `Mia Li` becomes two tokens and `Mia` alone the first of them. Hyphens split
    words (`Jean-Luc`); an apostrophe word stays whole and also gives its parts (`O'Brien`, `Brien`).
    """
    variants: set[str] = set()
    for word in re.split(r"[\s.-]+", name):
        for part in {word, *re.split(r"['’]", word)}:
            if len(part) >= 2 and part.lower() not in _HONORIFICS and part[0].isupper():
                variants.update({part, part.upper()})
    return variants


def full_name(value: str) -> str | None:
    """`value` as a person's name of two to four capitalized words, else None."""
    name = person_name(value)
    return name if name is not None and len(name.split()) >= 2 else None


def names_from_field_match(match_text: str, learned: re.Pattern[str] | None = None) -> str | None:
    """The person name in one `"key":"value"` match of NAME_FIELD_PATTERN, ROLE_FIELD_PATTERN (a full name only)
    or a learned key's pattern, or None."""
    m = NAME_FIELD_RE.fullmatch(match_text)
    judge = person_name
    if m is None and learned is not None:
        m = learned.fullmatch(match_text)
    if m is None:
        m, judge = ROLE_FIELD_RE.fullmatch(match_text), full_name
    if m is None:
        return None
    try:
        value = json.loads(f'"{m.group(1)}"')
    except ValueError:
        return None
    if TOKEN_RE.search(value):
        return None
    return judge(value)


def mask(value: str) -> str:
    """A masked excerpt of a value: a few edge characters kept, never the value in full."""
    n = len(value)
    if n <= 4:
        return "*" * n
    keep = 1 if n <= 8 else 2
    return value[:keep] + "*" * (n - 2 * keep) + value[-keep:]
