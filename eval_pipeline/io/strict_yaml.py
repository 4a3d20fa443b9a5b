"""The one YAML reader of every input file: no duplicate keys, no tab indentation, errors as `file:line:column`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from eval_pipeline.io.storage import InputError

_MERGE_TAG = "tag:yaml.org,2002:merge"
_TAB_PROBLEM = "found character '\\t' that cannot start any token"
# An alias repeats the value of its anchor wherever it is used: a few hundred bytes of nested aliases ("billion
# laughs") stand for gigabytes once a reader expands them (canonical JSON of fixtures, pydantic, reports). A file may
# use at most MAX_ALIASES aliases, which together may add at most MAX_ALIAS_NODES nodes to what the file writes out.
MAX_ALIASES = 1_000
MAX_ALIAS_NODES = 100_000


class YamlError(InputError):
    """A YAML file that cannot be read: the message is `file:line:column: what is wrong`."""

    def __init__(self, source: str, line: int, column: int, message: str) -> None:
        super().__init__(f"{source}:{line}:{column}: {message}")
        self.source, self.line, self.column, self.problem = source, line, column, message


class _DuplicateKeyError(ConstructorError):
    """A mapping that states one key twice (PyYAML would silently keep the last value)."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key given twice (merge keys `<<` may still be overridden) and aliases beyond
    MAX_ALIASES, or expanding to more than MAX_ALIAS_NODES nodes, or inside their own anchor."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> its node count with aliases expanded, once composed
        self._aliases = 0
        self._alias_nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if not self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            children = (
                node.value
                if isinstance(node, SequenceNode)
                else [n for pair in node.value for n in pair]
                if isinstance(node, MappingNode)
                else []
            )
            # children are composed before their parent: each size is known (an alias's is its anchor's)
            self._sizes[id(node)] = 1 + sum(self._sizes[id(child)] for child in children)
            return node
        mark = self.peek_event().start_mark
        node = super().compose_node(parent, index)
        self._aliases += 1
        if self._aliases > MAX_ALIASES:
            raise ComposerError(
                None, None, f"more than {MAX_ALIASES} aliases (a file may use at most {MAX_ALIASES})", mark
            )
        size = self._sizes.get(id(node))
        if size is None:  # its anchor is still being composed
            raise ComposerError(None, None, "alias used inside its own anchor (a recursive value)", mark)
        self._alias_nodes += size
        if self._alias_nodes > MAX_ALIAS_NODES:
            raise ComposerError(
                None,
                None,
                f"aliases expand to more than {MAX_ALIAS_NODES} nodes (nested aliases); "
                "write the values out or use fewer aliases",
                mark,
            )
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            self._refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep=deep)

    def _refuse_duplicate_keys(self, node: MappingNode) -> None:
        first: dict[Any, Node] = {}
        for key_node, _ in node.value:
            # Keys pulled in by `<<: *anchor` are defaults that explicit keys override, by design.
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = first.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: SafeConstructor reports it with its own mark
            if earlier is not key_node:
                raise _DuplicateKeyError(
                    None,
                    None,
                    f"duplicate key {key!r} (first given at line {earlier.start_mark.line + 1}, "
                    f"column {earlier.start_mark.column + 1}); a key may appear once in a mapping",
                    key_node.start_mark,
                )


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file: its value, and the node tree that places each value at a line and column."""

    value: Any
    root: Node | None
    source: str

    def where(self, path: Sequence[Any]) -> str:
        """`file:line:column` of the key or item at a path of keys and indexes (as deep as the path exists)."""
        node, found = self.root, self.root
        for part in path:
            step = _child(node, part)
            if step is None:
                break
            found, node = step
        if found is None:
            return f"{self.source}:1:1"
        return f"{self.source}:{found.start_mark.line + 1}:{found.start_mark.column + 1}"


def _child(node: Node | None, part: Any) -> tuple[Node, Node] | None:
    """(the node to point at: the key of a mapping entry or the item, the value node) of one path step."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.value == str(part):
                return key_node, value_node
        return None
    if isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None


def _position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _decode(data: str | bytes, source: str) -> str:
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise YamlError(source, line, column, f"invalid UTF-8 (byte 0x{data[exc.start]:02x})") from exc


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> YamlError:
    """The file:line:column form of a PyYAML error."""
    if isinstance(exc, yaml.reader.ReaderError):
        line, column = _position(text, exc.position)
        code = ord(exc.character) if isinstance(exc.character, str) else exc.character
        return YamlError(
            source, line, column, f"unacceptable character #x{code:04x}: control characters are not allowed"
        )
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if problem == _TAB_PROBLEM and mark is not None:
            line_text = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
            indent = len(line_text) - len(line_text.lstrip(" \t"))
            problem = (
                "tab character used as indentation (YAML indents with spaces only)"
                if mark.column < indent
                else "tab character where YAML needs a space (use spaces around ':' and '-')"
            )
        elif exc.context and exc.problem:
            if exc.context_mark is not None and exc.context_mark is not exc.problem_mark:
                problem = (
                    f"{exc.problem} ({exc.context} that starts at line {exc.context_mark.line + 1}, "
                    f"column {exc.context_mark.column + 1})"
                )
            else:
                problem = f"{exc.problem} ({exc.context})"
        if mark is not None:
            return YamlError(source, mark.line + 1, mark.column + 1, problem)
        return YamlError(source, 1, 1, problem)
    return YamlError(source, 1, 1, str(exc).splitlines()[0] if str(exc) else "invalid YAML")


def parse_yaml(data: str | bytes, source: str) -> YamlDocument:
    """A YAML file as a YamlDocument; YamlError (an InputError) with file:line:column when it is not strict YAML."""
    text = _decode(data, source)
    try:
        loader = StrictLoader(text)  # the reader checks for control characters here, before any parsing
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from exc
    try:
        root = loader.get_single_node()
        value = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from exc
    except RecursionError as exc:
        raise YamlError(source, 1, 1, "YAML nested too deeply") from exc
    finally:
        loader.dispose()
    return YamlDocument(value, root, source)


def load_yaml(data: str | bytes, source: str) -> Any:
    """The value of a YAML file; YamlError (an InputError) with file:line:column when it is not strict YAML."""
    return parse_yaml(data, source).value
