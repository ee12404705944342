"""The machinery every ``git isopatch`` command shares: usage text and usage
errors laid out as git's parse-options prints them (with ``--porcelain``
or ``--json``, their record on stdout too), ``-h``, ``--help`` (the
manual page), ``--version``, git-style messages and writing to stdout.

``cli.py`` declares the commands and fills :data:`COMMANDS`; this module
knows nothing of captures (design: Command line; git's
Documentation/CodingGuidelines, "Error Messages").
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from . import __version__
from .outcome import FATAL_STATUS, USAGE_ERROR_CODE, USAGE_STATUS
from .request import OutputMode, UsageConflict

if TYPE_CHECKING:
    from collections.abc import Sequence

SYNOPSIS = "usage: git isopatch [<options>] [--] <command> [<arg>...]"
LIST_SYNOPSIS = "git isopatch list [--porcelain [-z] | --json] [-C <path>]"
PRUNE_SYNOPSIS = "git isopatch prune [--expire <time>] [--sessions] [-n] [-v] [-C <path>]"
END_SYNOPSIS = "git isopatch --session <name> --end [-C <path>]"
MCP_SYNOPSIS = (
    "git isopatch mcp [-C <path>] [--allow-unconfined] [--allow-network] [--allow-write <path>]"
)
#: The synopsis lines of ``git isopatch -h``: the capture, then the others.
CAPTURE_SYNOPSES = [
    SYNOPSIS,
    *(f"   or: {s}" for s in (LIST_SYNOPSIS, PRUNE_SYNOPSIS, END_SYNOPSIS, MCP_SYNOPSIS)),
]

#: parse-options.c: the option column is this wide, then a gap of 2; longer
#: names put their help on the next line.
_USAGE_OPTS_WIDTH = 24
_USAGE_GAP = 2


#: Command name (``isopatch``, ``list``, ``prune``, ``mcp``) -> (its typer
#: app, or where it is as ``module:name``: imported only when that command
#: runs, as pip's command table does; the synopsis lines of its ``-h``);
#: ``cli.py`` fills it.
COMMANDS: dict[str, tuple[typer.Typer | str, list[str]]] = {}


def command_app(name: str) -> typer.Typer:
    """The typer app of the command ``name`` (:data:`COMMANDS`)."""
    app = COMMANDS[name][0]
    if isinstance(app, str):
        module, _, attribute = app.partition(":")
        # __import__, not importlib.import_module: -X importtime sees it
        app = getattr(__import__(module, fromlist=[attribute]), attribute)
    return app


class UsageFailure(Exception):
    """A usage error found after parsing (conflicting options, bad values)."""


def stderr_line(line: str) -> None:
    """Write one message line; a control character in it is escaped
    (:func:`.git.quote.terminal_safe`), whatever put it there."""
    from .git.quote import terminal_safe  # not for -h and --version

    stderr_write(terminal_safe(line) + "\n")


def stderr_write(data: str | bytes) -> None:
    """Write ``data`` to stderr.  Where it cannot be written (its terminal
    went: ``EIO``; a closed pipe), the message is dropped, as git drops
    one, and so is every later one: the exit status still tells."""
    try:
        if isinstance(data, bytes):
            sys.stderr.flush()
            sys.stderr.buffer.write(data)
            sys.stderr.buffer.flush()
        else:
            sys.stderr.write(data)
            sys.stderr.flush()
    except (OSError, ValueError):  # ValueError: stderr closed
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - stays open to the end


def option_rows(name: str = "isopatch") -> list[tuple[str, str]]:
    """``(names, help)`` for every option of the typer command ``name``
    (``isopatch``, or the subcommand ``list`` or ``prune``), in order:
    ``("-o, --output <file>", "write the patch to <file>")``; a boolean
    with a negation reads ``--[no-]keep``.  The ``-h`` text, and the tests
    that keep the man page, README and completion in step, use this."""
    import typer.main

    command = typer.main.get_command(command_app(name))
    rows: list[tuple[str, str]] = []
    for param in command.params:
        if param.param_type_name != "option" or param.hidden:
            continue
        names = ", ".join(sorted(param.opts, key=len))
        if param.secondary_opts:
            names = names.replace("--", "--[no-]", 1)
        metavar = getattr(param, "metavar", None)
        if not param.is_flag and metavar:
            names += f" {metavar}"
        rows.append((names, param.help or ""))
    return rows


def short_usage(name: str = "isopatch") -> str:
    """The ``-h`` text of the command ``name`` (see :func:`option_rows`),
    laid out as git's parse-options prints it: the synopsis, a blank line,
    one line per option indented by four (its help after 26 characters, or
    on the next line after a long name), a blank line."""
    lines = [*COMMANDS[name][1], ""]
    for names, text in option_rows(name):
        column = f"    {names}"
        if len(column) <= _USAGE_OPTS_WIDTH:
            lines.append(f"{column.ljust(_USAGE_OPTS_WIDTH + _USAGE_GAP)}{text}")
        else:
            lines += [column, " " * (_USAGE_OPTS_WIDTH + _USAGE_GAP) + text]
    return "\n".join(lines) + "\n\n"


def usage_error(message: str, name: str, mode: OutputMode | None = None) -> NoReturn:
    """``error: <message>`` and the usage of the command ``name`` on stderr
    (git's usage_with_options); with ``mode`` (``--porcelain`` or
    ``--json`` on the command line: :func:`machine_mode`) the failure's
    ``version``, ``error`` and ``error-code usage`` on stdout too; exit 129."""
    stderr_line(f"error: {message}")
    sys.stderr.write(short_usage(name))
    sys.stderr.flush()
    if mode is not None:
        with contextlib.suppress(OutputFailure):  # 129 says it failed all the same
            write_failure(mode, message, USAGE_ERROR_CODE)
    raise SystemExit(USAGE_STATUS)


def write_failure(mode: OutputMode, message: str, code: str, hint: str | None = None) -> None:
    """A failure's ``version``, ``error``, ``error-code`` (and ``hint``) on
    stdout, as ``mode`` (``--porcelain`` [``-z``] or ``--json``) shows a
    result (:func:`.render.failure_fields`)."""
    from .render import encode, failure_fields

    write_stdout(encode(failure_fields(message, code, hint), mode))


def machine_mode(command: typer.core.TyperCommand, args: Sequence[str]) -> OutputMode | None:
    """The output mode of ``--porcelain`` [``-z``] or ``--json`` among the
    options of ``args`` as ``command``'s parser reads them, whatever else is
    wrong there: up to ``--`` (and the capture's command), an option's value
    (``--session --json``) not an option; ``None`` with neither (or both:
    itself a usage error), or where ``command`` takes neither."""
    options = [p for p in command.params if p.param_type_name == "option"]
    valued = {name for p in options if not p.is_flag for name in p.opts}
    interspersed = command.context_settings.get("allow_interspersed_args", True)
    given: set[str] = set()
    words = iter(args)
    for word in words:
        if word == "--" or word[:1] != "-" or word == "-":  # an argument
            if word != "--" and interspersed:
                continue
            break
        if word.startswith("--"):
            given.add(word)
            if word in valued:
                next(words, None)
            continue
        for at, letter in enumerate(word[1:], 2):  # -qz; -C<path>, -C <path>
            given.add(f"-{letter}")
            if f"-{letter}" in valued:
                if at == len(word):
                    next(words, None)
                break
    given &= {name for p in options for name in p.opts}
    if ("--json" in given) == ("--porcelain" in given):
        return None
    return OutputMode(porcelain="--porcelain" in given, nul="-z" in given, json="--json" in given)


def show_short_help(ctx: typer.Context, _param: object, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        write_stdout(short_usage(ctx.command.name or "isopatch"))
        raise SystemExit(USAGE_STATUS)


def show_manual(ctx: typer.Context, _param: object, value: bool) -> None:
    """``--help`` opens the man page, as ``git help isopatch`` does; after
    ``list``, ``prune`` or ``mcp``, the page's own part for that
    subcommand (:func:`.manual.manual_part`), as ``git worktree --help`` opens
    git-worktree(1) rather than git(1).  Without ``man``, the command's
    short usage (:func:`.manual.open_manual`).
    """
    if not value or ctx.resilient_parsing:
        return
    from .manual import open_manual  # only for --help

    write_stdout(b"")  # flushed first; a closed stdout is said
    open_manual(ctx.command.name or "isopatch", terminal_columns())  # when man is there
    stderr_line("warning: no 'man' program found; showing the short usage")
    write_stdout(short_usage(ctx.command.name or "isopatch"))
    raise SystemExit(0)


def show_version(ctx: typer.Context, _param: object, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        write_stdout(f"git-isopatch {__version__}\n")
        raise SystemExit(0)


def show_apparmor_profile(ctx: typer.Context, _param: object, value: bool) -> None:
    """``--apparmor-profile``: the AppArmor profile that lets the bubblewrap
    git-isopatch uses make user namespaces (:mod:`.sandbox.refusal`)."""
    if value and not ctx.resilient_parsing:
        from .sandbox.bwrap import find_bwrap
        from .sandbox.refusal import apparmor_profile

        found = find_bwrap()
        if isinstance(found, str):
            stderr_line(f"fatal: {found}")
            raise SystemExit(FATAL_STATUS)
        write_stdout(apparmor_profile(found.path))
        raise SystemExit(0)


class OutputFailure(Exception):
    """Our stdout cannot be written (closed, full disk, broken pipe)."""


#: Options every command (the capture, ``list``, ``prune``, ``mcp``) takes
#: alike (``--help`` among them), and the capture's ``--version``.
RepoPathOption = Annotated[
    str, typer.Option("-C", metavar="<path>", help="run as if started in <path>")
]
NulOption = Annotated[
    bool, typer.Option("-z", help="with --porcelain, end records with NUL, no quoting")
]
ManualOption = Annotated[
    bool,
    typer.Option("--help", help="open the manual page", is_eager=True, callback=show_manual),
]
VersionOption = Annotated[
    bool,
    typer.Option("--version", help="print the version", is_eager=True, callback=show_version),
]
TimeoutOption = Annotated[
    str | None,
    typer.Option(
        "--timeout",
        metavar="<seconds>",
        help="stop the command after <seconds> (exit 124); 0: no limit",
    ),
]

SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session", metavar="<name>", help="run as a step of session <name>, kept until --end"
    ),
]
EndOption = Annotated[bool, typer.Option("--end", help="with --session: end the session")]


AppArmorProfileOption = Annotated[
    bool,
    typer.Option(
        "--apparmor-profile",
        help="print an AppArmor profile that allows the sandbox (Ubuntu 23.10 and later)",
        is_eager=True,
        callback=show_apparmor_profile,
    ),
]
ShortHelpOption = Annotated[
    bool,
    typer.Option("-h", help="show this usage", is_eager=True, callback=show_short_help),
]


def write_stdout(data: bytes | str) -> None:
    """Write ``data`` (text as stdout encodes it) to stdout; raise
    :class:`OutputFailure` when it is closed or fails: a lost result is never exit 0."""
    if sys.stdout is None:
        raise OutputFailure("stdout is closed")
    try:
        sys.stdout.flush()
        if isinstance(data, str):
            data = data.encode(sys.stdout.encoding, sys.stdout.errors)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as exc:
        raise OutputFailure(f"could not write to stdout: {exc.strerror or exc}") from exc


def copy_to_stdout(path: str) -> None:
    """Copy the file ``path`` to stdout (the patch of ``--stdout``).

    Raises:
        OSError: the write failed (the caller keeps the file).
    """
    with open(path, "rb") as data:
        sys.stdout.flush()
        shutil.copyfileobj(data, sys.stdout.buffer, 1 << 20)
        sys.stdout.buffer.flush()


def usage_message(exc: Exception) -> str:
    """Git's parse-options wording for a parser error of typer's click
    (parse-options.c; quoted with '...' as git's CodingGuidelines ask)."""
    kind = type(exc).__name__
    name = getattr(exc, "option_name", None) or ""
    long = name.startswith("--")
    what = f"option '{name[2:]}'" if long else f"switch '{name[1:]}'"
    if kind == "NoSuchOption":
        return f"unknown {what}"
    if kind == "BadParameter":  # a value our parser refused: "option 'x' expects ..."
        opts = getattr(getattr(exc, "param", None), "opts", ())
        longs = [o for o in opts if o.startswith("--")]
        if longs:
            return f"option '{longs[0][2:]}' {getattr(exc, 'message', exc)}"
    if kind == "BadOptionUsage":
        message = str(getattr(exc, "message", exc))
        if "does not take a value" in message:
            return f"{what} takes no value"
        if "requires" in message:
            return f"{what} requires a value"
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if message.startswith("Got unexpected extra argument") and message.endswith(")"):
        # "... argument (a)", "... arguments (a b)", typer's "... argument(s) (a b)"
        return f"too many arguments: '{message[message.index(' (') + 2 : -1]}'"
    message = message.rstrip(".")
    return message[0].lower() + message[1:] if message else "bad usage"


def fatal(failure: Exception) -> NoReturn:
    """``fatal: <message>`` (and ``hint: <hint>``) of an ``IsopatchError``, exit 128."""
    stderr_line(f"fatal: {getattr(failure, 'message', str(failure))}")
    # one ``hint:`` line per line: git's advice (the candidates of an
    # ambiguous short id, the safe.directory command) spans several
    for line in (getattr(failure, "hint", None) or "").splitlines():
        stderr_line(f"hint: {line}")
    raise SystemExit(FATAL_STATUS)


def terminal_columns() -> int | None:
    """The width of our standard error when it is a terminal, else ``None``
    (git shows progress only on a terminal, and colours for one)."""
    try:
        if not os.isatty(2):
            return None
        return os.get_terminal_size(2).columns or 80
    except OSError:
        return None


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of the ``git-isopatch`` executable (``cli.main``, once
    ``cli`` has filled :data:`COMMANDS`).

    Exit status: the command's (design: Exit status), 128 for a known
    failure, 129 for a usage error.  An unexpected exception is a bug: its
    traceback is printed with a hint to report it, exit 128.

    The garbage collector is off while the run's modules load: importing
    typer, pygit2 and git-isopatch's own modules makes objects that live
    as long as the process, and collecting among them cost a warm run
    some 50 collections and 25-45 ms (bench/README.md).  The executable's
    entry point (:mod:`.entry`) turns it off before it imports typer and
    this module, where 28 of them came.  A command whose work can take
    long turns it back on once its modules are loaded
    (:func:`modules_loaded`: a capture, which waits for its command, and
    the MCP server); ``list`` and ``prune`` end first.

    The executable ends without the interpreter's teardown
    (:func:`.entry.end`): nothing here leaves its clean-up to the
    collector or to the teardown; files, locks and temporary folders close
    in ``with`` blocks.
    """
    gc.disable()
    _main(argv)


def modules_loaded() -> None:
    """The modules of a command that can run long are loaded (see
    :func:`main`): what they made is moved out of the collector's reach
    (:func:`gc.freeze`), and collection resumes for what the command makes
    from here on."""
    gc.freeze()
    gc.enable()


def _main(argv: list[str] | None) -> NoReturn:
    import typer.main

    args = sys.argv[1:] if argv is None else argv
    name, prog = "isopatch", "git isopatch"
    # a subcommand only as the first argument: ``git isopatch -- list``
    # runs a program called ``list``
    if args and args[0] != "isopatch" and args[0] in COMMANDS:
        name, prog, args = args[0], f"git isopatch {args[0]}", args[1:]
    command = typer.main.get_command(command_app(name))
    try:
        # typer turns a KeyboardInterrupt into a returned 130
        status = command.main(args=args, prog_name=prog, standalone_mode=False)
    except (UsageFailure, UsageConflict) as exc:
        usage_error(str(exc), name, machine_mode(command, args))
    except OutputFailure as exc:
        stderr_line(f"fatal: {exc}")
        raise SystemExit(FATAL_STATUS) from None
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        from .errors import Interrupted

        if isinstance(exc, Interrupted):  # a signal ended the run before it had a result
            raise SystemExit(128 + (exc.signum or 2)) from None
        if getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message"):
            # click's UsageError and its kind (typer's parser)
            usage_error(usage_message(exc), name, machine_mode(command, args))
        import traceback

        traceback.print_exc()
        stderr_line("hint: this is a bug in git-isopatch; please report it with the output above")
        raise SystemExit(FATAL_STATUS) from None
    raise SystemExit(status if isinstance(status, int) else 0)
