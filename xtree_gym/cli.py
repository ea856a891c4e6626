"""The ``xtree`` command: parses arguments, calls the library, prints. Nothing else lives here.

Subcommands of the core are defined below. Feature packages add their own through a
``register_cli(subparsers, collect_subparsers)`` function in a module listed in
``_PLUGIN_MODULES``; a module whose optional dependencies are missing still registers (it
imports them only when its command runs).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .errors import XTreeError

# Modules that add subcommands (``xtree canon``, ``xtree collect <env>``, ``xtree demo``, ...).
_PLUGIN_MODULES = (
    "xtree_gym.mining.cli",
    "xtree_gym.canon.cli",
    "xtree_gym.collect.scienceworld",
    "xtree_gym.collect.webshop",
    "xtree_gym.collect.miniwob",
    "xtree_gym.demo",
    "xtree_gym.render.cli",
    "xtree_gym.reuserl.cli",
    "xtree_gym.agents.play.cli",
    "xtree_gym.adapters.serve_cli",
    "xtree_gym.agents.grpo.cli",
    "xtree_gym.agents.model.serve_cli",
    "xtree_gym.agents.sft_offline.rows_cli",
    "xtree_gym.corpus.cli",
)


_CORE_MODULE = "xtree_gym.mining.cli"
_CORE_COMMANDS = frozenset({"mine", "show", "tile", "stats"})
"""The core's own subcommands: ``xtree mine ...`` builds only their parser (0.1 s less start-up than
importing every feature module's, flags and help text included); ``xtree --help`` still lists them all."""


def build_parser(modules: Sequence[str] = _PLUGIN_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtree", description="Mine, inspect and use X-Trees of agent trajectories."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    collect = sub.add_parser("collect", help="build a corpus by running an environment")
    collect_sub = collect.add_subparsers(dest="env", metavar="ENV")

    def _collect_help(_: argparse.Namespace) -> int:
        collect.print_help()
        return 2

    collect.set_defaults(func=_collect_help)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == name or name.startswith(exc.name + ".")):
                continue  # feature module not present in this build
            raise
        module.register_cli(sub, collect_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .corpus.io import install_cleanup_handlers

    install_cleanup_handlers()  # SIGTERM/SIGHUP unwind like Ctrl-C: a write in progress removes its temp
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser((_CORE_MODULE,) if words[:1] and words[0] in _CORE_COMMANDS else _PLUGIN_MODULES)
    args = parser.parse_args(words)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = args.func(args)
    except XTreeError as exc:
        print(f"xtree {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:  # an optional package the command reached without its own check
        from .errors import dependency_error

        err = dependency_error(exc, f"xtree {_command_name(args)}")
        if err is None:
            raise
        print(f"xtree {args.command}: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `xtree show t.json | head`: the reader had what it wanted
        _quiet_stdout()
        return 0
    except OSError as exc:  # unreadable or unwritable path named on the command line
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"xtree {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into the closed pipe raises nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in tests): nothing to flush
        pass


def _command_name(args: argparse.Namespace) -> str:
    """``eval``, ``train sft``, ``collect scienceworld``: the command as typed."""
    sub = {"train": "method", "collect": "env"}.get(str(args.command))
    value = getattr(args, sub, None) if sub else None
    return f"{args.command} {value}" if isinstance(value, str) else str(args.command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
