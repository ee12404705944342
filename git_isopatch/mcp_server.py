"""``git isopatch mcp``: git-isopatch as a Model Context Protocol server on
stdin/stdout, for coding agents (design: Command line, "Subcommands").

Two tools.  ``capture`` runs the installed ``git-isopatch --json`` as a
child process per call, so that parallel calls are independent runs, each
with its own signal handling and clean-up, and returns the very object
``--json`` prints, with the patch text inline up to a size limit.
``apply`` brings a captured patch into the work tree, all or nothing,
through the same entry point as ``--apply`` (:func:`.bring_home.bring_home`:
one apply at a time per repository).  A run that could not
capture (a bad base, not a repository, a bad option) is a tool error
(``isError``), never a crash of the server.

The SDK (``mcp`` on PyPI, the ``git-isopatch[mcp]`` extra) is imported
only when :func:`build_server` runs (and the tools' parameters with it,
:mod:`.mcp_parameters`), so that this module imports without it and the
other commands never load it.  No ``from __future__ import annotations``:
the SDK reads the tools' parameter annotations to build their schemas.
"""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import __version__

#: Inline at most this many bytes of the patch by default.
PATCH_TEXT_LIMIT = 64 * 1024

#: How long a run interrupted by the client gets to clean up after
#: ``SIGTERM`` (git-isopatch forwards it to the command and removes its
#: worktree) before it is killed.
CANCEL_GRACE = 10.0

INSTRUCTIONS = (
    "git-isopatch runs a command in a throwaway git worktree and returns what it changed "
    "as a patch, without touching the checkout. Use capture to try a change (a formatter, "
    "a codemod, a fix) and read the result; run several captures in parallel to compare "
    "candidates; apply the one you choose (all or nothing). Never use it for remote, "
    "credential, publish, deploy or irreversible work: only the worktree is thrown away."
)


class CaptureFailure(Exception):
    """The run captured nothing: git-isopatch's own messages, and its
    result object when it printed one."""

    def __init__(self, messages: str, result: dict[str, Any] | None) -> None:
        text = messages.strip() or "git-isopatch failed"
        if result is not None:
            text += "\n" + json.dumps(result, ensure_ascii=False)
        super().__init__(text)
        self.result = result


@dataclass(frozen=True)
class CaptureOptions:
    """The options of one ``capture`` call, as ``git isopatch`` spells them
    (``None``: the configuration decides)."""

    base: str | None = None
    include_uncommitted: bool = False
    staged: bool = False
    link: tuple[str, ...] = ()
    copy: tuple[str, ...] = ()
    no_link: bool = False
    no_copy: bool = False
    recurse_submodules: bool | None = None
    sandbox: bool | None = None
    allow_write: tuple[str, ...] = ()
    allow_network: bool = False
    timeout: float | None = None
    keep: bool | None = None


def capture_argv(
    command: list[str], *, repo: str, options: CaptureOptions = CaptureOptions()
) -> list[str]:
    """The ``git-isopatch --json`` argument list of one ``capture`` call.
    Values go after ``=`` (``--base=<rev>``), so that one starting with a
    dash is never read as an option; ``-C`` gets an absolute path."""
    o = options
    argv = [sys.executable, "-m", "git_isopatch", "--json", "-q", "-C", os.path.abspath(repo)]
    if o.base is not None:
        argv.append(f"--base={o.base}")
    if o.include_uncommitted:
        argv.append("--include-uncommitted")
    if o.staged:
        argv.append("--staged")
    argv += [f"--link={path}" for path in o.link]
    argv += [f"--copy={path}" for path in o.copy]
    if o.no_link:
        argv.append("--no-link")
    if o.no_copy:
        argv.append("--no-copy")
    if o.recurse_submodules is not None:
        argv.append("--recurse-submodules" if o.recurse_submodules else "--no-recurse-submodules")
    if o.sandbox is not None:
        argv.append("--sandbox" if o.sandbox else "--no-sandbox")
    argv += [f"--allow-write={path}" for path in o.allow_write]
    if o.allow_network:
        argv.append("--allow-network")
    if o.timeout is not None:
        argv.append(f"--timeout={float(o.timeout)!r}")
    if o.keep is not None:
        argv.append("--keep" if o.keep else "--no-keep")
    return [*argv, "--", *command]


