"""trec_eval's measure table and nicknames, and the records passed between stages: Selected, Options, Evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


@dataclass(frozen=True)
class Measure:
    """A trec_eval measure: printed name, parameter kind and defaults, print format, how `all` aggregates it, help text.

    kind: single (no parameters), cutoffs (integer ranks, `P_10`), levels (fractions printed %3.2f,
    `iprec_at_recall_0.10`), values (numbers in order, printed after the name as given: `utility_2,-1,0,0`),
    gains (`level=gain` pairs and, for rbp, `p=persistence`: `ndcg_1=0,2=3`).
    """

    name: str
    about: str = ""
    kind: str = "single"
    defaults: tuple = ()
    integer: bool = False
    aggregate: str = "mean"  # mean | sum | gm | count | runid | none
    summary_only: bool = False
    qrels_jg: bool = False

    @property
    def float_params(self) -> bool:
        """Whether the printed names carry %3.2f fractions (iprec_at_recall_0.10) rather than integers."""
        return self.kind == "levels"


# In trec_eval's own print order (its measure table), so output lines come out in the same order.
TABLE: tuple[Measure, ...] = (
    Measure("runid", "the run's tag (from the run file's last line)", aggregate="runid", summary_only=True),
    Measure("num_q", "number of queries evaluated", integer=True, aggregate="count", summary_only=True),
    Measure("num_ret", "documents retrieved (summed in 'all')", integer=True, aggregate="sum"),
    Measure("num_rel", "relevant documents in the qrels (summed in 'all')", integer=True, aggregate="sum"),
    Measure("num_rel_ret", "relevant documents retrieved (summed in 'all')", integer=True, aggregate="sum"),
    Measure("map", "mean average precision"),
    Measure("gm_map", "geometric mean of average precision (summary only)", aggregate="gm", summary_only=True),
    Measure("Rprec", "precision after R documents, R = number of relevant documents"),
    Measure("bpref", "binary preference: relevant documents above judged non-relevant ones"),
    Measure("recip_rank", "reciprocal rank of the first relevant document"),
    Measure("iprec_at_recall", "interpolated precision at recall levels", "levels", RECALL_LEVELS),
    Measure("P", "precision at cutoffs", "cutoffs", CUTOFFS),
    Measure(
        "relstring", "grades of the first N documents as a string (per query only)", "values", (10.0,), aggregate="none"
    ),
    Measure("recall", "recall at cutoffs", "cutoffs", CUTOFFS),
    Measure("infAP", "inferred AP (Yilmaz & Aslam): negative grades are pooled but unjudged"),
    Measure("gm_bpref", "geometric mean of bpref (summary only)", aggregate="gm", summary_only=True),
    Measure("Rprec_mult", "precision at multiples of R", "levels", R_MULTIPLES),
    Measure(
        "utility",
        "p1*rel_ret + p2*nonrel_ret + p3*rel_not_ret + p4*nonrel_not_ret (p4 needs -N)",
        "values",
        (1.0, -1.0, 0.0, 0.0),
    ),
    Measure("11pt_avg", "interpolated precision averaged over the recall levels given", "values", RECALL_LEVELS),
    Measure("binG", "binary G: relevant documents discounted by the non-relevant ones above them"),
    Measure("G", "normalized gain G (-m G.1=3.5,2=9)", "gains"),
    Measure("dcg", "discounted cumulative gain (not in all_trec)", "gains"),
    Measure("ideal_dcg", "ideal discounted cumulative gain (not in all_trec)", "gains"),
    Measure("ndcg", "nDCG over the whole ranking (-m ndcg.1=0,2=3 sets the gain of each grade)", "gains"),
    Measure("ndcg_rel", "nDCG averaged over the relevant documents (gains as ndcg)", "gains"),
    Measure("Rndcg", "nDCG averaged at the grade boundaries of the ideal ranking (gains as ndcg)", "gains"),
    Measure("ndcg_cut", "nDCG at cutoffs, gain = grade", "cutoffs", CUTOFFS),
    Measure("map_cut", "average precision truncated at cutoffs", "cutoffs", CUTOFFS),
    Measure("relative_P", "precision at cutoffs relative to the best possible", "cutoffs", CUTOFFS),
    Measure("success", "1 if a relevant document is in the top k", "cutoffs", (1, 5, 10)),
    Measure("set_P", "precision of the whole retrieved set"),
    Measure("set_relative_P", "set precision relative to the best possible"),
    Measure("set_recall", "recall of the whole retrieved set"),
    Measure("set_map", "set precision x set recall"),
    Measure("set_F", "F of set precision and recall, beta = the parameter (-m set_F.0.5)", "values", (1.0,)),
    Measure(
        "num_nonrel_judged_ret",
        "judged non-relevant documents retrieved (summed in 'all')",
        integer=True,
        aggregate="sum",
    ),
    Measure("map_avgjg", "map averaged over judgment groups (-R qrels_jg)", qrels_jg=True),
    Measure("P_avgjg", "P at cutoffs averaged over judgment groups (-R qrels_jg)", "cutoffs", CUTOFFS, qrels_jg=True),
    Measure(
        "Rprec_mult_avgjg",
        "Rprec_mult averaged over judgment groups (-R qrels_jg)",
        "levels",
        R_MULTIPLES,
        qrels_jg=True,
    ),
    Measure("yaap", "yet another average precision (Robertson; not in all_trec)"),
    Measure("rbp", "rank-biased precision, persistence p (-m rbp.p=0.95; default 0.9)", "gains"),
    Measure("rbp_resid", "rbp's residual: what unjudged documents could still add (-m rbp_resid.p=0.95)", "gains"),
    Measure("unj", "share of unjudged documents in the top k", "cutoffs", (5, 10, 20)),
)
MEASURE_BY_NAME = {m.name: m for m in TABLE}
OFFICIAL = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
)
ALL_TREC = (
    *OFFICIAL, "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility", "11pt_avg", "ndcg",
    "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P",
    "set_recall", "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret",
)  # fmt: skip
# The measures of all_trec, in print order; TABLE adds dcg, ideal_dcg, yaap and the qrels_jg measures.
MEASURES: tuple[Measure, ...] = tuple(m for m in TABLE if m.name in ALL_TREC)
NICKNAMES = {
    "official": OFFICIAL,
    "all_trec": ALL_TREC,
    "set": (
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "utility",
        "set_P",
        "set_recall",
        "set_relative_P",
        "set_map",
        "set_F",
    ),
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"),
}
# trec_eval's preference measures need its prefs / qrels_prefs relevance formats, which are not read here.
PREFERENCE_NICKNAMES = ("prefs", "all_prefs")
# The measures computable from -R qrels_jg judgments (each standing for its per-group measure).
JG_BASE = {"map_avgjg": "map", "P_avgjg": "P", "Rprec_mult_avgjg": "Rprec_mult"}


@dataclass(frozen=True)
class Selected:
    """A measure chosen for output with its parameters: cutoffs or levels (sorted), values (in order), or gain pairs.

    `printable` is the parameter text as given on the command line for values and gains measures, which trec_eval
    appends to the printed name (`set_F_0.5`); None for the defaults.
    """

    measure: Measure
    params: tuple = ()
    printable: str | None = None

    def columns(self) -> list[str]:
        """The printed names of this measure's values, e.g. P_5, iprec_at_recall_0.10, utility_2,-1,0,0."""
        if self.measure.kind in ("cutoffs", "levels"):
            return [f"{self.measure.name}_{_param_text(self.measure, p)}" for p in self.params]
        if self.printable is not None:
            return [f"{self.measure.name}_{self.printable}"]
        return [self.measure.name]

    def pairs(self) -> dict[str, float]:
        """The `name=value` parameters of a gains measure (the first value of a repeated name)."""
        out: dict[str, float] = {}
        for name, value in self.params if self.measure.kind == "gains" else ():
            out.setdefault(name, value)
        return out


@dataclass
class Evaluation:
    """Per-query values (one column per printed measure name) and the `all` summary, ready to print.

    `zscore` marks values converted to z-scores (printed with a `Z` prefix, as trec_eval -Z does).
    """

    selected: list[Selected]
    per_query: pl.DataFrame
    summary: dict[str, object] = field(default_factory=dict)
    zscore: bool = False


@dataclass
class Options:
    """evaluate()'s options: -l, --gain, -M, -J, -N and whether duplicate docs in the run are refused."""

    level: int
    gain: str
    max_docs: int | None
    judged_only: bool
    num_docs: int
    refuse_duplicates: bool = False


def _param_text(measure: Measure, param: float) -> str:
    """A parameter as trec_eval appends it to a printed name: %3.2f for levels, %ld for cutoffs."""
    return f"{param:3.2f}" if measure.float_params else str(int(param))
