"""``git isopatch``: the command line (typer), rendering and exit status.

The CLI only parses and renders; the work is :func:`git_isopatch.capture`.
Usage errors exit 129 with ``error: ...`` and the short usage on stderr,
known failures exit 128 with ``fatal: ...`` (design: Exit status; git's
Documentation/CodingGuidelines, "Error Messages").
"""

from __future__ import annotations

import os
import shutil
import sys
import traceback
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO

import typer

if TYPE_CHECKING:
    import logging

from . import __version__
from .render import (
    as_json,
    porcelain,
    result_fields,
    summary_lines,
    worktree_list_lines,
    worktree_list_porcelain,
)

USAGE_STATUS = 129
FATAL_STATUS = 128

SYNOPSIS = "usage: git isopatch [<options>] [--] <command> [<arg>...]"
LIST_SYNOPSIS = "git isopatch list [--porcelain [-z]] [-C <path>]"
PRUNE_SYNOPSIS = "git isopatch prune [--expire <time>] [-n] [-v] [-C <path>]"

#: parse-options.c: the option column is this wide, then a gap of 2; longer
#: names put their help on the next line.
_USAGE_OPTS_WIDTH = 24
_USAGE_GAP = 2


class UsageFailure(Exception):
    """A usage error found after parsing (conflicting options, bad values)."""


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def option_rows(name: str = "isopatch") -> list[tuple[str, str]]:
    """``(names, help)`` for every option of the typer command ``name``
    (``isopatch``, or the subcommand ``list`` or ``prune``), in order:
    ``("-o, --output <file>", "write the patch to <file>")``; a boolean
    with a negation reads ``--[no-]keep``.  The ``-h`` text, and the tests
    that keep the man page, README and completion in step, use this."""
    import typer.main

    command = typer.main.get_command(_COMMANDS[name][0])
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
    lines = [*_COMMANDS[name][1], ""]
    for names, text in option_rows(name):
        column = f"    {names}"
        if len(column) <= _USAGE_OPTS_WIDTH:
            lines.append(f"{column.ljust(_USAGE_OPTS_WIDTH + _USAGE_GAP)}{text}")
        else:
            lines += [column, " " * (_USAGE_OPTS_WIDTH + _USAGE_GAP) + text]
    return "\n".join(lines) + "\n\n"


def print_usage_error(message: str, name: str = "isopatch") -> None:
    """``error: <message>`` and the usage of the command ``name`` on stderr
    (git's usage_with_options)."""
    _stderr(f"error: {message}")
    sys.stderr.write(short_usage(name))
    sys.stderr.flush()


def usage_error(message: str, name: str = "isopatch") -> NoReturn:
    """:func:`print_usage_error`, then exit 129."""
    print_usage_error(message, name)
    raise SystemExit(USAGE_STATUS)


