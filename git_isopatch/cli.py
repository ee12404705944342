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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .request import CaptureRequest, OutputMode, conflicts
from .usage import (
    COMMANDS,
    FATAL_STATUS,
    LIST_SYNOPSIS,
    PRUNE_SYNOPSIS,
    SYNOPSIS,
    USAGE_STATUS,
    OutputFailure,
    UsageFailure,
    configure_logging,
    fatal,
    option_rows,
    print_usage_error,
    short_usage,
    show_manual,
    show_short_help,
    show_version,
    stderr_line,
    usage_error,
    usage_message,
    write_stdout,
)

if TYPE_CHECKING:
    from .result import CaptureResult

#: Names other modules and the tests reach through ``cli``.
__all__ = ["app", "configure_logging", "main", "option_rows", "short_usage"]


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
    typer.Option("-h", help="show this usage", is_eager=True, callback=show_short_help),
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
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="apply the patch to the work tree if the command succeeded; all or nothing",
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
    nul: NulOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="the result as one JSON object on stdout")
    ] = False,
    sandbox: Annotated[
        bool | None,
        typer.Option(
            "--sandbox/--no-sandbox",
            help="confine the command: writes only to its worktree, no network",
        ),
    ] = None,
    allow_write: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-write", metavar="<path>", help="with --sandbox: <path> is writable too"
        ),
    ] = None,
    allow_network: Annotated[
        bool, typer.Option("--allow-network", help="with --sandbox: keep the network")
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
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="no summary and no progress on stderr")
    ] = False,
    _short_help: ShortHelpOption = False,
    _manual: Annotated[
        bool,
        typer.Option("--help", help="open the manual page", is_eager=True, callback=show_manual),
    ] = False,
    _version: Annotated[
        bool,
        typer.Option("--version", help="print the version", is_eager=True, callback=show_version),
    ] = False,
) -> None:
    """Run a command in an ephemeral worktree and capture its changes as a patch.

    Options the user did not give are ``None``: the configuration decides
    (:func:`git_isopatch.settings.complete_request`).
    """
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
    columns = _terminal_columns()
    mode = OutputMode(
        porcelain=params["porcelain_output"],
        nul=params["nul"],
        json=params["json_output"],
        stdout=to_stdout,
        exit_code=params["exit_code_option"],
        quiet=params["quiet"] or params["porcelain_output"] or params["json_output"],
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
        terminal_columns=columns,
        recurse_submodules=params["recurse_submodules"],
    )
    problem = conflicts(request, mode)
    if problem is not None:
        raise UsageFailure(problem)
    return request, mode


def _terminal_columns() -> int | None:
    """The width of our standard error when it is a terminal, else ``None``
    (git shows progress only on a terminal, and colours for one)."""
    try:
        if not os.isatty(2):
            return None
        return os.get_terminal_size(2).columns or 80
    except OSError:
        return None


def _emit_fields(fields: dict[str, object], mode: OutputMode) -> None:
    from .render import as_json, porcelain

    if mode.porcelain:
        write_stdout(porcelain(fields, nul=mode.nul))
    elif mode.json:
        write_stdout(as_json(fields))


def run_capture(request: CaptureRequest, mode: OutputMode) -> int:
    """Run the capture ``request`` and render its result as ``mode`` says;
    return the exit status (design: Exit status)."""
    from .capture import run
    from .isolation.errors import IsopatchError

    configure_logging()
    if sys.stdout is None and (mode.stdout or mode.machine):
        stderr_line("fatal: stdout is closed: nowhere to write the result")
        return FATAL_STATUS
    try:
        result = run(request)
    except IsopatchError as failure:
        stderr_line(f"fatal: {failure.message}")
        for line in (failure.hint or "").splitlines():
            stderr_line(f"hint: {line}")
        _emit_fields({"error": failure.message, "error-code": failure.code}, mode)
        return FATAL_STATUS
    # only a run from HEAD alone can start from the work tree instead
    return render_result(result, mode, from_head=request.from_head_alone)


#: The second hint when --apply fails for a run made from HEAD alone:
#: git apply needs each hunk's context lines as they were, so an edit made
#: before the run near a hunk fails it as one made during the run does.
INCLUDE_UNCOMMITTED_HINT = (
    "the patch was made from HEAD; if your work tree already differed from it "
    "near these lines, --include-uncommitted starts from your work tree as it is"
)


