"""``git isopatch mcp [-C <path>]``: the command line of the MCP server
(:mod:`.mcp_server`), which needs the ``mcp`` extra; without it, a
``fatal:`` line with the ``pip install`` that brings it, exit 128."""

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
        typer.Option("-C", metavar="<path>", help="the repository the tools work in by default"),
    ] = ".",
    _short_help: ShortHelpOption = False,
    _manual: ManualOption = False,
) -> None:
    """Serve the ``capture`` and ``apply`` tools over the Model Context
    Protocol on stdin/stdout until the client closes stdin."""
    from .mcp_server import build_server

    try:
        server = build_server(repo_path)
    except ImportError as exc:
        stderr_line(f"fatal: the MCP server needs the 'mcp' package (2.x): {exc}")
        stderr_line(f"hint: {MISSING_HINT}")
        raise SystemExit(FATAL_STATUS) from None
    modules_loaded()  # it serves until stdin closes: collect its garbage
    server.run("stdio")
    raise SystemExit(0)