def _show_short_help(ctx: typer.Context, _param: object, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        sys.stdout.write(short_usage(ctx.command.name or "isopatch"))
        sys.stdout.flush()
        raise SystemExit(USAGE_STATUS)


MAN_PAGE = "git-isopatch"


def manual_directories() -> list[str]:
    """The ``share/man`` folders of this installation that hold our page:
    the interpreter's prefix (a virtual environment, pipx's) and the user
    base (``pip install --user``), where the wheel's shared data goes."""
    import site
    import sysconfig

    found = []
    for prefix in (sysconfig.get_path("data"), site.getuserbase()):
        folder = os.path.join(prefix, "share", "man")
        if os.path.isfile(os.path.join(folder, "man1", f"{MAN_PAGE}.1")) and folder not in found:
            found.append(folder)
    return found


def _show_manual(ctx: typer.Context, _param: object, value: bool) -> None:
    """``--help`` opens the man page, as ``git help isopatch`` does.

    man-db finds pages beside the folders of ``PATH`` (``<bin>/../share/man``);
    the folders of this installation are put first in ``MANPATH`` too, so
    that ``/path/to/venv/bin/git-isopatch --help`` works off ``PATH``.  A
    trailing ``:`` keeps man's own search path (manpath(5)).
    """
    if not value or ctx.resilient_parsing:
        return
    man = shutil.which("man")
    if man is not None:
        env = dict(os.environ)
        folders = manual_directories()
        if folders:
            env["MANPATH"] = ":".join([*folders, env.get("MANPATH", "")])
        sys.stdout.flush()
        os.execve(man, [man, MAN_PAGE], env)
    _stderr("warning: no 'man' program found; showing the short usage")
    sys.stdout.write(short_usage())
    raise SystemExit(0)


def _show_version(ctx: typer.Context, _param: object, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        sys.stdout.write(f"git-isopatch {__version__}\n")
        raise SystemExit(0)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
list_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
prune_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

#: Options every command (the capture, ``list``, ``prune``) takes alike.
RepoPathOption = Annotated[
    str, typer.Option("-C", metavar="<path>", help="run as if started in <path>")
]
NulOption = Annotated[
    bool, typer.Option("-z", help="with --porcelain, end records with NUL, no quoting")
]
ShortHelpOption = Annotated[
    bool,
    typer.Option("-h", help="show this usage", is_eager=True, callback=_show_short_help),
]


@app.command(
    name="isopatch",
    context_settings={
        "allow_interspersed_args": False,
        "help_option_names": [],
    },
)
def isopatch(
    command: Annotated[
        list[str] | None, typer.Argument(metavar="<command> [<arg>...]", show_default=False)
    ] = None,
    base: Annotated[
        str, typer.Option("--base", metavar="<ref>", help="commit to start from (default HEAD)")
    ] = "HEAD",
    include_uncommitted: Annotated[
        bool,
        typer.Option(
            "--include-uncommitted",
            help="start from HEAD plus the staged, unstaged and untracked changes",
        ),
    ] = False,
    repo_path: RepoPathOption = ".",
    link: Annotated[
        list[str] | None,
        typer.Option(
            "--link",
            metavar="<path>",
            help="symlink <path> into the worktree; writes reach the original",
        ),
    ] = None,
    copy: Annotated[
        list[str] | None,
        typer.Option(
            "--copy", metavar="<path>", help="copy <path> into the worktree (a reflink if it can)"
        ),
    ] = None,
    no_link: Annotated[
        bool, typer.Option("--no-link", help="do not link the isopatch.link paths")
    ] = False,
    no_copy: Annotated[
        bool,
        typer.Option("--no-copy", help="do not copy the isopatch.copy and .worktreeinclude paths"),
    ] = False,
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", metavar="<file>", help="write the patch to <file>"),
    ] = None,
    to_stdout: Annotated[
        bool,
        typer.Option(
            "--stdout", help="write the patch to stdout; the command's stdout goes to stderr"
        ),
    ] = False,
    porcelain_output: Annotated[
        bool, typer.Option("--porcelain", help="machine-readable result on stdout")
    ] = False,
    nul: NulOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="the result as one JSON object on stdout")
    ] = False,
    keep: Annotated[
        bool | None,
        typer.Option("--keep/--no-keep", help="keep the worktree after a successful run"),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="<seconds>",
            help="stop the command after <seconds> (exit 124); 0: no limit",
        ),
    ] = None,
    exit_code_option: Annotated[
        bool, typer.Option("--exit-code", help="exit 1 if the patch is not empty, 0 if it is")
    ] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="no summary on stderr")] = False,
    _short_help: ShortHelpOption = False,
    _manual: Annotated[
        bool,
        typer.Option("--help", help="open the manual page", is_eager=True, callback=_show_manual),
    ] = False,
    _version: Annotated[
        bool,
        typer.Option("--version", help="print the version", is_eager=True, callback=_show_version),
    ] = False,
) -> None:
    """Run a command in an ephemeral worktree and capture its changes as a patch.

    Options the user did not give are ``None``: the configuration decides
    (:mod:`git_isopatch.settings`).
    """
    if not command:
        raise UsageFailure("no command given")
    if not command[0]:
        raise UsageFailure("the command name is empty")
    if nul and not porcelain_output:
        raise UsageFailure("the option '-z' requires '--porcelain'")
    if porcelain_output and json_output:
        raise UsageFailure("options '--porcelain' and '--json' cannot be used together")
    if to_stdout and (porcelain_output or json_output):
        other = "--porcelain" if porcelain_output else "--json"
        raise UsageFailure(f"options '--stdout' and '{other}' cannot be used together")
    if output == "":
        raise UsageFailure("option 'output' expects a file name")
    if include_uncommitted and base != "HEAD":
        raise UsageFailure("options '--include-uncommitted' and '--base' cannot be used together")
    seconds = None
    if timeout is not None:
        from .settings import parse_seconds

        try:
            seconds = parse_seconds(timeout)
        except ValueError:
            raise UsageFailure("option 'timeout' expects a number of seconds") from None
    machine = porcelain_output or json_output
    status = run_capture(
        command,
        base=base,
        include_uncommitted=include_uncommitted,
        link=link or [],
        copy=copy or [],
        configured_links=not no_link,
        configured_copies=not no_copy,
        repo_path=repo_path,
        output=output,
        to_stdout=to_stdout,
        porcelain_output=porcelain_output,
        nul=nul,
        json_output=json_output,
        keep=keep,
        timeout=seconds,
        exit_code_option=exit_code_option,
        quiet=quiet or machine,
    )
    raise SystemExit(status)


