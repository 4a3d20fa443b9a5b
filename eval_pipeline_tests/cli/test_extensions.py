"""Commands of other installed distributions join the command line, and a broken one cannot take it down."""

import importlib.metadata
from dataclasses import dataclass

from eval_pipeline.cli import build_parser


@dataclass
class FakeEntry:
    name: str
    value: str
    register: object

    def load(self):
        return self.register


def _hello(sub):
    hello = sub.add_parser("hello", help="say hello")
    hello.set_defaults(handler=lambda args: 0)


def _broken(sub):
    sub.add_parser("broken")
    raise RuntimeError("plugin bug")


def _clash(sub):
    sub.add_parser("gate")


def _with_entries(monkeypatch, *entries):
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group: list(entries) if group == "eval_pipeline.commands" else []
    )


def test_an_extension_command_is_added(monkeypatch):
    _with_entries(monkeypatch, FakeEntry("hello", "pkg.hello:register", _hello))
    args = build_parser().parse_args(["hello"])
    assert args.handler(args) == 0


def test_a_failing_or_clashing_extension_is_left_out_with_a_warning(monkeypatch, capsys):
    _with_entries(
        monkeypatch,
        FakeEntry("broken", "pkg.broken:register", _broken),
        FakeEntry("gate", "pkg.gate:register", _clash),
        FakeEntry("hello", "pkg.hello:register", _hello),
    )
    parser = build_parser()
    err = capsys.readouterr().err
    assert "command 'broken' (pkg.broken:register) not loaded: plugin bug" in err
    assert "command 'gate' (pkg.gate:register) not loaded: the name is taken" in err
    choices = next(a for a in parser._subparsers._group_actions).choices
    assert "broken" not in choices and "hello" in choices
    assert "--baseline" in choices["gate"].format_help()
