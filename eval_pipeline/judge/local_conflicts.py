"""The local judge's conflicts of a claim with its chosen sentences: values, exclusive groups, names, negation."""

from __future__ import annotations

import polars as pl


def _neighbours(rows: pl.DataFrame, key: str) -> pl.DataFrame:
    """key, tid, neighbour: the content words just before and after each content word, within its clause."""
    content = rows.filter(pl.col("is_content")).select(key, "clause", "tid")
    same = (pl.col(key).shift(1) == pl.col(key)) & (pl.col("clause").shift(1) == pl.col("clause"))
    pairs = content.with_columns(_prev=pl.when(same).then(pl.col("tid").shift(1))).filter(pl.col("_prev").is_not_null())
    return pl.concat(
        [
            pairs.select(key, "tid", pl.col("_prev").alias("neighbour")),
            pairs.select(key, pl.col("_prev").alias("tid"), pl.col("tid").alias("neighbour")),
        ]
    ).unique()


def _slots(rows: pl.DataFrame, key: str) -> pl.DataFrame:
    """key, slot (`value|unit` of each number with a unit), shown (`value unit`) — distinct."""
    return (
        rows.filter(pl.col("is_num") & (pl.col("unit") != ""))
        .select(key, (pl.col("token") + "|" + pl.col("unit")).alias("slot"), pl.col("unit"), pl.col("token"))
        .unique()
    )


def _value_conflicts(claim_rows: pl.DataFrame, scope_rows: pl.DataFrame) -> pl.DataFrame:
    """rid → value_conflicts: claim slots the scope lacks while it gives the same unit another value."""
    claim_slots = _slots(claim_rows, "rid")
    evidence_slots = _slots(scope_rows, "rid")
    missing = claim_slots.join(evidence_slots, on=["rid", "slot"], how="anti")
    other = evidence_slots.join(claim_slots.select("rid", "slot"), on=["rid", "slot"], how="anti")
    return (
        missing.join(other, on=["rid", "unit"], suffix="_ev")
        .group_by("rid", "slot")
        .agg(pl.col("token").first(), pl.col("unit").first(), ev=pl.col("token_ev").unique().sort().str.join("/"))
        .group_by("rid")
        .agg(value_conflicts=pl.format("claim {} {} vs evidence {} {}", "token", "unit", "ev", "unit").sort())
    )


def _group_conflicts(
    claim_rows: pl.DataFrame, scope_rows: pl.DataFrame, words: pl.DataFrame, absent: pl.DataFrame
) -> pl.DataFrame:
    """rid → group_conflicts, _group_tids: a claim member `absent` from the scope, another member in it."""
    claim_groups = (
        claim_rows.filter(pl.col("groups").is_not_null())
        .select("rid", "tid", "lower", "groups")
        .explode("groups")
        .join(absent, on=["rid", "tid"], how="semi")
    )
    evidence_groups = (
        scope_rows.filter(pl.col("groups").is_not_null()).select("rid", "tid", "lower", "groups").explode("groups")
    )
    evidence_groups = evidence_groups.join(words.select("rid", "tid"), on=["rid", "tid"], how="anti")
    return (
        # In claim order, so a word of two groups (business: day kind and tier) is reported under its first group.
        claim_groups.join(evidence_groups, on=["rid", "groups"], suffix="_ev", maintain_order="left")
        .group_by("rid", "lower")
        .agg(
            ev=pl.col("lower_ev").unique().sort().str.join("/"),
            group=pl.col("groups").first(),
            tid=pl.col("tid").first(),
        )
        .group_by("rid")
        .agg(
            group_conflicts=pl.format("{}: claim {} vs evidence {}", "group", "lower", "ev").sort(),
            _group_tids=pl.col("tid"),
        )
    )


