"""Addressing string leaves inside nested polars columns: list them, read them flat, rewrite them in place.

A leaf path names the top-level column and then struct fields; lists along the way are implicit, so
`("steps", "args_json")` is every step's args_json and `("alternatives", "args_json")` every call of every path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import polars as pl

LeafPath = tuple[str, ...]
ROW = "__deid_row"
VALUE = "__deid_value"
COUNT = "__deid_count"


def leaf_name(path: LeafPath) -> str:
    """The dotted name of a leaf path (`steps.args_json`)."""
    return ".".join(path)


def string_paths(schema: pl.Schema | dict[str, pl.DataType]) -> list[LeafPath]:
    """Every string leaf of a schema, inside lists and structs at any depth."""

    def walk(dtype: pl.DataType, path: LeafPath) -> Iterator[LeafPath]:
        if isinstance(dtype, pl.List | pl.Array):
            yield from walk(dtype.inner, path)
        elif isinstance(dtype, pl.Struct):
            for field in dtype.fields:
                yield from walk(field.dtype, (*path, field.name))
        elif dtype == pl.String:
            yield path

    return [p for name, dtype in dict(schema).items() for p in walk(dtype, (name,))]


def _field_dtype(dtype: pl.DataType, name: str) -> pl.DataType:
    for field in dtype.fields:  # type: ignore[attr-defined]
        if field.name == name:
            return field.dtype
    raise KeyError(f"struct has no field {name!r}: {dtype}")


def _check(schema: pl.Schema | dict[str, pl.DataType], path: LeafPath) -> None:
    dtype = dict(schema).get(path[0])
    if dtype is None:
        raise KeyError(f"column {path[0]!r} is missing from the frame; de-identification needs every text column")
    rest = list(path[1:])
    while True:
        if isinstance(dtype, pl.List | pl.Array):
            dtype = dtype.inner
        elif isinstance(dtype, pl.Struct):
            if not rest:
                raise KeyError(f"{leaf_name(path)} ends on a struct, not a string")
            dtype = _field_dtype(dtype, rest.pop(0))
        elif dtype == pl.String and not rest:
            return
        else:
            raise KeyError(f"{leaf_name(path)} is not a string leaf (found {dtype})")


def _flat(frame: pl.DataFrame, path: LeafPath, rows: bool) -> pl.LazyFrame:
    """The non-null values of one leaf, flat (`VALUE`), with the 0-based frame row (`ROW`) when `rows`."""
    _check(frame.schema, path)
    levels = 0

    def select(expr: pl.Expr, dtype: pl.DataType, rest: list[str]) -> pl.Expr:
        nonlocal levels
        # The struct field is taken inside the lists before they are exploded, so the other fields (long texts
        # among them) are never copied.
        if isinstance(dtype, pl.List):
            levels += 1
            return expr.list.eval(select(pl.element(), dtype.inner, rest))
        if isinstance(dtype, pl.Array):
            levels += 1
            return expr.arr.eval(select(pl.element(), dtype.inner, rest))
        if isinstance(dtype, pl.Struct):
            return select(expr.struct.field(rest[0]), _field_dtype(dtype, rest[0]), rest[1:])
        return expr

    value = select(pl.col(path[0]), frame.schema[path[0]], list(path[1:])).alias(VALUE)
    flat = frame.lazy().select(*([pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW)] if rows else []), value)
    for _ in range(levels):
        flat = flat.explode(VALUE)
    return flat.filter(pl.col(VALUE).is_not_null())


def leaf_values(frame: pl.DataFrame, path: LeafPath) -> pl.DataFrame:
    """The non-null values of one leaf, flat, with the 0-based row of the frame they came from (`ROW`, `VALUE`)."""
    return _flat(frame, path, rows=True).collect()


def distinct_values(frame: pl.DataFrame, path: LeafPath) -> pl.DataFrame:
    """The distinct non-null values of one leaf (`VALUE`, in no particular order) and how often each occurs
    (`COUNT`)."""
    values = _flat(frame, path, rows=False).collect()[VALUE]
    return values.value_counts(name=COUNT).with_columns(pl.col(COUNT).cast(pl.Int64))


class StringLeaves:
    """Every string leaf of a frame, read for a scan: the distinct values of all of them together at once, the
    distinct values of each and the rows of a leaf (leaf_values) only once a match is to be spread back over them."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.paths = string_paths(frame.schema)
        flat = [_flat(frame, path, rows=False) for path in self.paths]
        self.distinct = pl.concat(flat).unique().collect() if flat else pl.DataFrame(schema={VALUE: pl.String})
        self._rows: dict[int, pl.DataFrame] = {}
        self._leaf_of: pl.DataFrame | None = None

    def spread(self, matched: pl.DataFrame) -> Iterator[tuple[LeafPath, pl.DataFrame]]:
        """For each leaf holding a value of `matched` (distinct `VALUE`s and their `match` lists), one row per row of
        the leaf (`ROW`) and element of its value's list, in the order of the rows and then of each list: what
        exploding the lists computed on every row gives."""
        matched = matched.filter(pl.col("match").list.len() > 0)
        if matched.height == 0:
            return
        if self._leaf_of is None:
            self._leaf_of = pl.concat(
                [
                    _flat(self.frame, path, rows=False).unique().with_columns(pl.lit(i, dtype=pl.Int64).alias("leaf"))
                    for i, path in enumerate(self.paths)
                ]
            ).collect()
        # One join tells which leaves hold a matched value at all (a membership test per leaf rebuilds its set).
        held = self._leaf_of.join(matched.select(VALUE), on=VALUE, how="semi")["leaf"].unique().sort().to_list()
        for i in held:
            path = self.paths[i]
            if i not in self._rows:
                self._rows[i] = leaf_values(self.frame, path)
            joined = self._rows[i].join(matched, on=VALUE, how="inner", maintain_order="left")
            yield path, joined.select(ROW, "match").explode("match").drop_nulls("match")


