"""The parameters of the MCP server's tools (:mod:`.mcp_server`): their
types with the descriptions the SDK turns into each tool's input schema.
Imported by :func:`.mcp_server.build_server` only: it needs ``pydantic``
(the ``mcp`` extra).  No ``from __future__ import annotations``: the SDK
reads these annotations."""

from typing import Annotated

from pydantic import Field

Command = Annotated[
    list[str],
    Field(
        min_length=1,
        description="the command and its arguments, an argument list (no shell): "
        '["ruff", "format", "."]; for a pipeline use ["sh", "-c", "..."]',
    ),
]
Repo = Annotated[
    str | None,
    Field(description="the repository (a folder in its work tree); default: the server's"),
]
Base = Annotated[str | None, Field(description="the commit to start from (default HEAD)")]
IncludeUncommitted = Annotated[
    bool,
    Field(description="start from HEAD plus the staged, unstaged and untracked changes"),
]
Staged = Annotated[bool, Field(description="start from HEAD plus the index only")]
Link = Annotated[
    list[str] | None,
    Field(
        description="ignored paths to symlink in (node_modules, .venv); writes reach the original"
    ),
]
Copy = Annotated[
    list[str] | None, Field(description="ignored paths to copy in (a reflink where it can)")
]
NoLink = Annotated[bool, Field(description="do not link the isopatch.link paths")]
NoCopy = Annotated[
    bool,
    Field(description="do not copy the isopatch.copy and .worktreeinclude paths"),
]
RecurseSubmodules = Annotated[
    bool | None,
    Field(description="populate the checked-out submodules, capture inside them"),
]
Sandbox = Annotated[
    bool | None,
    Field(
        description="confine the command (writes only to its worktree, no network); "
        "default: isopatch.sandbox (auto: where the machine allows)"
    ),
]
AllowWrite = Annotated[list[str] | None, Field(description="in the sandbox: paths really writable")]
AllowNetwork = Annotated[bool, Field(description="in the sandbox: keep the network")]
Timeout = Annotated[
    float | None,
    Field(ge=0, description="stop the command after this many seconds (exit 124); 0: no limit"),
]
Keep = Annotated[bool | None, Field(description="keep the worktree after the run (key worktree)")]
PatchLimit = Annotated[
    int,
    Field(ge=0, description="inline at most this many bytes of the patch as patch-text"),
]
Patch = Annotated[str, Field(description="the patch file a capture returned (its patch)")]
Session = Annotated[
    str | None,
    Field(
        description="run as a step of this session: its first call makes a worktree at the base, "
        "each later call runs in it as the earlier ones left it (result: session-patch, the "
        "whole change); end it with end_session"
    ),
]
SessionName = Annotated[str, Field(min_length=1, description="the session to end")]