def _first_non_empty(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Per rid the first part's row that has one (the union scope wins over the first sentence's)."""
    return pl.concat(parts, how="diagonal_relaxed").unique("rid", keep="first", maintain_order=True)


def find_conflicts(
    claim_rows: pl.DataFrame,
    chosen: pl.DataFrame,
    words: pl.DataFrame,
    found: pl.DataFrame,
    sentence_rows_: pl.DataFrame,
) -> pl.DataFrame:
    """rid → value_conflicts, group_conflicts, name_conflicts (lists of `claim vs evidence`), negation_conflict.

    Each check reads only the rows it needs (numbers, group words, names, negated words), so claims without any
    cost nothing beyond a filter.
    """
    pairs = chosen.select("sid", "rid", "round")
    first = chosen.filter(pl.col("round") == 0).select("rid", "sid")
    # Values and exclusive groups are read in all chosen sentences together and in the first one alone: a word
    # picked from another sentence must not hide that the best sentence says otherwise (annual vs monthly).
    # Years are left to the union: a claim that joins events of several years is usually told sentence by sentence.
    claim_numbers = claim_rows.filter(pl.col("is_num") & (pl.col("unit") != ""))
    number_rows = (
        sentence_rows_.filter(pl.col("is_num") & (pl.col("unit") != ""))
        .join(pairs, on="sid")
        .join(claim_numbers.select("rid").unique(), on="rid", how="semi")
    )
    values = _first_non_empty(
        [
            _value_conflicts(claim_numbers, number_rows),
            _value_conflicts(claim_numbers.filter(pl.col("unit") != "yr"), number_rows.filter(pl.col("round") == 0)),
        ],
    )
    claim_members = claim_rows.filter(pl.col("groups").is_not_null())
    member_rows = (
        sentence_rows_.filter(pl.col("groups").is_not_null())
        .join(pairs, on="sid")
        .join(claim_members.select("rid").unique(), on="rid", how="semi")
    )
    unfound = found.filter(~pl.col("_found")).select("rid", "tid")
    in_first = member_rows.filter(pl.col("round") == 0).select("rid", "tid")
    groups = _first_non_empty(
        [
            _group_conflicts(claim_members, member_rows, words, unfound),
            _group_conflicts(
                claim_members,
                member_rows.filter(pl.col("round") == 0),
                words,
                claim_members.select("rid", "tid").join(in_first, on=["rid", "tid"], how="anti"),
            ),
        ],
    )
    # Names: a name of the claim is absent and the first chosen sentence has, beside one of its neighbouring words,
    # a name the claim does not have (CEO John Smith vs CEO Jane Doe). Group members (months, weekdays, tiers)
    # conflict as groups, not as names.
    missing_names = found.filter(~pl.col("_found") & pl.col("is_name") & ~pl.col("is_num")).select(
        "rid", "tid", "shown"
    )
    missing_names = missing_names.join(claim_members.select("rid", "tid"), on=["rid", "tid"], how="anti")
    with_missing = first.join(missing_names.select("rid").unique(), on="rid", how="semi")
    claim_neighbours = _neighbours(claim_rows.join(with_missing.select("rid"), on="rid", how="semi"), "rid").join(
        missing_names, on=["rid", "tid"]
    )
    first_rows = sentence_rows_.join(with_missing.select("sid").unique(), on="sid", how="semi")
    evidence_names = (
        first_rows.filter(pl.col("is_name") & pl.col("groups").is_null())
        .join(with_missing, on="sid")
        .join(words.select("rid", "tid"), on=["rid", "tid"], how="anti")
        .select("rid", "sid", "tid", "lower")
    )
    evidence_neighbours = _neighbours(first_rows, "sid").join(evidence_names, on=["sid", "tid"])
    names = (
        claim_neighbours.join(evidence_neighbours, on=["rid", "neighbour"], suffix="_ev")
        .group_by("rid", "shown")
        .agg(ev=pl.col("lower").str.replace(r"'s$", "").unique().sort().str.join("/"), tid=pl.col("tid").first())
        .group_by("rid")
        .agg(name_conflicts=pl.format("claim {} vs evidence {}", "shown", "ev").sort(), _name_tids=pl.col("tid"))
    )
    # Negation: a word found on both sides that is negated on one side only. The evidence side is the word's
    # occurrence in the first chosen sentence that holds it, in the clause that holds the most claim words. Only
    # claims with a negated word, or whose chosen sentences have one, are read.
    negated_claims = claim_rows.filter(pl.col("negated")).select("rid").unique()
    negated_sentences = sentence_rows_.filter(pl.col("negated")).select("sid").unique()
    suspects = pl.concat([negated_claims, pairs.join(negated_sentences, on="sid", how="semi").select("rid")]).unique()
    claim_negated = (
        claim_rows.filter(pl.col("is_content"))
        .join(suspects, on="rid", how="semi")
        .group_by("rid", "tid")
        .agg(c_neg=pl.col("negated").any(), shown=pl.col("lower").first())
    )
    occurrences = (
        sentence_rows_.filter(pl.col("is_content"))
        .join(pairs.join(suspects, on="rid", how="semi"), on="sid")
        .join(words.select("rid", "tid"), on=["rid", "tid"], how="semi")
        .with_columns(_clause_words=pl.col("tid").n_unique().over("rid", "sid", "clause"))
    )
    evidence_negated = (
        occurrences.sort(["rid", "tid", "round", "_clause_words", "pos"], descending=[False, False, False, True, False])
        .unique(["rid", "tid"], keep="first", maintain_order=True)
        .select("rid", "tid", pl.col("negated").alias("e_neg"))
    )
    negation = (
        claim_negated.join(evidence_negated, on=["rid", "tid"])
        .filter(pl.col("c_neg") != pl.col("e_neg"))
        .group_by("rid")
        .agg(negated_words=pl.col("shown").sort())
        .with_columns(negation_conflict=pl.lit(True))
    )
    result = chosen.select("rid").unique()
    for part in (values, groups, names, negation):
        result = result.join(part, on="rid", how="left")
    return result
