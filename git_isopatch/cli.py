"""``git isopatch``: the command line (typer declarations), parsing into
the request, and the I/O.  The work is :func:`git_isopatch.capture`; what
a result looks like and the exit status are :mod:`git_isopatch.render`'s,
the entry point and usage errors (129, git's parse-options)
:mod:`git_isopatch.usage`'s (design: Architecture, Exit status);
``list`` and ``prune`` are :mod:`.manage_cli`'s.

No ``from __future__ import annotations``: typer reads the parameters'
annotations on every run, and as strings it evaluates each twice.
"""

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import usage
from .logger import configure_logging, configure_logging_on_first_use
from .request import CaptureRequest, OutputMode, conflicts
from .usage import (
    RepoPathOption,
    ShortHelpOption,
    UsageFailure,
    main,
    option_rows,
    short_usage,
    stderr_line,
    write_stdout,
)

if TYPE_CHECKING:
    from .outcome import Rendering
    from .result import CaptureResult

#: Names other modules and the tests reach through ``cli``.
__all__ = ["app", "configure_logging", "main", "option_rows", "short_usage"]


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _size(text: str | None) -> int | None:
    """``--max-processes``/``--max-memory``: a size as git reads an integer."""
    from .settings import parse_size

    if text is None:
        return None
    try:
        return parse_size(str(text))
    except ValueError:
        raise typer.BadParameter(
            "expects a non-negative integer value with an optional k/m/g suffix"
        ) from None


MaxProcessesOption = Annotated[
    int | None,
    typer.Option(
        "--max-processes",
        metavar="<n>",
        parser=_size,
        help="in the sandbox: at most <n> processes (default 4096; 0: no bound)",
    ),
]
MaxMemoryOption = Annotated[
    int | None,
    typer.Option(
        "--max-memory",
        metavar="<size>",
        parser=_size,
        help="in the sandbox: at most <size> of memory (512m, 2g; default half the RAM)",
    ),
]
CacheOption = Annotated[
    bool | None,
    typer.Option(
        "--cache/--no-cache",
        help="in the sandbox: keep cache writes for later runs here (the default)",
    ),
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
    staged: Annotated[
        bool,
        typer.Option(
            "--staged", help="start from HEAD plus the index only (what git commit would commit)"
        ),
    ] = False,
    repo_path: RepoPathOption = ".",
    link: Annotated[
        list[str] | None,
        typer.Option(
            "--link",
            metavar="<path>",
            help="symlink <path> into the worktree; "
            "writes through it reach the original only unconfined",
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
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="apply the patch to the work tree (with --staged, the index too) if the command "
            "succeeded; all or nothing",
        ),
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
    nul: usage.NulOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="the result as one JSON object on stdout")
    ] = False,
    sandbox: Annotated[
        bool | None,
        typer.Option(
            "--sandbox/--no-sandbox",
            help="confine the command (the default where the machine allows it)",
        ),
    ] = None,
    allow_write: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-write", metavar="<path>", help="in the sandbox: <path> is really writable"
        ),
    ] = None,
    allow_network: Annotated[
        bool, typer.Option("--allow-network", help="in the sandbox: keep the network")
    ] = False,
    keep: Annotated[
        bool | None,
        typer.Option(
            "--keep/--no-keep", help="keep the worktree after the run, whatever its exit status"
        ),
    ] = None,
    recurse_submodules: Annotated[
        bool | None,
        typer.Option(
            "--recurse-submodules/--no-recurse-submodules",
            help="populate your checked-out submodules, capture changes inside them",
        ),
    ] = None,
    timeout: usage.TimeoutOption = None,
    session: usage.SessionOption = None,
    end: usage.EndOption = False,
    max_processes: MaxProcessesOption = None,
    max_memory: MaxMemoryOption = None,
    cache: CacheOption = None,
    exit_code_option: Annotated[
        bool,
        typer.Option(
            "--exit-code",
            help="when the command succeeded: exit 1 if the patch is not empty, 0 if it is",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="no summary or progress: only errors and warnings")
    ] = False,
    _short_help: ShortHelpOption = False,
    _manual: usage.ManualOption = False,
    _version: usage.VersionOption = False,
    _apparmor: usage.AppArmorProfileOption = False,
) -> None:
    """Run a command in an ephemeral worktree and capture its changes as a patch.

    Options the user did not give are ``None``: the configuration decides.
    """
    if end:  # --session <name> --end
        from .session_cli import end_session

        raise SystemExit(end_session(locals()))
    request, mode = request_from_options(locals())
    raise SystemExit(run_capture(request, mode))