def render_result(result: CaptureResult, mode: OutputMode, *, from_head: bool = False) -> int:
    """Show ``result`` as ``mode`` says (messages on stderr, porcelain/JSON
    or the patch on stdout, the summary); return the exit status.
    ``from_head``: the run started from ``HEAD`` alone (no
    ``--include-uncommitted``, ``--staged`` or other ``--base``), so a
    failed ``--apply`` names ``--include-uncommitted``."""
    from .isolation import results

    if result.command_error:
        stderr_line(f"error: {result.command_error}")
    for hint in result.hints:
        stderr_line(f"hint: {hint}")
    if result.timed_out:
        seconds = result.timeout or 0
        stderr_line(
            f"error: the command timed out after {seconds:g} second{'' if seconds == 1 else 's'}"
        )
    if result.shared_writes:
        shown = ", ".join(map(str, result.shared_writes[:5]))
        more = len(result.shared_writes) - 5
        stderr_line(
            "warning: your repository changed while the command ran: "
            + shown
            + (f" and {more} more" if more > 0 else "")
        )
        stderr_line(
            "hint: a worktree shares refs, the stash and configuration with your "
            "repository; git branch, tag, stash or config in the command write there"
        )
    if result.checkout_changes:
        from .render import quote_c_style

        names = [
            quote_c_style(os.fsencode(p)).decode("utf-8", "replace")
            for p in result.checkout_changes
        ]
        more = len(names) - 5
        stderr_line(
            "warning: your work tree changed while the command ran: "
            + ", ".join(names[:5])
            + (f" and {more} more" if more > 0 else "")
        )
        stderr_line(
            "hint: use --sandbox to keep the command's writes in its worktree; "
            "if you edited these files meanwhile, nothing is wrong"
        )
    if mode.machine:
        from .render import result_fields

        _emit_fields(result_fields(result), mode)
    if result.error_code == "apply-failed":
        _show_summary(result, mode, private=False)
        stderr_line(f"error: {result.error}")
        stderr_line(f"hint: nothing was written; the patch is kept at '{result.patch_path}'")
        if from_head:
            stderr_line(f"hint: {INCLUDE_UNCOMMITTED_HINT}")
        return FATAL_STATUS
    if result.error is not None:
        stderr_line(f"fatal: {result.error}")
        stderr_line(f"hint: the worktree is kept for inspection at '{result.worktree_path}'")
        # a signal that stopped the run says more than the failure it caused
        return result.exit_code if result.signal is not None else FATAL_STATUS
    # a patch in the run's private folder was not asked for by -o
    private = result.patch_path is not None and os.path.dirname(result.patch_path) == result.tmpdir
    if mode.stdout and result.patch_path is not None:
        with open(result.patch_path, "rb") as patch:
            try:
                sys.stdout.flush()
                shutil.copyfileobj(patch, sys.stdout.buffer, 1 << 20)
                sys.stdout.buffer.flush()
            except OSError as exc:
                stderr_line(f"fatal: could not write the patch to stdout: {exc.strerror or exc}")
                stderr_line(f"hint: the patch is kept at '{result.patch_path}'")
                return FATAL_STATUS
        if private and not results.discard(result.tmpdir):
            os.unlink(result.patch_path)  # the folder holds a kept worktree
    _show_summary(result, mode, private=private)
    if mode.quiet and not mode.machine:
        results.discard(result.tmpdir)  # nobody is told where the patch is
    if result.applied and not mode.machine:
        results.discard(result.tmpdir)  # the patch is in the work tree now
    if mode.exit_code and result.exit_code == 0:
        return 1 if result.files else 0
    return result.exit_code


def _show_summary(result: CaptureResult, mode: OutputMode, *, private: bool) -> None:
    """The human summary on stderr (:func:`.render.summary_lines`), after
    the diffstat; unless ``mode`` is quiet.  ``private``: the patch was in
    the run's private folder."""
    if mode.quiet:
        return
    from .render import summary_lines

    if result.diffstat:
        sys.stderr.flush()
        sys.stderr.buffer.write(result.diffstat)
        sys.stderr.buffer.flush()
    for line in summary_lines(result, show_patch=not (mode.stdout and private), cwd=os.getcwd()):
        stderr_line(line)