class OutputFailure(Exception):
    """Our stdout cannot be written (closed, full disk, broken pipe)."""


def _write_stdout(data: bytes) -> None:
    """Write ``data`` to stdout; raise :class:`OutputFailure` when stdout is
    closed or the write fails, so that a lost result is never exit 0."""
    if sys.stdout is None:
        raise OutputFailure("stdout is closed")
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as exc:
        raise OutputFailure(f"could not write to stdout: {exc.strerror or exc}") from exc


def _emit_fields(
    fields: dict[str, object], *, porcelain_output: bool, nul: bool, json_output: bool
) -> None:
    if porcelain_output:
        _write_stdout(porcelain(fields, nul=nul))
    elif json_output:
        _write_stdout(as_json(fields))


def run_capture(
    command: list[str],
    *,
    base: str,
    include_uncommitted: bool = False,
    link: list[str] | None = None,
    copy: list[str] | None = None,
    configured_links: bool = True,
    configured_copies: bool = True,
    repo_path: str,
    output: str | None,
    to_stdout: bool,
    porcelain_output: bool,
    nul: bool,
    json_output: bool,
    keep: bool | None,
    timeout: float | None,
    exit_code_option: bool,
    quiet: bool,
) -> int:
    """Run :func:`capture` and render its result; return the exit status.

    ``keep`` and ``timeout`` are ``None`` when not given (configuration
    decides); ``timeout`` 0 means no limit."""
    from .capture import capture
    from .isolation.errors import IsopatchError

    configure_logging()
    if sys.stdout is None and (to_stdout or porcelain_output or json_output):
        _stderr("fatal: stdout is closed: nowhere to write the result")
        return FATAL_STATUS
    try:
        result = capture(
            command,
            base=base,
            repo_path=repo_path,
            output=output,
            keep=keep,
            timeout=timeout,
            capture_output=porcelain_output or json_output,
            command_stdout=2 if to_stdout else None,
            include_uncommitted=include_uncommitted,
            link=link or [],
            copy=copy or [],
            configured_links=configured_links,
            configured_copies=configured_copies,
        )
    except IsopatchError as failure:
        _stderr(f"fatal: {failure.message}")
        if failure.hint:
            _stderr(f"hint: {failure.hint}")
        _emit_fields(
            {"error": failure.message, "error-code": failure.code},
            porcelain_output=porcelain_output,
            nul=nul,
            json_output=json_output,
        )
        return FATAL_STATUS

    if result.command_error:
        _stderr(f"error: {result.command_error}")
    if result.timed_out:
        seconds = result.timeout or 0
        _stderr(
            f"error: the command timed out after {seconds:g} second{'' if seconds == 1 else 's'}"
        )
    if result.shared_writes:
        shown = ", ".join(result.shared_writes[:5])
        more = len(result.shared_writes) - 5
        _stderr(
            "warning: your repository changed while the command ran: "
            + shown
            + (f" and {more} more" if more > 0 else "")
        )
        _stderr(
            "hint: a worktree shares refs, the stash and configuration with your "
            "repository; git branch, tag, stash or config in the command write there"
        )
    _emit_fields(
        result_fields(result), porcelain_output=porcelain_output, nul=nul, json_output=json_output
    )
    if result.error is not None:
        _stderr(f"fatal: {result.error}")
        _stderr(f"hint: the worktree is kept for inspection at '{result.worktree_path}'")
        # a signal that stopped the run says more than the failure it caused
        return result.exit_code if result.signal is not None else FATAL_STATUS
    if to_stdout and result.patch_path is not None:
        with open(result.patch_path, "rb") as patch:
            try:
                sys.stdout.flush()
                shutil.copyfileobj(patch, sys.stdout.buffer, 1 << 20)
                sys.stdout.buffer.flush()
            except OSError as exc:
                _stderr(f"fatal: could not write the patch to stdout: {exc.strerror or exc}")
                _stderr(f"hint: the patch is kept at '{result.patch_path}'")
                return FATAL_STATUS
        if output is None:
            os.unlink(result.patch_path)
            if not os.listdir(result.tmpdir):
                os.rmdir(result.tmpdir)
    if not quiet:
        for line in summary_lines(result):
            if to_stdout and output is None:
                line = line.split(", patch ")[0]
            _stderr(line)
    if exit_code_option and result.exit_code == 0:
        return 1 if result.files else 0
    return result.exit_code