def rewrite_each_leaf(
    schema: pl.Schema | dict[str, pl.DataType], fns: Mapping[LeafPath, Callable[[pl.Expr], pl.Expr]]
) -> list[pl.Expr]:
    """Expressions that apply each leaf's own function to it and rebuild each touched top-level column with its
    dtype."""
    tree: dict[str, dict] = {}
    for path, fn in fns.items():
        _check(schema, path)
        node = tree.setdefault(path[0], {})
        for name in path[1:-1]:
            node = node.setdefault(name, {})
        if len(path) == 1:
            tree[path[0]] = fn  # type: ignore[assignment]
        else:
            node[path[-1]] = fn

    def build(expr: pl.Expr, dtype: pl.DataType, node: dict | Callable[[pl.Expr], pl.Expr]) -> pl.Expr:
        if isinstance(dtype, pl.List):
            return expr.list.eval(build(pl.element(), dtype.inner, node))
        if isinstance(dtype, pl.Array):
            return expr.arr.eval(build(pl.element(), dtype.inner, node))
        if isinstance(dtype, pl.Struct):
            fields = node.items()  # type: ignore[union-attr]
            return expr.struct.with_fields(
                [build(pl.field(n), _field_dtype(dtype, n), sub).alias(n) for n, sub in fields]
            )
        return node(expr)  # type: ignore[operator]

    columns = dict(schema)
    return [build(pl.col(name), columns[name], node).alias(name) for name, node in tree.items()]


def keep_matches(matched: pl.DataFrame, keep: pl.Series) -> pl.DataFrame:
    """`matched` (`VALUE`, a `match` list) with each list keeping only the matches in `keep`, in their order; a value
    none of whose matches is kept is left out."""
    # Exploded and filtered by one hash lookup: `list.filter` with `is_in` inside the list evaluation copies the set
    # for every list (gigabytes over tens of thousands of values).
    flat = matched.select(VALUE, "match").with_row_index("__deid_list").explode("match")
    kept = flat.filter(pl.col("match").is_in(keep.implode()))
    return (
        kept.group_by("__deid_list", maintain_order=True)
        .agg(pl.col(VALUE).first(), pl.col("match"))
        .drop("__deid_list")
    )
