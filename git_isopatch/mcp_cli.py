"""``git isopatch mcp [-C <path>] [--allow-unconfined] [--allow-network]
[--allow-write <path>]...``: the command line of the MCP server
(:mod:`.mcp_server`), which needs the ``mcp`` extra; without it, a
``fatal:`` line with the ``pip install`` that brings it, exit 128.  What
the tools' calls may loosen is fixed here (:mod:`.mcp_policy`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .usage import FATAL_STATUS, ManualOption, ShortHelpOption, modules_loaded, stderr_line

mcp_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

#: Said when the SDK cannot be imported.
MISSING_HINT = "pip install 'git-isopatch[mcp]'"


@mcp_app.command(name="mcp", context_settings={"help_option_names": []})
def mcp_command(
    repo_path: Annotated[
        str,
        typer.Option(
            "-C", metavar="<path>", help="the folder the tools work in (and below: nowhere else)"
        ),
    ] = ".",
    allow_unconfined: Annotated[
        bool,
        typer.Option("--allow-unconfined", help="let a call run its command unconfined"),
    ] = False,
    allow_network: Annotated[
        bool, typer.Option("--allow-network", help="let a call keep the network")
    ] = False,
    allow_write: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-write",
            metavar="<path>",
            help="let a call make a path under <path> writable; repeatable",
        ),
    ] = None,
    _short_help: ShortHelpOption = False,
    _manual: ManualOption = False,
) -> None:
    """Serve the ``capture`` and ``apply`` tools over the Model Context
    Protocol on stdin/stdout until the client closes stdin."""
    from .mcp_policy import ServerPolicy
    from .mcp_server import build_server

    policy = ServerPolicy.started(
        repo_path,
        unconfined=allow_unconfined,
        network=allow_network,
        writable=allow_write or (),
    )
    try:
        server = build_server(policy)
    except ImportError as exc:
        stderr_line(f"fatal: the MCP server needs the 'mcp' package (2.x): {exc}")
        stderr_line(f"hint: {MISSING_HINT}")
        raise SystemExit(FATAL_STATUS) from None
    modules_loaded()  # it serves until stdin closes: collect its garbage
    server.run("stdio")
    raise SystemExit(0)