def read_result(status: int, stdout: bytes, stderr: bytes) -> dict[str, Any]:
    """The ``--json`` object of a finished run.

    Raises:
        CaptureFailure: the run printed no object (a usage error, 129), or
            its object carries an ``error`` (nothing, or not all, was
            captured: the object says what is left, a kept worktree).
    """
    messages = stderr.decode("utf-8", "replace")
    try:
        result = json.loads(stdout)
    except ValueError:
        raise CaptureFailure(messages or f"git-isopatch exited {status}", None) from None
    if not isinstance(result, dict):
        raise CaptureFailure(messages, None)
    if "error" in result:
        raise CaptureFailure(messages or f"error: {result['error']}", result)
    return result


def add_patch_text(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """``result`` with ``patch-text``, the patch inline, and
    ``patch-text-truncated``: true when ``patch-text`` is not the whole
    patch (it ends at the last whole line within ``limit`` bytes) or is
    absent (the patch is not UTF-8 text, or ``limit`` is 0): read the
    file named by ``patch`` then."""
    path = result.get("patch")
    if not isinstance(path, str):
        return result
    try:
        with open(path, "rb") as patch:
            data = patch.read(limit + 1) if limit > 0 else b""
            whole = len(data) <= limit and (limit > 0 or not patch.read(1))
    except OSError:
        return {**result, "patch-text-truncated": True}
    if not whole:
        data = data[: data.rfind(b"\n", 0, limit) + 1]
        if not data:  # a limit of 0, or a first line longer than it
            return {**result, "patch-text-truncated": True}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {**result, "patch-text-truncated": True}
    return {**result, "patch-text": text, "patch-text-truncated": not whole}


def apply_patch(
    patch: str, repo: str, environ: Mapping[str, str] | None = None
) -> list[str] | None:
    """Apply ``patch`` to the work tree of the repository at ``repo`` as it
    is now, all or nothing, as ``--apply`` does; the index is never touched.
    Returns the warnings (paths someone else wrote meanwhile), or ``None``
    for an empty patch: nothing to apply, as ``--apply`` leaves it.

    Raises:
        IsopatchError: not a repository or work tree; ``no-such-file``;
            ``apply-failed`` (nothing was written, the reason in one line).
    """
    from .bring_home import bring_home
    from .errors import IsopatchError, open_repository
    from .git.run import own_git_environment

    environ = os.environ if environ is None else environ
    repository = open_repository(repo, environ)
    if not os.path.isfile(patch):
        raise IsopatchError("no-such-file", f"no such patch file: '{patch}'")
    if os.path.getsize(patch) == 0:
        return None
    outcome = bring_home(repository, os.path.abspath(patch), env=own_git_environment(environ))
    if not outcome.applied:
        reason = outcome.error or "interrupted before anything was written"
        raise IsopatchError(
            "apply-failed", f"the patch does not apply to the work tree as it is now: {reason}"
        )
    return list(outcome.warnings)


async def run_isopatch(argv: list[str]) -> tuple[int, bytes, bytes]:
    """Run ``argv`` to its end: ``(exit status, stdout, stderr)``.  Its
    stdin is ``/dev/null`` (ours is the protocol).  When the call is
    cancelled (the client gave up, the server stops) the run gets
    ``SIGTERM`` and :data:`CANCEL_GRACE` seconds to clean up, then
    ``SIGKILL``."""
    import anyio

    process = await anyio.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out: list[bytes] = []
    err: list[bytes] = []

    async def drain(stream: Any, into: list[bytes]) -> None:
        async for chunk in stream:
            into.append(chunk)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(drain, process.stdout, out)
            group.start_soon(drain, process.stderr, err)
            await process.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(CANCEL_GRACE):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
        raise
    await process.aclose()
    return process.returncode, b"".join(out), b"".join(err)


def build_server(default_repo: str = ".") -> Any:
    """The MCP server with its two tools; ``default_repo``: the repository
    a call without ``repo`` works in (``git isopatch mcp -C <path>``).

    Raises:
        ImportError: the ``mcp`` package (2.x) is not installed.
    """
    from mcp.server.mcpserver import MCPServer

    def where(repo: str | None) -> str:
        return os.path.join(default_repo, repo) if repo else default_repo

    tools = Tools()
    _add_capture(tools, where)
    _add_apply(tools, where)
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


def result_schema() -> dict[str, Any]:
    """The ``capture`` tool's output schema: the shipped schema of the
    ``--json`` object (``schema/result.json``) with
    :data:`PATCH_TEXT_PROPERTIES`."""
    from importlib import resources

    text = (resources.files(__package__) / "schema" / "result.json").read_text("utf-8")
    schema = json.loads(text)
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

        def declare(fn: Callable[..., Any]) -> Callable[..., Any]:
            tool = Tool.from_function(fn, annotations=_tool_annotations(title))
            metadata = tool.fn_metadata.model_copy(update={"output_schema": output_schema})
            self.declared.append(tool.model_copy(update={"fn_metadata": metadata}))
            return fn

        return declare


def _tool_annotations(title: str) -> Any:
    """What both tools tell the client: they write (the patch, the work
    tree), never destroy, differ from call to call, stay on the machine."""
    from mcp.types import ToolAnnotations

    return ToolAnnotations(
        title=title,
        readOnlyHint=False,
        destructiveHint=False,
        idempotentHint=False,
        openWorldHint=False,
    )


def _add_capture(tools: Tools, where: Callable[[str | None], str]) -> None:
    """The ``capture`` tool: a run of ``git-isopatch --json`` per call."""
    from mcp.server.mcpserver.exceptions import ToolError

    from .mcp_parameters import (
        AllowNetwork,
        AllowWrite,
        Base,
        Command,
        Copy,
        IncludeUncommitted,
        Keep,
        Link,
        NoCopy,
        NoLink,
        PatchLimit,
        RecurseSubmodules,
        Repo,
        Sandbox,
        Staged,
        Timeout,
    )

    @tools.tool("Capture a command's changes as a patch", result_schema())
    async def capture(
        command: Command,
        repo: Repo = None,
        base: Base = None,
        include_uncommitted: IncludeUncommitted = False,
        staged: Staged = False,
        link: Link = None,
        copy: Copy = None,
        no_link: NoLink = False,
        no_copy: NoCopy = False,
        recurse_submodules: RecurseSubmodules = None,
        sandbox: Sandbox = None,
        allow_write: AllowWrite = None,
        allow_network: AllowNetwork = False,
        timeout: Timeout = None,
        keep: Keep = None,
        patch_limit: PatchLimit = PATCH_TEXT_LIMIT,
    ) -> dict[str, Any]:
        """Run a command in a throwaway worktree of the repository at a base
        commit and return what it changed: the same object as `git isopatch
        --json` (base, exit, patch, files, stdout-text and stderr-text: the
        end of the command's output, ...), plus patch-text (the patch
        inline) and patch-text-truncated (true: read the file named by
        patch). The checkout is never written; a bad base or repository is
        a tool error."""
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
        )
        argv = capture_argv(command, repo=where(repo), options=options)
        try:
            result = read_result(*await run_isopatch(argv))
        except CaptureFailure as failure:
            raise ToolError(str(failure)) from None
        return add_patch_text(result, patch_limit)


