"""``git isopatch mcp``: git-isopatch as a Model Context Protocol server on
stdin/stdout, for coding agents (design: Command line, "Subcommands").

Three tools.  ``capture`` runs the installed ``git-isopatch --json`` as a
child process per call (:mod:`.mcp_runs`), so that parallel calls are
independent runs, each with its own signal handling and clean-up, and
returns the very object ``--json`` prints, with the patch text inline up
to a size limit.  ``apply`` brings a captured patch into the work tree,
all or nothing, through the same entry point as ``--apply``
(:func:`.bring_home.bring_home`: one apply at a time per repository).
``end_session`` ends a session a ``capture`` with ``session`` made.  A run that could not
capture (a bad base, not a repository, a bad option), an argument a tool
does not know, and a call that asks for more than the server allows
(:mod:`.mcp_policy`: an unconfined run, the network, a writable path, a
repository outside its folder) are tool errors (``isError``), never a
crash of the server.

The SDK (``mcp`` on PyPI, the ``git-isopatch[mcp]`` extra) is imported
only when :func:`build_server` runs (and the tools' parameters with it,
:mod:`.mcp_parameters`), so that this module imports without it and the
other commands never load it.  No ``from __future__ import annotations``:
the SDK reads the tools' parameter annotations to build their schemas.
"""

import json
import os
from collections.abc import Callable
from typing import Any

from . import __version__
from .mcp_policy import Refused, ServerPolicy, root_folders
from .mcp_runs import (
    PATCH_TEXT_LIMIT,
    CaptureFailure,
    CaptureOptions,
    add_patch_text,
    apply_patch,
    capture_argv,
    end_argv,
    read_result,
    run_isopatch,
)

INSTRUCTIONS = (
    "git-isopatch runs a command in a throwaway git worktree and returns what it changed "
    "as a patch, without touching the checkout. Use capture to try a change (a formatter, "
    "a codemod, a fix) and read the result; run several captures in parallel to compare "
    "candidates; apply the one you choose (all or nothing). Never use it for remote, "
    "credential, publish, deploy or irreversible work: only the worktree is thrown away."
)


def build_server(policy: ServerPolicy | None = None) -> Any:
    """The MCP server with its three tools under ``policy`` (default: started
    here, allowing nothing beyond the sandbox): its folder is the
    repository a call without ``repo`` works in (``git isopatch mcp -C
    <path>``).

    Raises:
        ImportError: the ``mcp`` package (2.x) is not installed.
    """
    from mcp.server.mcpserver import MCPServer

    policy = policy or ServerPolicy.started(".")
    tools = Tools()
    _add_capture(tools, policy)
    _add_apply(tools, policy)
    _add_end_session(tools, policy)
    return MCPServer(
        name="git-isopatch",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        tools=tools.declared,
    )


#: What the ``capture`` tool adds to the ``--json`` object.
PATCH_TEXT_PROPERTIES = {
    "patch-text": {
        "description": "MCP only: the patch inline, when it is UTF-8 text within patch_limit",
        "type": "string",
    },
    "patch-text-truncated": {
        "description": "MCP only: true when patch-text is not the whole patch or is absent "
        "(read the file named by patch then)",
        "type": "boolean",
    },
}

#: The ``apply`` tool's result.
APPLY_SCHEMA = {
    "type": "object",
    "properties": {
        "applied": {
            "description": "whether the patch is now in the work tree (false: it was empty)",
            "type": "boolean",
        },
        "patch": {"description": "the patch file", "type": "string"},
        "warnings": {
            "description": "paths that changed while the patch was applied",
            "type": "array",
            "items": {"type": "string"},
        },
    },
    "required": ["applied", "patch"],
}


#: What the ``capture`` tool's result says in a call's terms (the tool's
#: arguments) where the ``--json`` schema names the command line's options.
CALL_TERMS = {
    "title": "capture: the result of one call, version 1",
    "description": "Keys are only ever added to version 1 (ignore keys you do not know); a key "
    "that changed meaning would make version 2. A string that holds a path is the path's bytes "
    "decoded as UTF-8 with each byte that is not UTF-8 as the lone surrogate \\udc80-\\udcff.",
}
CALL_DESCRIPTIONS = {
    "timed-out": "timeout expired: the command was stopped",
    "limit-reached": "the command reached a bound of the sandbox (isopatch.maxProcesses, "
    "isopatch.maxMemory) and was stopped: which",
    "sandbox": "whether the command ran in the sandbox (sandbox not given: where the machine "
    "allows it); absent when it did not run",
    "patch": "the patch file (apply takes it); absent when extraction failed",
    "applied": "never in capture's result: the apply tool applies a patch",
    "session": "with session: the name of the session this call was a step of (patch then "
    "holds the step's own change)",
    "session-patch": "with session: the session's whole change against base after this step "
    "(a patch apply takes); absent when it could not be taken",
    "session-files": "with session: the number of paths in session-patch",
    "worktree": "the worktree, when it was kept (keep, or extraction failed)",
}


