"""``git isopatch list`` and ``git isopatch prune``: their typer
declarations and I/O (the work is :mod:`.manage`'s, the formats
:mod:`.render`'s), loaded only when one of them runs, as ``mcp`` is
(:data:`.usage.COMMANDS`).

No ``from __future__ import annotations``: typer reads the parameters'
annotations, which as strings it would evaluate twice on every run.
"""

import sys
from typing import Annotated

import typer

from . import usage
from .logger import configure_logging_on_first_use
from .usage import RepoPathOption, ShortHelpOption, UsageFailure, write_stdout

list_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
prune_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@list_app.command(name="list", context_settings={"help_option_names": []})
def list_command(
    porcelain_output: Annotated[
        bool, typer.Option("--porcelain", help="machine-readable output on stdout")
    ] = False,
    nul: usage.NulOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="the worktrees as a JSON array on stdout")
    ] = False,
    repo_path: RepoPathOption = ".",
    _short_help: ShortHelpOption = False,
    _manual: usage.ManualOption = False,
) -> None:
    """List the worktrees and sessions git-isopatch made, in their states."""
    import time

    from .errors import IsopatchError
    from .manage import list_worktrees
    from .render import worktree_list_json, worktree_list_lines, worktree_list_porcelain

    if nul and not porcelain_output:
        raise UsageFailure("the option '-z' requires '--porcelain'")
    if porcelain_output and json_output:
        raise UsageFailure("options '--porcelain' and '--json' cannot be used together")
    configure_logging_on_first_use()
    try:
        worktrees = list_worktrees(repo_path)
    except IsopatchError as failure:
        if porcelain_output or json_output:  # the failure's records, as the capture's
            from .result import OutputMode

            mode = OutputMode(porcelain=porcelain_output, nul=nul, json=json_output)
            usage.write_failure(mode, failure.message, failure.code, failure.hint)
        usage.fatal(failure)
    if porcelain_output:
        write_stdout(worktree_list_porcelain(worktrees, nul=nul))
    elif json_output:
        write_stdout(worktree_list_json(worktrees))
    else:
        lines = worktree_list_lines(worktrees, time.time())
        write_stdout("".join(f"{line}\n" for line in lines))
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
    sessions: Annotated[
        bool, typer.Option("--sessions", help="end idle sessions too, another agent's too")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("-n", "--dry-run", help="remove nothing, show what would go")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="report what is pruned, caches included")
    ] = False,
    repo_path: RepoPathOption = ".",
    _short_help: ShortHelpOption = False,
    _manual: usage.ManualOption = False,
) -> None:
    """Remove kept and orphaned worktrees git-isopatch made (idle sessions
    with ``--sessions``), and result folders older than ``--expire``
    (design: "Placement")."""
    from .errors import IsopatchError
    from .manage import prune_folders, prune_worktrees
    from .render import prune_lines

    configure_logging_on_first_use()
    try:
        pruned = prune_worktrees(repo_path, expire=expire, sessions=sessions, dry_run=dry_run)
        folders = prune_folders(repo_path, expire=expire, dry_run=dry_run)
    except ValueError as exc:
        raise UsageFailure(f"option 'expire': {exc}") from exc
    except IsopatchError as failure:
        usage.fatal(failure)
    out, err = prune_lines(
        [(worktree.path, worktree.state) for worktree in pruned.removed],
        folders,
        here=None if pruned.here is None else pruned.here.path,
        failed=[(worktree.path, reason) for worktree, reason in pruned.failed],
        verbose=dry_run or verbose,
    )
    write_stdout("".join(out))
    sys.stderr.writelines(err)
    sys.stderr.flush()
    raise SystemExit(1 if pruned.failed else 0)
