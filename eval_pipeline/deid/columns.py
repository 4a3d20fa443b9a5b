"""Addressing string leaves inside nested polars columns: list them, read them flat, rewrite them in place.

A leaf path names the top-level column and then struct fields; lists along the way are implicit, so
`("steps", "args_json")` is every step's args_json and `("alternatives", "args_json")` every call of every path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import polars as pl

LeafPath = tuple[str, ...]
ROW = "__deid_row"
VALUE = "__deid_value"


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


def leaf_values(frame: pl.DataFrame, path: LeafPath) -> pl.DataFrame:
    """The non-null values of one leaf, flat, with the 0-based row of the frame they came from (`ROW`, `VALUE`)."""
    _check(frame.schema, path)
    flat = frame.select(pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW), pl.col(path[0]).alias(VALUE))
    dtype = frame.schema[path[0]]
    rest = list(path[1:])
    while dtype != pl.String:
        if isinstance(dtype, pl.List | pl.Array):
            flat = flat.explode(VALUE)
            dtype = dtype.inner
        else:
            name = rest.pop(0)
            flat = flat.with_columns(pl.col(VALUE).struct.field(name).alias(VALUE))
            dtype = _field_dtype(dtype, name)
    return flat.filter(pl.col(VALUE).is_not_null())


def rewrite_leaves(
    schema: pl.Schema | dict[str, pl.DataType], paths: Iterable[LeafPath], fn: Callable[[pl.Expr], pl.Expr]
) -> list[pl.Expr]:
    """Expressions that apply `fn` to the given leaves and rebuild each touched top-level column with its dtype."""
    tree: dict[str, dict] = {}
    for path in paths:
        _check(schema, path)
        node = tree.setdefault(path[0], {})
        for name in path[1:]:
            node = node.setdefault(name, {})

    def build(expr: pl.Expr, dtype: pl.DataType, node: dict) -> pl.Expr:
        if isinstance(dtype, pl.List):
            return expr.list.eval(build(pl.element(), dtype.inner, node))
        if isinstance(dtype, pl.Array):
            return expr.arr.eval(build(pl.element(), dtype.inner, node))
        if isinstance(dtype, pl.Struct):
            return expr.struct.with_fields(
                [build(pl.field(name), _field_dtype(dtype, name), sub).alias(name) for name, sub in node.items()]
            )
        return fn(expr)

    columns = dict(schema)
    return [build(pl.col(name), columns[name], node).alias(name) for name, node in tree.items()]