def _add_apply(tools: Tools, where: Callable[[str | None], str]) -> None:
    """The ``apply`` tool: :func:`apply_patch` in a worker thread."""
    import anyio
    from mcp.server.mcpserver.exceptions import ToolError

    from .errors import IsopatchError
    from .mcp_parameters import Patch, Repo

    @tools.tool("Apply a captured patch to the work tree", APPLY_SCHEMA)
    async def apply(patch: Patch, repo: Repo = None) -> dict[str, Any]:
        """Apply a captured patch to the work tree as it is now, all or
        nothing, as --apply does: when any hunk does not apply nothing is
        written (a tool error says why); the index is never touched. An
        empty patch (the command changed nothing) gives applied false."""
        top = where(repo)
        path = os.path.abspath(os.path.join(top, patch))
        try:
            applied = await anyio.to_thread.run_sync(apply_patch, path, top)
        except IsopatchError as failure:
            raise ToolError(f"fatal: {failure.message} ({failure.code})") from None
        result: dict[str, Any] = {"applied": applied is not None, "patch": path}
        if applied:
            result["warnings"] = applied
        return result


def serve(default_repo: str = ".") -> None:
    """Serve on stdin/stdout until the client closes stdin.

    Raises:
        ImportError: the ``mcp`` package (2.x) is not installed.
    """
    build_server(default_repo).run("stdio")
