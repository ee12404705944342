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

The SDK (``mcp`` on PyPI, the ``git-isopatch[mcp]`` extra) is imported by
:func:`build_server` only, so that this module imports without it and the
other commands never load it.  No ``from __future__ import annotations``:
the SDK reads the tools' parameter annotations to build their schemas.
"""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Annotated, Any

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


def capture_argv(
    command: list[str],
    *,
    repo: str,
    base: str | None = None,
    include_uncommitted: bool = False,
    staged: bool = False,
    link: list[str] | None = None,
    copy: list[str] | None = None,
    no_link: bool = False,
    no_copy: bool = False,
    recurse_submodules: bool | None = None,
    sandbox: bool | None = None,
    allow_write: list[str] | None = None,
    allow_network: bool = False,
    timeout: float | None = None,
    keep: bool | None = None,
) -> list[str]:
    """The ``git-isopatch --json`` argument list of one ``capture`` call.
    Values go after ``=`` (``--base=<rev>``), so that one starting with a
    dash is never read as an option; ``-C`` gets an absolute path."""
    argv = [sys.executable, "-m", "git_isopatch", "--json", "-q", "-C", os.path.abspath(repo)]
    if base is not None:
        argv.append(f"--base={base}")
    if include_uncommitted:
        argv.append("--include-uncommitted")
    if staged:
        argv.append("--staged")
    argv += [f"--link={path}" for path in link or ()]
    argv += [f"--copy={path}" for path in copy or ()]
    if no_link:
        argv.append("--no-link")
    if no_copy:
        argv.append("--no-copy")
    if recurse_submodules is not None:
        argv.append("--recurse-submodules" if recurse_submodules else "--no-recurse-submodules")
    if sandbox is not None:
        argv.append("--sandbox" if sandbox else "--no-sandbox")
    argv += [f"--allow-write={path}" for path in allow_write or ()]
    if allow_network:
        argv.append("--allow-network")
    if timeout is not None:
        argv.append(f"--timeout={float(timeout)!r}")
    if keep is not None:
        argv.append("--keep" if keep else "--no-keep")
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


def apply_patch(patch: str, repo: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """Apply ``patch`` to the work tree of the repository at ``repo`` as it
    is now, all or nothing, as ``--apply`` does; the index is never touched.
    Returns the warnings (paths someone else wrote meanwhile).

    Raises:
        IsopatchError: not a repository or work tree; ``no-such-file``;
            ``apply-failed`` (nothing was written, the reason in one line).
    """
    from .bring_home import bring_home
    from .git.run import own_git_environment
    from .isolation.errors import IsopatchError
    from .start import open_repository

    environ = os.environ if environ is None else environ
    repository = open_repository(repo, environ)
    if not os.path.isfile(patch):
        raise IsopatchError("no-such-file", f"no such patch file: '{patch}'")
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
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from pydantic import Field

    from .isolation.errors import IsopatchError

    server = MCPServer(
        name="git-isopatch",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )

    def where(repo: str | None) -> str:
        return os.path.join(default_repo, repo) if repo else default_repo

    @server.tool(
        annotations=ToolAnnotations(
            title="Capture a command's changes as a patch",
            readOnlyHint=False,
            destructiveHint=False,
            idempotentHint=False,
            openWorldHint=False,
        )
    )
    async def capture(
        command: Annotated[
            list[str],
            Field(
                min_length=1,
                description="the command and its arguments, an argument list (no shell): "
                '["ruff", "format", "."]; for a pipeline use ["sh", "-c", "..."]',
            ),
        ],
        repo: Annotated[
            str | None,
            Field(description="the repository (a folder in its work tree); default: the server's"),
        ] = None,
        base: Annotated[
            str | None, Field(description="the commit to start from (default HEAD)")
        ] = None,
        include_uncommitted: Annotated[
            bool,
            Field(description="start from HEAD plus the staged, unstaged and untracked changes"),
        ] = False,
        staged: Annotated[bool, Field(description="start from HEAD plus the index only")] = False,
        link: Annotated[
            list[str] | None,
            Field(
                description="ignored paths to symlink in (node_modules, .venv); "
                "writes reach the original"
            ),
        ] = None,
        copy: Annotated[
            list[str] | None, Field(description="ignored paths to copy in (a reflink where it can)")
        ] = None,
        no_link: Annotated[bool, Field(description="do not link the isopatch.link paths")] = False,
        no_copy: Annotated[
            bool,
            Field(description="do not copy the isopatch.copy and .worktreeinclude paths"),
        ] = False,
        recurse_submodules: Annotated[
            bool | None,
            Field(description="populate the checked-out submodules, capture inside them"),
        ] = None,
        sandbox: Annotated[
            bool | None,
            Field(
                description="confine the command (writes only to its worktree, no network); "
                "default: isopatch.sandbox (auto: where the machine allows)"
            ),
        ] = None,
        allow_write: Annotated[
            list[str] | None, Field(description="in the sandbox: paths really writable")
        ] = None,
        allow_network: Annotated[
            bool, Field(description="in the sandbox: keep the network")
        ] = False,
        timeout: Annotated[
            float | None,
            Field(
                ge=0, description="stop the command after this many seconds (exit 124); 0: no limit"
            ),
        ] = None,
        keep: Annotated[
            bool | None, Field(description="keep the worktree after the run (key worktree)")
        ] = None,
        patch_limit: Annotated[
            int,
            Field(ge=0, description="inline at most this many bytes of the patch as patch-text"),
        ] = PATCH_TEXT_LIMIT,
    ) -> dict[str, Any]:
        """Run a command in a throwaway worktree of the repository at a base
        commit and return what it changed: the same object as `git isopatch
        --json` (base, exit, patch, files, stdout, stderr, ...), plus
        patch-text (the patch inline) and patch-text-truncated (true: read
        the file named by patch). The checkout is never written; a bad base
        or repository is a tool error."""
        argv = capture_argv(
            command,
            repo=where(repo),
            base=base,
            include_uncommitted=include_uncommitted,
            staged=staged,
            link=link,
            copy=copy,
            no_link=no_link,
            no_copy=no_copy,
            recurse_submodules=recurse_submodules,
            sandbox=sandbox,
            allow_write=allow_write,
            allow_network=allow_network,
            timeout=timeout,
            keep=keep,
        )
        try:
            result = read_result(*await run_isopatch(argv))
        except CaptureFailure as failure:
            raise ToolError(str(failure)) from None
        return add_patch_text(result, patch_limit)

    @server.tool(
        annotations=ToolAnnotations(
            title="Apply a captured patch to the work tree",
            readOnlyHint=False,
            destructiveHint=False,
            idempotentHint=False,
            openWorldHint=False,
        )
    )
    async def apply(
        patch: Annotated[str, Field(description="the patch file a capture returned (its patch)")],
        repo: Annotated[
            str | None,
            Field(description="the repository (a folder in its work tree); default: the server's"),
        ] = None,
    ) -> dict[str, Any]:
        """Apply a captured patch to the work tree as it is now, all or
        nothing, as --apply does: when any hunk does not apply nothing is
        written (a tool error says why); the index is never touched."""
        top = where(repo)
        try:
            warnings = await anyio.to_thread.run_sync(apply_patch, os.path.join(top, patch), top)
        except IsopatchError as failure:
            raise ToolError(f"fatal: {failure.message} ({failure.code})") from None
        result: dict[str, Any] = {
            "applied": True,
            "patch": os.path.abspath(os.path.join(top, patch)),
        }
        if warnings:
            result["warnings"] = warnings
        return result

    return server


def serve(default_repo: str = ".") -> None:
    """Serve on stdin/stdout until the client closes stdin.

    Raises:
        ImportError: the ``mcp`` package (2.x) is not installed.
    """
    build_server(default_repo).run("stdio")