def result_schema() -> dict[str, Any]:
    """The ``capture`` tool's output schema: the shipped schema of the
    ``--json`` object (``schema/result.json``, which stays the command
    line's) in a call's terms (:data:`CALL_TERMS`,
    :data:`CALL_DESCRIPTIONS`), with :data:`PATCH_TEXT_PROPERTIES`."""
    from importlib import resources

    text = (resources.files(__package__) / "schema" / "result.json").read_text("utf-8")
    schema = {**json.loads(text), **CALL_TERMS}
    for key, description in CALL_DESCRIPTIONS.items():
        schema["properties"][key]["description"] = description
    schema["properties"].update(PATCH_TEXT_PROPERTIES)
    return schema


class Tools:
    """The server's tools, each declared with :meth:`tool` (the SDK's own
    decorator would describe a ``dict`` result as a bare object)."""

    def __init__(self) -> None:
        self.declared: list[Any] = []

    def tool(
        self, title: str, output_schema: dict[str, Any]
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare the decorated function as a tool whose result
        ``output_schema`` describes."""
        from mcp.server.mcpserver.tools import Tool
        from pydantic import ConfigDict

        def declare(fn: Callable[..., Any]) -> Callable[..., Any]:
            tool = Tool.from_function(fn, annotations=_tool_annotations(title))
            # an argument the tool does not know is an error naming it:
            # a misspelt option must never be ignored
            config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
            model = tool.fn_metadata.arg_model
            strict = type(
                model.__name__, (model,), {"model_config": config, "__module__": __name__}
            )
            metadata = tool.fn_metadata.model_copy(
                update={"arg_model": strict, "output_schema": output_schema}
            )
            parameters = strict.model_json_schema(by_alias=True)
            self.declared.append(
                tool.model_copy(update={"fn_metadata": metadata, "parameters": parameters})
            )
            return fn

        return declare


def _tool_annotations(title: str) -> Any:
    """What the tools tell the client: they write (the patch, the work
    tree), never destroy, differ from call to call, stay on the machine."""
    from mcp.types import ToolAnnotations

    return ToolAnnotations(
        title=title,
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=False,
        openWorldHint=False,
    )


async def _folder(policy: ServerPolicy, repo: str | None, context: Any) -> str:
    """The folder a call with ``repo`` works in (:meth:`ServerPolicy.repository`),
    the client's MCP roots asked for only when the server's folder does not
    hold it.

    Raises:
        Refused: it is under neither.
    """
    try:
        return policy.repository(repo)
    except Refused:
        roots = await _client_roots(context)
        if not roots:
            raise
        return policy.repository(repo, roots)


async def _client_roots(context: Any) -> list[str]:
    """The folders of the client's MCP roots, when it declares them and the
    connection lets the server ask (the protocol of 2026-07-28 deprecates
    roots and forbids the server's own requests: none there)."""
    import warnings

    from mcp.types import ClientCapabilities, RootsCapability

    session = context.session
    declared = session.check_client_capability(ClientCapabilities(roots=RootsCapability()))
    if not declared or not session.can_send_request:
        return []
    with warnings.catch_warnings():  # deprecated as of 2026-07-28 (SEP-2577), not gone
        warnings.simplefilter("ignore")
        listed = await session.list_roots()
    return root_folders(str(root.uri) for root in listed.roots)


def _add_capture(tools: Tools, policy: ServerPolicy) -> None:
    """The ``capture`` tool: a run of ``git-isopatch --json`` per call."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    from . import mcp_parameters as p

    @tools.tool("Capture a command's changes as a patch", result_schema())
    async def capture(
        command: p.Command,
        repo: p.Repo = None,
        base: p.Base = None,
        include_uncommitted: p.IncludeUncommitted = False,
        staged: p.Staged = False,
        link: p.Link = None,
        copy: p.Copy = None,
        no_link: p.NoLink = False,
        no_copy: p.NoCopy = False,
        recurse_submodules: p.RecurseSubmodules = None,
        sandbox: p.Sandbox = None,
        allow_write: p.AllowWrite = None,
        allow_network: p.AllowNetwork = False,
        timeout: p.Timeout = None,
        keep: p.Keep = None,
        session: p.Session = None,
        patch_limit: p.PatchLimit = PATCH_TEXT_LIMIT,
        context: Context = None,  # type: ignore[assignment]  # the SDK's, not an argument
    ) -> dict[str, Any]:
        """Run a command in a throwaway worktree of the repository at a base
        commit and return what it changed: the same object as `git isopatch
        --json` (base, exit, patch, files, stdout-text and stderr-text: the
        end of the command's output, ...), plus patch-text (the patch
        inline) and patch-text-truncated (true: read the file named by
        patch). The checkout is never written; a bad base or repository is
        a tool error. With session, the call is a step of that session
        (session-patch: its whole change so far)."""
        options = CaptureOptions(
            base=base,
            include_uncommitted=include_uncommitted,
            staged=staged,
            link=tuple(link or ()),
            copy=tuple(copy or ()),
            no_link=no_link,
            no_copy=no_copy,
            recurse_submodules=recurse_submodules,
            sandbox=sandbox,
            allow_write=tuple(allow_write or ()),
            allow_network=allow_network,
            timeout=timeout,
            keep=keep,
            session=session,
        )
        try:
            where = await _folder(policy, repo, context)
            policy.check(
                where,
                sandbox=sandbox,
                allow_network=allow_network,
                allow_write=options.allow_write,
            )
            argv = capture_argv(command, repo=where, options=options)
            result = policy.told(read_result(*await run_isopatch(argv)))
        except CaptureFailure as failure:
            told = failure.result and policy.told(failure.result)
            said = policy.unnamed(repo, policy.said(failure.messages))
            raise ToolError(str(CaptureFailure(said, told))) from None
        except Refused as failure:
            raise ToolError(str(failure)) from None
        return add_patch_text(result, patch_limit)


def _add_apply(tools: Tools, policy: ServerPolicy) -> None:
    """The ``apply`` tool: :func:`apply_patch` in a worker thread."""
    import anyio
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    from .errors import IsopatchError
    from .mcp_parameters import Patch, Repo

    @tools.tool("Apply a captured patch to the work tree", APPLY_SCHEMA)
    async def apply(
        patch: Patch,
        repo: Repo = None,
        context: Context = None,  # type: ignore[assignment]  # the SDK's, not an argument
    ) -> dict[str, Any]:
        """Apply a captured patch to the work tree as it is now, all or
        nothing, as --apply does: when any hunk does not apply nothing is
        written (a tool error says why); the index is never touched. An
        empty patch (the command changed nothing) gives applied false."""
        try:
            top = await _folder(policy, repo, context)
            path = os.path.abspath(os.path.join(top, patch))
            applied = await anyio.to_thread.run_sync(apply_patch, path, top)
        except IsopatchError as failure:
            said = f"fatal: {failure.message} ({failure.code})"
            raise ToolError(policy.unnamed(repo, said)) from None
        except Refused as failure:
            raise ToolError(str(failure)) from None
        result: dict[str, Any] = {"applied": applied is not None, "patch": path}
        if applied:
            result["warnings"] = applied
        return result


#: The ``end_session`` tool's result.
END_SCHEMA = {
    "type": "object",
    "properties": {
        "ended": {"description": "the session is gone, nothing of it left", "type": "boolean"},
        "session": {"description": "its name", "type": "string"},
    },
    "required": ["ended", "session"],
}


def _add_end_session(tools: Tools, policy: ServerPolicy) -> None:
    """The ``end_session`` tool: a run of ``git-isopatch --session --end``."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    from .mcp_parameters import Repo, SessionName

    @tools.tool("End a session", END_SCHEMA)
    async def end_session(
        session: SessionName,
        repo: Repo = None,
        context: Context = None,  # type: ignore[assignment]  # the SDK's, not an argument
    ) -> dict[str, Any]:
        """End a session that capture calls with session made: its
        worktree and all it kept are removed. No such session, or one whose
        step is running, is a tool error."""
        try:
            where = await _folder(policy, repo, context)
            status, _, stderr = await run_isopatch(end_argv(session, repo=where))
        except Refused as failure:
            raise ToolError(str(failure)) from None
        if status != 0:
            said = policy.said(stderr.decode("utf-8", "replace").strip())
            raise ToolError(policy.unnamed(repo, said or f"exit {status}"))
        return {"ended": True, "session": session}


def serve(policy: ServerPolicy | None = None) -> None:
    """Serve on stdin/stdout until the client closes stdin.

    Raises:
        ImportError: the ``mcp`` package (2.x) is not installed.
    """
    build_server(policy).run("stdio")
