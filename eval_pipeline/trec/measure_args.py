"""trec_eval's `-m` measure arguments (nicknames, names, parameters, P_5 shorthand) parsed into selected measures."""

from __future__ import annotations

import re
from collections.abc import Iterable

from eval_pipeline.trec.measures import MEASURE_BY_NAME, NICKNAMES, PREFERENCE_NICKNAMES, TABLE, Measure, Selected

NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _number(text: str, spec: str) -> float:
    """A parameter's number; not a number raises, naming the -m argument."""
    if not NUMBER.fullmatch(text):
        raise ValueError(f"bad parameters in {spec!r}: {text!r} is not a number")
    return float(text)


def _cutoff(text: str, spec: str) -> int:
    """A rank cutoff: the integer part of the number, as trec_eval's atol reads it."""
    return int(_number(text, spec))


def _parse_params(measure: Measure, text: str, spec: str) -> tuple[tuple, str | None]:
    """The parameters of `-m NAME.TEXT` for `measure`, and the printable text for values and gains measures."""
    items = text.split(",")
    if measure.kind == "single":
        raise ValueError(f"measure {measure.name!r} takes no parameters")
    if measure.kind in ("cutoffs", "levels"):
        values = [_cutoff(p, spec) if measure.kind == "cutoffs" else _number(p, spec) for p in items]
        if any(v <= 0 for v in values) if measure.kind == "cutoffs" else any(v < 0 for v in values):
            raise ValueError(f"bad parameters in {spec!r}: cutoffs must be positive")
        if len(set(values)) < len(values):
            raise ValueError(f"bad parameters in {spec!r}: duplicate cutoffs")
        return tuple(sorted(values)), None
    if measure.kind == "values":
        values = tuple(_number(p, spec) for p in items)
        if measure.name == "utility" and len(values) != 4:
            raise ValueError(f"bad parameters in {spec!r}: utility takes 4 coefficients")
        return values, text
    pairs = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or "=" in value:
            raise ValueError(f"bad parameters in {spec!r}: expected name=value pairs such as 1=0,2=3 or p=0.9")
        pairs.append((name, _number(value, spec)))
    return tuple(pairs), text


def parse_measures(specs: Iterable[str] | None) -> list[Selected]:
    """trec_eval `-m` arguments as selected measures, in trec_eval's print order.

    Accepted: nicknames (official, all_trec, set, qrels_jg), NAME, NAME.params (P.5,10; iprec_at_recall..1,.5;
    utility.2,-1,0,0; set_F.0.5; ndcg.1=0,2=3; rbp.p=0.95) and the shorthand P_5 for one cutoff. Cutoffs given for a
    measure replace its defaults (several -m for one measure add up); for values and gains measures the first
    parameter list given wins, as in trec_eval.
    """
    marked: set[str] = set()
    explicit: dict[str, list[tuple[tuple, str | None]]] = {}
    for spec in specs or ["official"]:
        name, dot, text = spec.partition(".")
        if name in NICKNAMES:
            marked.update(NICKNAMES[name])
            continue
        if name in PREFERENCE_NICKNAMES or name.startswith("prefs_"):
            raise ValueError(
                f"preference measure {spec!r} needs -R prefs or qrels_prefs judgments, which are not supported"
            )
        if name not in MEASURE_BY_NAME:
            # Shorthand such as P_5 or ndcg_cut_10: the printed name of one value.
            match = re.fullmatch(r"(.+)_([0-9.]+)", spec)
            shorthand = MEASURE_BY_NAME.get(match.group(1)) if match else None
            if shorthand is None or shorthand.kind not in ("cutoffs", "levels"):
                known = ", ".join(m.name for m in TABLE)
                raise ValueError(f"unknown measure {spec!r}; known: {known}, and the sets {', '.join(NICKNAMES)}")
            name, dot, text = shorthand.name, ".", match.group(2)
        measure = MEASURE_BY_NAME[name]
        marked.add(name)
        if dot:
            if not text:
                raise ValueError(f"measure {spec!r}: empty parameter list")
            explicit.setdefault(name, []).append(_parse_params(measure, text, spec))
    selected = []
    for measure in TABLE:
        if measure.name not in marked:
            continue
        given = explicit.get(measure.name)
        if not given:
            selected.append(Selected(measure, tuple(measure.defaults)))
        elif measure.kind in ("cutoffs", "levels"):
            selected.append(Selected(measure, tuple(sorted({p for params, _ in given for p in params}))))
        else:
            selected.append(Selected(measure, given[0][0], given[0][1]))
    _check_names(selected)
    return selected


def _check_names(selected: list[Selected]) -> None:
    """Refuse parameters that would print two values under one name (their columns would clash)."""
    names = [c for s in selected for c in s.columns()]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"two parameters print as the same name: {', '.join(repeated)}")
