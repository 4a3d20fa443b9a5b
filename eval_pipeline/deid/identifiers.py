"""Validators of personal identifiers: cards, IBANs, national ids, phone numbers, IP and e-mail addresses."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterable

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

from eval_pipeline.deid.lookalikes import holds_date

# Each validator takes a matched value and returns its validated form, or None when a checksum or rule fails.

# A whitespace run or JSON whitespace escape inside a value split over lines or groups (`squeeze` drops them).
_WS_RE = re.compile(r"\s+|\\[nrt]")


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


def validate_card(value: str) -> str | None:
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


def iban_prefix(value: str) -> int | None:
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


def validate_iban(value: str) -> str | None:
    compact = squeeze(value)
    return compact if iban_valid(compact) else None


def validate_ssn(value: str) -> str | None:
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


def validate_nino(value: str) -> str | None:
    compact = squeeze(value)
    return None if compact[:2] in _NINO_BAD_PREFIXES else compact


def validate_phone(value: str) -> str | None:
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


def validate_phone_national(value: str, regions: frozenset[str] = frozenset()) -> str | None:
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


validate_dni = _stdnum(_es_dni)
validate_nie = _stdnum(_es_nie)
validate_idnr = _stdnum(_de_idnr)
validate_nir = _stdnum(_fr_nir)
validate_codice_fiscale = _stdnum(_it_cf)
validate_bsn = _stdnum(_nl_bsn)
validate_cpf = _stdnum(_br_cpf)
validate_aadhaar = _stdnum(_in_aadhaar)
# Every national id with check digits; after a keyword (`national_id:`, `Steuer-ID`) any of them is accepted.
_NATIONAL_VALIDATORS = (
    validate_dni,
    validate_nie,
    validate_idnr,
    validate_nir,
    validate_codice_fiscale,
    validate_bsn,
    validate_cpf,
    validate_aadhaar,
)


def validate_national_any(value: str) -> str | None:
    if holds_date(value):
        return None  # `DNI: 1989-12-13 P…`: a date is never a national id
    for validate in _NATIONAL_VALIDATORS:
        if (found := validate(value)) is not None:
            return found
    return validate_ssn(value)


def validate_ipv4(value: str) -> str | None:
    parts = value.split(".")
    # Leading zeros are refused, as the ipaddress module does (`010` could be read as octal).
    if len(parts) != 4 or any(not p.isdigit() or int(p) > 255 or len(p) > 1 and p[0] == "0" for p in parts):
        return None
    return value


@functools.lru_cache(maxsize=1 << 16)
def validate_ipv6(value: str) -> str | None:
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


def validate_email(value: str) -> str | None:
    value = squeeze(value)  # `maria.lopez @example.com` is the address maria.lopez@example.com
    local = value.rpartition("@")[0]
    if not local or local.startswith(".") or local.endswith(".") or ".." in local:
        return None
    return value.lower()


def locale_regions(locale: str | None) -> frozenset[str]:
    """The ISO 3166 regions of a BCP 47 locale (`de-DE` -> DE, `pt_BR` -> BR, `de` -> DE), empty when unknown."""
    if not locale:
        return frozenset()
    parts = re.split(r"[-_]", locale.strip())
    regions = {p.upper() for p in parts[1:] if len(p) == 2 and p.isalpha()}
    if not regions and len(parts[0]) == 2 and parts[0].upper() in _PHONE_REGIONS:
        regions.add(parts[0].upper())  # a language alone (`de`, `fr`, `nl`) names its main country here
    return frozenset(regions)