def _usage_message(exc: Exception) -> str:
    """Git's parse-options wording for a parser error of typer's click
    (parse-options.c; quoted with '...' as git's CodingGuidelines ask)."""
    kind = type(exc).__name__
    name = getattr(exc, "option_name", None) or ""
    long = name.startswith("--")
    what = f"option '{name[2:]}'" if long else f"switch '{name[1:]}'"
    if kind == "NoSuchOption":
        return f"unknown {what}"
    if kind == "BadOptionUsage":
        message = str(getattr(exc, "message", exc))
        if "does not take a value" in message:
            return f"{what} takes no value"
        if "requires" in message:
            return f"{what} requires a value"
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    message = message.rstrip(".")
    return message[0].lower() + message[1:] if message else "bad usage"


def configure_logging(stream: TextIO | None = None) -> logging.Handler:
    """Send the ``git_isopatch`` logger's warnings and errors to ``stream``
    (default: stderr) as one ``warning: ...`` / ``error: ...`` line each, as
    git prints them; without this, Python would print them bare.  Called
    before a capture, not for ``-h``/``--version`` (``logging`` costs a few
    milliseconds to import).  Returns the handler."""
    import logging

    class GitStyleFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            prefix = "error" if record.levelno >= logging.ERROR else "warning"
            return f"{prefix}: {record.getMessage()}"

    logger = logging.getLogger("git_isopatch")
    for old in [h for h in logger.handlers if getattr(h, "git_style", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(GitStyleFormatter())
    handler.setLevel(logging.WARNING)
    handler.git_style = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
    return handler


def _fatal(failure: Exception) -> NoReturn:
    """``fatal: <message>`` (and ``hint: <hint>``) of an ``IsopatchError``, exit 128."""
    _stderr(f"fatal: {getattr(failure, 'message', str(failure))}")
    hint = getattr(failure, "hint", None)
    if hint:
        _stderr(f"hint: {hint}")
    raise SystemExit(FATAL_STATUS)


@list_app.command(name="list", context_settings={"help_option_names": []})
def list_command(
    porcelain_output: Annotated[
        bool, typer.Option("--porcelain", help="machine-readable output on stdout")
    ] = False,
    nul: NulOption = False,
    repo_path: RepoPathOption = ".",
    _short_help: ShortHelpOption = False,
) -> None:
    """List the worktrees git-isopatch made: running, kept, orphaned
    (design: "Kept worktrees")."""
    import time

    from .isolation.errors import IsopatchError
    from .manage import list_worktrees

    if nul and not porcelain_output:
        raise UsageFailure("the option '-z' requires '--porcelain'")
    try:
        worktrees = list_worktrees(repo_path)
    except IsopatchError as failure:
        _fatal(failure)
    if porcelain_output:
        _write_stdout(worktree_list_porcelain(worktrees, nul=nul))
    else:
        for line in worktree_list_lines(worktrees, time.time()):
            sys.stdout.write(line + "\n")
    raise SystemExit(0)


@prune_app.command(name="prune", context_settings={"help_option_names": []})
def prune_command(
    expire: Annotated[
        str | None,
        typer.Option(
            "--expire", metavar="<time>", help="only those made before <time> (2.weeks.ago)"
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("-n", "--dry-run", help="remove nothing, show what would go")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="show each worktree removed")
    ] = False,
    repo_path: RepoPathOption = ".",
    _short_help: ShortHelpOption = False,
) -> None:
    """Remove kept and orphaned worktrees git-isopatch made; never a
    running one, never one it did not make (design: "Kept worktrees")."""
    from .isolation.errors import IsopatchError
    from .manage import prune_worktrees

    configure_logging()
    try:
        removed = prune_worktrees(repo_path, expire=expire, dry_run=dry_run)
    except ValueError as exc:
        raise UsageFailure(f"option 'expire': {exc}") from exc
    except IsopatchError as failure:
        _fatal(failure)
    if dry_run or verbose:
        for worktree in removed:
            sys.stdout.write(f"Removing {worktree.path}: {worktree.state}\n")
    raise SystemExit(0)


#: Command name -> (typer app, synopsis lines of its ``-h``).
_COMMANDS: dict[str, tuple[typer.Typer, list[str]]] = {
    "isopatch": (
        app,
        [SYNOPSIS, f"   or: {LIST_SYNOPSIS}", f"   or: {PRUNE_SYNOPSIS}"],
    ),
    "list": (list_app, [f"usage: {LIST_SYNOPSIS}"]),
    "prune": (prune_app, [f"usage: {PRUNE_SYNOPSIS}"]),
}

#: Words recognised as a subcommand when they are the first argument;
#: ``git isopatch -- list`` runs a program called ``list``.
SUBCOMMANDS = ("list", "prune")


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of the ``git-isopatch`` executable.

    Exit status: the command's (design: Exit status), 128 for a known
    failure, 129 for a usage error.  An unexpected exception is a bug: its
    traceback is printed with a hint to report it, exit 128.
    """
    import typer.main

    args = sys.argv[1:] if argv is None else argv
    name, prog = "isopatch", "git isopatch"
    if args and args[0] in SUBCOMMANDS:
        name, prog, args = args[0], f"git isopatch {args[0]}", args[1:]
    command = typer.main.get_command(_COMMANDS[name][0])
    try:
        command.main(args=args, prog_name=prog, standalone_mode=False)
    except UsageFailure as exc:
        usage_error(str(exc), name)
    except OutputFailure as exc:
        _stderr(f"fatal: {exc}")
        raise SystemExit(FATAL_STATUS) from None
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        if getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message"):
            # click's UsageError and its kind (typer's parser)
            print_usage_error(_usage_message(exc), name)
            raise SystemExit(USAGE_STATUS) from None
        traceback.print_exc()
        _stderr("hint: this is a bug in git-isopatch; please report it with the output above")
        raise SystemExit(FATAL_STATUS) from None
    raise SystemExit(0)
