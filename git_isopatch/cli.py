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
from typing import Annotated, NoReturn

import typer

from . import __version__
from .render import as_json, porcelain, result_fields, summary_lines

USAGE_STATUS = 129
FATAL_STATUS = 128

SYNOPSIS = "usage: git isopatch [<options>] [--] <command> [<arg>...]"


class UsageFailure(Exception):
    """A usage error found after parsing (conflicting options, bad values)."""


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def short_usage() -> str:
    """The ``-h`` text: synopsis and one line per option, from the typer
    command's own parameters so that it cannot drift from them."""
    import typer.main

    command = typer.main.get_command(app)
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
    width = max(len(names) for names, _ in rows) + 2
    lines = [SYNOPSIS, ""]
    lines += [f"    {names.ljust(width)}{text}" for names, text in rows]
    return "\n".join(lines) + "\n"


def usage_error(message: str) -> NoReturn:
    """``error: <message>``, the usage, exit 129 (git's usage_with_options)."""
    _stderr(f"error: {message}")
    sys.stderr.write(short_usage())
    raise SystemExit(USAGE_STATUS)


def _show_short_help(ctx: typer.Context, _param: object, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        sys.stdout.write(short_usage())
        sys.stdout.flush()
        raise SystemExit(USAGE_STATUS)


def _show_manual(ctx: typer.Context, _param: object, value: bool) -> None:
    """``--help`` opens the man page, as ``git help isopatch`` does."""
    if not value or ctx.resilient_parsing:
        return
    man = shutil.which("man")
    if man is not None:
        os.execv(man, [man, "git-isopatch"])
    sys.stdout.write(short_usage())
    raise SystemExit(0)


def _show_version(ctx: typer.Context, _param: object, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        sys.stdout.write(f"git-isopatch {__version__}\n")
        raise SystemExit(0)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(
    context_settings={
        "allow_interspersed_args": False,
        "help_option_names": [],
    }
)
def isopatch(
    command: Annotated[
        list[str] | None, typer.Argument(metavar="<command> [<arg>...]", show_default=False)
    ] = None,
    base: Annotated[
        str, typer.Option("--base", metavar="<ref>", help="commit to start from (default HEAD)")
    ] = "HEAD",
    repo_path: Annotated[
        str, typer.Option("-C", metavar="<path>", help="run as if started in <path>")
    ] = ".",
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
    nul: Annotated[
        bool, typer.Option("-z", help="with --porcelain, end records with NUL, no quoting")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="the result as one JSON object on stdout")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="keep the worktree after a successful run")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", metavar="<seconds>", help="stop the command after <seconds> (exit 124)"
        ),
    ] = None,
    exit_code_option: Annotated[
        bool, typer.Option("--exit-code", help="exit 1 if the patch is not empty, 0 if it is")
    ] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="no summary on stderr")] = False,
    _short_help: Annotated[
        bool,
        typer.Option(
            "-h",
            help="show this usage",
            is_eager=True,
            callback=_show_short_help,
            expose_value=True,
        ),
    ] = False,
    _manual: Annotated[
        bool,
        typer.Option("--help", help="open the manual page", is_eager=True, callback=_show_manual),
    ] = False,
    _version: Annotated[
        bool,
        typer.Option("--version", help="print the version", is_eager=True, callback=_show_version),
    ] = False,
) -> None:
    """Run a command in an ephemeral worktree and capture its changes as a patch."""
    if not command:
        raise UsageFailure("no command given")
    if nul and not porcelain_output:
        raise UsageFailure("-z needs --porcelain")
    if porcelain_output and json_output:
        raise UsageFailure("--porcelain and --json cannot be used together")
    if to_stdout and (porcelain_output or json_output):
        raise UsageFailure("--stdout cannot be used with --porcelain or --json")
    if timeout is not None and not timeout > 0:
        raise UsageFailure(f"--timeout takes a positive number of seconds, not '{timeout:g}'")
    machine = porcelain_output or json_output
    status = run_capture(
        command,
        base=base,
        repo_path=repo_path,
        output=output,
        to_stdout=to_stdout,
        porcelain_output=porcelain_output,
        nul=nul,
        json_output=json_output,
        keep=keep,
        timeout=timeout,
        exit_code_option=exit_code_option,
        quiet=quiet or machine,
    )
    raise SystemExit(status)


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


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
    repo_path: str,
    output: str | None,
    to_stdout: bool,
    porcelain_output: bool,
    nul: bool,
    json_output: bool,
    keep: bool,
    timeout: float | None,
    exit_code_option: bool,
    quiet: bool,
) -> int:
    """Run :func:`capture` and render its result; return the exit status."""
    from .capture import capture
    from .isolation.errors import IsopatchError

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
        _stderr(f"error: the command timed out after {timeout:g} seconds")
    _emit_fields(
        result_fields(result), porcelain_output=porcelain_output, nul=nul, json_output=json_output
    )
    if result.error is not None:
        _stderr(f"fatal: {result.error}")
        _stderr(f"hint: the worktree is kept for inspection at '{result.worktree_path}'")
        return FATAL_STATUS
    if to_stdout and result.patch_path is not None:
        with open(result.patch_path, "rb") as patch:
            sys.stdout.flush()
            shutil.copyfileobj(patch, sys.stdout.buffer, 1 << 20)
            sys.stdout.buffer.flush()
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


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point of the ``git-isopatch`` executable.

    Exit status: the command's (design: Exit status), 128 for a known
    failure, 129 for a usage error.  An unexpected exception is a bug: its
    traceback is printed with a hint to report it, exit 128.
    """
    import typer.main

    args = sys.argv[1:] if argv is None else argv
    command = typer.main.get_command(app)
    try:
        command.main(args=args, prog_name="git isopatch", standalone_mode=False)
    except UsageFailure as exc:
        usage_error(str(exc))
    except typer.TyperException as exc:
        if getattr(exc, "exit_code", 1) == 2:  # click's UsageError and its kind
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            usage_error(message[0].lower() + message[1:] if message else "bad usage")
        raise
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception:
        traceback.print_exc()
        _stderr("hint: this is a bug in git-isopatch; please report it with the output above")
        raise SystemExit(FATAL_STATUS) from None
    raise SystemExit(0)
