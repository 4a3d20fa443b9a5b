"""Entity types and tokens, the regex detectors in priority order, their combined pattern, normal forms and masks.

Over 400 lines because the detector table is one priority-ordered tuple, kept with the regex pieces only it uses.
Each body is shared by polars (Rust regex over whole columns) and Python (candidates.py classifies its matches);
the validators are in identifiers.py and credentials.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eval_pipeline.deid.credentials import (
    validate_api_key,
    validate_bearer,
    validate_exact,
    validate_jwt,
    validate_secret,
)
from eval_pipeline.deid.folding import fold_text
from eval_pipeline.deid.identifiers import (
    email_normal_form,
    squeeze,
    validate_aadhaar,
    validate_bsn,
    validate_card,
    validate_codice_fiscale,
    validate_cpf,
    validate_dni,
    validate_email,
    validate_iban,
    validate_idnr,
    validate_ipv4,
    validate_ipv6,
    validate_national_any,
    validate_nie,
    validate_nino,
    validate_nir,
    validate_phone,
    validate_phone_national,
    validate_ssn,
)

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


# ---------------------------------------------------------------- detectors, in priority order

DETECTORS: tuple[Detector, ...] = (
    Detector(
        "url_credentials",
        URL,
        r"[A-Za-z][A-Za-z0-9+.-]{1,15}://[^" + _STOP + r"/?#@:]+:[^" + _STOP + r"/?#@]+@[^" + _STOP + r"]+",
        True,
        validate_exact,
        trim=".,;:!?)]}",
    ),
    Detector(
        "url_secret_param",
        URL,
        rf"[A-Za-z][A-Za-z0-9+.-]{{1,15}}://[^{_STOP}?#]+\?(?:[^{_STOP}#]*&)?{_URL_SECRET_PARAMS}=[^{_STOP}&#]+[^{_STOP}]*",
        True,
        validate_exact,
        trim=".,;:!?)]}",
    ),
    Detector(
        "secret_kv",
        SECRET,
        _SECRET_KEYS + _KV_SEP + r"(?P<v>[^" + _STOP + r",;&()\[\]{}]{4,})",
        True,
        validate_secret,
        context=True,
    ),
    Detector(
        "bearer",
        SECRET,
        r"(?i:bearer|basic|token)[ \t]+(?P<v>[A-Za-z0-9._~+/-]*[0-9][A-Za-z0-9._~+/-]*=*)",
        True,
        validate_bearer,
        context=True,
    ),
    Detector(
        "phone_kv",
        PHONE,
        _PHONE_KEYS + _KV_SEP_LOOSE + r"(?P<v>\+?[0-9][0-9 .()-]{5,18}[0-9])",
        True,
        validate_phone,
        context=True,
    ),
    Detector(
        "ssn_kv",
        NATIONAL_ID,
        _SSN_KEYS + _KV_SEP_LOOSE + r"(?P<v>[0-9]{9}|[0-9]{3}[ .-][0-9]{2}[ .-][0-9]{4}){B}",
        True,
        validate_ssn,
        context=True,
    ),
    Detector(
        "national_id_kv",
        NATIONAL_ID,
        _NATIONAL_ID_KEYS + _KV_SEP_LOOSE + r"(?:(?i:is|ist|lautet|es|est|nummer|number|no\.?|nr\.?)[ \t]+)?"
        r"(?P<v>[0-9A-Z](?:[ ./-]?[0-9A-Z]){7,17}){B}",
        True,
        validate_national_any,
        context=True,
    ),
    Detector("jwt", SECRET, r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", True, validate_jwt),
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
        validate_api_key,
    ),
    Detector(
        "email",
        EMAIL,
        r"[A-Za-z0-9_%+{U}-][A-Za-z0-9._%+{U}-]*[ \t]?@[ \t]?[A-Za-z0-9{U}](?:[A-Za-z0-9{U}-]*[A-Za-z0-9{U}])?"
        r"(?:\.[A-Za-z0-9{U}](?:[A-Za-z0-9{U}-]*[A-Za-z0-9{U}])?)*\.(?:xn--[A-Za-z0-9-]{1,59}{B}|{T}[A-Za-z]{2,24}{B})",
        False,
        validate_email,
    ),
    Detector(
        "iban",
        IBAN,
        rf"[A-Z]{{2}}[0-9]{{2}}(?:{_WS}?[A-Z0-9]{{4}}){{2,7}}(?:{_WS}?[A-Z0-9]{{1,3}})?{{B}}",
        True,
        validate_iban,
    ),
    Detector("card", CARD, r"[0-9](?:[ -]?[0-9]){12,18}{B}", True, validate_card, shrink=True),
    # Groups of four (Amex 4-6-5) split by any whitespace run: `4111 1111\n1111 1111`.
    Detector(
        "card_split",
        CARD,
        rf"[0-9]{{4}}(?:{_WS}[0-9]{{4}}){{3}}(?:{_WS}?[0-9]{{1,3}})?{{B}}|[0-9]{{4}}{_WS}[0-9]{{6}}{_WS}[0-9]{{5}}{{B}}",
        True,
        validate_card,
        shrink=True,
    ),
    # National ids with check digits, validated by python-stdnum. Letters or separators make them rare enough
    # to look for everywhere; bare digit runs only in their country's runs or after a keyword (national_id_kv).
    Detector("es_dni", NATIONAL_ID, r"[0-9]{8}[ -]?[A-Z]{B}", True, validate_dni),
    Detector("es_nie", NATIONAL_ID, r"[XYZ][ -]?[0-9]{7}[ -]?[A-Z]{B}", True, validate_nie),
    Detector(
        "it_codice_fiscale",
        NATIONAL_ID,
        r"[A-Z]{6}[0-9LMNPQRSTUV]{2}[ABCDEHLMPRST][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]{B}",
        True,
        validate_codice_fiscale,
    ),
    Detector(
        "fr_nir",
        NATIONAL_ID,
        r"[12] [0-9]{2} (?:0[1-9]|1[0-2]|[2-9][0-9]) (?:[0-9]{2}|2[AB]) [0-9]{3} [0-9]{3} [0-9]{2}{B}",
        True,
        validate_nir,
    ),
    Detector("de_idnr", NATIONAL_ID, r"[1-9][0-9] [0-9]{3} [0-9]{3} [0-9]{3}{B}", True, validate_idnr),
    Detector("nl_bsn", NATIONAL_ID, r"[0-9]{4}\.[0-9]{2}\.[0-9]{3}{B}", True, validate_bsn),
    Detector("br_cpf", NATIONAL_ID, r"[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}{B}", True, validate_cpf),
    Detector("in_aadhaar", NATIONAL_ID, r"[2-9][0-9]{3}[ -][0-9]{4}[ -][0-9]{4}{B}", True, validate_aadhaar),
    Detector(
        "us_ssn",
        NATIONAL_ID,
        r"[0-9]{3}-[0-9]{2}-[0-9]{4}{B}|[0-9]{3} [0-9]{2} [0-9]{4}{B}|[0-9]{3}\.[0-9]{2}\.[0-9]{4}{B}",
        True,
        validate_ssn,
    ),
    Detector(
        "uk_nino",
        NATIONAL_ID,
        r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]{B}",
        True,
        validate_nino,
    ),
    Detector(
        "phone_north_america",
        PHONE,
        rf"\+1{_PSEP}?(?:\([2-9][0-9]{{2}}\)|[2-9][0-9]{{2}}){_PSEP}?[2-9][0-9]{{2}}{_PSEP}?[0-9]{{4}}{{B}}",
        False,
        validate_phone,
    ),
    Detector(
        "phone_international",
        PHONE,
        rf"\+[2-9][0-9]{{0,2}}{_PSEP}?(?:\([0-9]{{1,4}}\){_PSEP}?)?[0-9]{{1,4}}(?:{_PSEP}?[0-9]{{2,5}}){{1,4}}{{B}}",
        False,
        validate_phone,
        shrink=True,
    ),
    # An area code in parentheses: North America `(415) 555-0132`, Brazil `(11) 91234-5678`, and the like.
    Detector(
        "phone_paren",
        PHONE,
        rf"(?:1{_PSEP}?)?\([0-9]{{2,5}}\){_PSEP}?[0-9]{{3,5}}{_PSEP}?[0-9]{{4}}{{B}}",
        False,
        validate_phone,
        shrink=True,
    ),
    Detector(
        "phone_nanp",
        PHONE,
        rf"(?:1{_PSEP})?[2-9][0-9]{{2}}{_PSEP}[2-9][0-9]{{2}}{_PSEP}[0-9]{{4}}{{B}}",
        True,
        validate_phone,
    ),
    # National formats with a trunk 0 (UK `020 7946 0958`, France `01 42 68 53 00`, Germany `030 1234 5678`).
    Detector(
        "phone_national",
        PHONE,
        rf"0[1-9][0-9]{{0,4}}(?:(?:[./-]|{_WS})[0-9]{{2,8}}){{1,4}}{{B}}",
        True,
        validate_phone_national,
        shrink=True,
        regional=True,
    ),
    Detector("ipv4", IP, r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}{B}", True, validate_ipv4),
    Detector("ipv6", IP, r"[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){2,7}", True, validate_ipv6, trim=":"),
    # Bare digit ids, on only when the run's locale is their country's: one or two check digits let about one
    # ordinary number in ten (or a hundred) pass, so everywhere else they need a keyword (national_id_kv).
    Detector("de_idnr_bare", NATIONAL_ID, r"[1-9][0-9]{10}{B}", True, validate_idnr, regions=frozenset({"DE"})),
    Detector("nl_bsn_bare", NATIONAL_ID, r"[0-9]{9}{B}", True, validate_bsn, regions=frozenset({"NL"})),
    Detector("br_cpf_bare", NATIONAL_ID, r"[0-9]{11}{B}", True, validate_cpf, regions=frozenset({"BR"})),
    Detector("in_aadhaar_bare", NATIONAL_ID, r"[2-9][0-9]{11}{B}", True, validate_aadhaar, regions=frozenset({"IN"})),
    Detector(
        "fr_nir_bare", NATIONAL_ID, r"[12][0-9]{12}(?:[0-9]{2})?{B}", True, validate_nir, regions=frozenset({"FR"})
    ),
)

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


def normalize(entity_type: str, value: str) -> str:
    """The normal form hashed into a token: equal normal forms give equal tokens."""
    value = fold_text(value)  # a disguised spelling (`ｊａｎｅ＠…`, `jane%40…`) shares the plain one's token
    if entity_type == EMAIL:
        return email_normal_form(squeeze(value))
    if entity_type == CARD:
        return re.sub(r"[^0-9]", "", squeeze(value))
    if entity_type == PHONE:
        value = squeeze(value)
        return validate_phone(value) or re.sub(r"[^0-9]", "", value)
    if entity_type == IBAN:
        return squeeze(value).upper()
    if entity_type == NATIONAL_ID:
        return re.sub(r"[.\-/]", "", squeeze(value)).upper()
    if entity_type == IP:
        # A validated IPv4 address has one spelling; IPv6 ones are compressed (cached from validation).
        return (validate_ipv6(value) or value) if ":" in value else value
    if entity_type == PERSON:
        return " ".join(value.split()).casefold()
    return value


def mask(value: str) -> str:
    """A masked excerpt of a value: a few edge characters kept, never the value in full."""
    n = len(value)
    if n <= 4:
        return "*" * n
    keep = 1 if n <= 8 else 2
    return value[:keep] + "*" * (n - 2 * keep) + value[-keep:]