def request_from_options(params: Mapping[str, Any]) -> tuple[CaptureRequest, OutputMode]:
    """The request and output mode that the parsed options of
    :func:`isopatch` say (``params``: its parameters by name, as typer
    passes them).

    Raises:
        UsageFailure: a bad value, or options that cannot go together
            (:func:`git_isopatch.request.conflicts`).
    """
    timeout = params["timeout"]
    seconds = None
    if timeout is not None:
        from .settings import parse_seconds

        try:
            seconds = parse_seconds(timeout)
        except ValueError:
            raise UsageFailure("option 'timeout' expects a number of seconds") from None
    output, to_stdout = params["output"], params["to_stdout"]
    if output == "-":  # standard output, as for tar -f -, curl -o -, sort -o -
        others = [
            name
            for name, given in (
                ("--stdout", to_stdout),
                ("--porcelain", params["porcelain_output"]),
                ("--json", params["json_output"]),
            )
            if given
        ]
        if others:
            raise UsageFailure(f"options '-o -' and '{others[0]}' cannot be used together")
        output, to_stdout = None, True
    columns = usage.terminal_columns()
    mode = OutputMode(
        porcelain=params["porcelain_output"],
        nul=params["nul"],
        json=params["json_output"],
        stdout=to_stdout,
        exit_code=params["exit_code_option"],
        quiet=params["quiet"] or params["porcelain_output"] or params["json_output"],
        informational=not params["quiet"],
    )
    request = CaptureRequest(
        command=tuple(params["command"] or ()),
        base=params["base"],
        include_uncommitted=params["include_uncommitted"],
        repo_path=params["repo_path"],
        link=tuple(params["link"] or ()),
        copy=tuple(params["copy"] or ()),
        configured_links=() if params["no_link"] else None,
        configured_copies=() if params["no_copy"] else None,
        worktree_include=not params["no_copy"],
        output=output,
        capture_output=mode.machine,
        command_stdout=2 if to_stdout else None,
        keep=params["keep"],
        timeout=seconds,
        sandbox=params["sandbox"],
        allow_write=tuple(params["allow_write"]) if params["allow_write"] else None,
        allow_network=True if params["allow_network"] else None,
        staged=params["staged"],
        apply=params["apply"],
        progress=not mode.quiet and columns is not None,
        diffstat=not mode.quiet,
        informational_hints=mode.informational or mode.machine,
        terminal_columns=columns,
        recurse_submodules=params["recurse_submodules"],
        max_processes=params["max_processes"],
        max_memory=params["max_memory"],
        cache=params["cache"],
        session=params["session"],
    )
    if (problem := conflicts(request, mode)) is not None:
        raise UsageFailure(problem)
    return request, mode


def run_capture(request: CaptureRequest, mode: OutputMode) -> int:
    """Run ``request``, show its result as ``mode`` says; the exit status."""
    from . import outcome
    from .capture import run
    from .errors import IsopatchError

    usage.modules_loaded()
    configure_logging_on_first_use()
    if sys.stdout is None and (mode.stdout or mode.machine):
        stderr_line("fatal: stdout is closed: nowhere to write the result")
        return usage.FATAL_STATUS
    try:
        result = run(request)
    except IsopatchError as failure:
        for line in outcome.fatal_lines(failure.message, failure.hint):
            stderr_line(line)
        if mode.machine:
            usage.write_failure(mode, failure.message, failure.code, failure.hint)
        return outcome.exit_status(None, mode)
    # only a run from HEAD alone can start from the work tree instead
    shown = outcome.plan(result, mode, cwd=os.getcwd(), from_head=request.from_head_alone)
    return show_result(result, shown)


def show_result(result: "CaptureResult", shown: "Rendering") -> int:
    """Write what :func:`git_isopatch.outcome.plan` made of ``result``
    (messages on stderr, porcelain/JSON or the patch on stdout, the
    summary), delete the private folder when nobody is told of it; return
    the exit status."""
    from .outcome import stdout_failure_lines
    from .worktrees import results

    for line in shown.notices:
        stderr_line(line)
    if shown.record is not None:
        write_stdout(shown.record)
    if shown.patch_to_stdout is not None:
        try:
            usage.copy_to_stdout(shown.patch_to_stdout)
        except OSError as exc:
            for line in stdout_failure_lines(result, exc.strerror or str(exc)):
                stderr_line(line)
            return usage.FATAL_STATUS
    if shown.diffstat:
        usage.stderr_write(shown.diffstat)
    for line in shown.summary + shown.closing:
        stderr_line(line)
    if shown.discard and results.discard(result.tmpdir):
        pass
    elif shown.drop_patch and result.patch_path is not None:
        os.unlink(result.patch_path)  # the folder holds what stays
    return shown.status


#: Command name -> (typer app, synopsis lines of its ``-h``).
usage.COMMANDS["isopatch"] = (app, usage.CAPTURE_SYNOPSES)
usage.COMMANDS["list"] = ("git_isopatch.manage_cli:list_app", [f"usage: {usage.LIST_SYNOPSIS}"])
usage.COMMANDS["prune"] = ("git_isopatch.manage_cli:prune_app", [f"usage: {usage.PRUNE_SYNOPSIS}"])
usage.COMMANDS["mcp"] = ("git_isopatch.mcp_cli:mcp_app", [f"usage: {usage.MCP_SYNOPSIS}"])