@list_app.command(name="list", context_settings={"help_option_names": []})
def list_command(
    porcelain_output: Annotated[
        bool, typer.Option("--porcelain", help="machine-readable output on stdout")
    ] = False,
    nul: NulOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="the worktrees as a JSON array on stdout")
    ] = False,
    repo_path: RepoPathOption = ".",
    _short_help: ShortHelpOption = False,
) -> None:
    """List the worktrees git-isopatch made: running, kept, orphaned
    (design: "Kept worktrees")."""
    import time

    from .isolation.errors import IsopatchError
    from .manage import list_worktrees
    from .render import worktree_list_json, worktree_list_lines, worktree_list_porcelain

    if nul and not porcelain_output:
        raise UsageFailure("the option '-z' requires '--porcelain'")
    if porcelain_output and json_output:
        raise UsageFailure("options '--porcelain' and '--json' cannot be used together")
    configure_logging()
    try:
        worktrees = list_worktrees(repo_path)
    except IsopatchError as failure:
        fatal(failure)
    if porcelain_output:
        write_stdout(worktree_list_porcelain(worktrees, nul=nul))
    elif json_output:
        write_stdout(worktree_list_json(worktrees))
    else:
        for line in worktree_list_lines(worktrees, time.time()):
            sys.stdout.write(line + "\n")
    raise SystemExit(0)


@prune_app.command(name="prune", context_settings={"help_option_names": []})
def prune_command(
    expire: Annotated[
        str | None,
        typer.Option(
            "--expire",
            metavar="<time>",
            help="only those older than <time> (default: worktrees of any age, "
            "result folders 2.weeks.ago)",
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
    """Remove kept and orphaned worktrees git-isopatch made, and the result
    folders of its runs older than ``--expire`` (default two weeks); never
    a running worktree, never one it did not make (design: "Kept
    worktrees", "Placement")."""
    from .isolation.errors import IsopatchError
    from .manage import prune_result_folders, prune_worktrees
    from .render import quote_c_style

    def quoted(path: str) -> str:
        text = quote_c_style(os.fsencode(path)).decode("utf-8", "replace")
        return text if text.startswith('"') else f"'{text}'"

    configure_logging()
    try:
        pruned = prune_worktrees(repo_path, expire=expire, dry_run=dry_run)
        folders = prune_result_folders(repo_path, expire=expire, dry_run=dry_run)
    except ValueError as exc:
        raise UsageFailure(f"option 'expire': {exc}") from exc
    except IsopatchError as failure:
        fatal(failure)
    if dry_run or verbose:
        for worktree in pruned.removed:
            sys.stdout.write(f"Removing {worktree.path}: {worktree.state}\n")
        for folder in folders:
            sys.stdout.write(f"Removing {folder.path}: result folder\n")
    if pruned.here is not None:
        stderr_line(f"warning: not pruning {quoted(pruned.here.path)}: you are in it")
    for worktree, reason in pruned.failed:
        sys.stderr.write(f"error: could not prune {quoted(worktree.path)}: {reason}\n")
    raise SystemExit(1 if pruned.failed else 0)


#: Command name -> (typer app, synopsis lines of its ``-h``).
COMMANDS.update(
    {
        "isopatch": (
            app,
            [SYNOPSIS, f"   or: {LIST_SYNOPSIS}", f"   or: {PRUNE_SYNOPSIS}"],
        ),
        "list": (list_app, [f"usage: {LIST_SYNOPSIS}"]),
        "prune": (prune_app, [f"usage: {PRUNE_SYNOPSIS}"]),
    }
)

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
    command = typer.main.get_command(COMMANDS[name][0])
    try:
        command.main(args=args, prog_name=prog, standalone_mode=False)
    except UsageFailure as exc:
        usage_error(str(exc), name)
    except OutputFailure as exc:
        stderr_line(f"fatal: {exc}")
        raise SystemExit(FATAL_STATUS) from None
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        if getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message"):
            # click's UsageError and its kind (typer's parser)
            print_usage_error(usage_message(exc), name)
            raise SystemExit(USAGE_STATUS) from None
        traceback.print_exc()
        stderr_line("hint: this is a bug in git-isopatch; please report it with the output above")
        raise SystemExit(FATAL_STATUS) from None
    raise SystemExit(0)
