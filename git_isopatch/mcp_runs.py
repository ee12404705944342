"""What one call of the MCP server's tools does (:mod:`.mcp_server`),
without the SDK: ``capture`` runs the installed ``git-isopatch --json`` as a
child process (:func:`capture_argv`, :func:`run_isopatch`), reads its
result (:func:`read_result`) and adds the patch inline
(:func:`add_patch_text`); ``apply`` applies a captured patch as ``--apply``
does (:func:`apply_patch`)."""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Inline at most this many bytes of the patch by default.
PATCH_TEXT_LIMIT = 64 * 1024

#: How long a run interrupted by the client gets to clean up after
#: ``SIGTERM`` (git-isopatch forwards it to the command and removes its
#: worktree) before it is killed.
CANCEL_GRACE = 10.0


class CaptureFailure(Exception):
    """The run captured nothing: git-isopatch's own messages, and its
    result object when it printed one."""

    def __init__(self, messages: str, result: dict[str, Any] | None) -> None:
        self.messages = messages.strip() or "git-isopatch failed"
        self.result = result
        text = self.messages
        if result is not None:
            text += "\n" + json.dumps(result, ensure_ascii=False)
        super().__init__(text)


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
    session: str | None = None


#: git-isopatch as a module of the server's interpreter; ``-P`` keeps the
#: folder the server works in off the module path, where a repository's
#: own ``git_isopatch`` package would run, unconfined, in its place.
_OURS = (sys.executable, "-P", "-m", "git_isopatch")


def capture_argv(
    command: list[str], *, repo: str, options: CaptureOptions = CaptureOptions()
) -> list[str]:
    """The ``git-isopatch --json`` argument list of one ``capture`` call.
    Values go after ``=`` (``--base=<rev>``), so that one starting with a
    dash is never read as an option; ``-C`` gets an absolute path."""
    o = options
    argv = [*_OURS, "--json", "-q", "-C", os.path.abspath(repo)]
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
    if o.session is not None:
        argv.append(f"--session={o.session}")
    return [*argv, "--", *command]


def end_argv(session: str, *, repo: str) -> list[str]:
    """The ``git-isopatch --session=<name> --end`` argument list of one
    ``end_session`` call."""
    return [
        *_OURS,
        "-C",
        os.path.abspath(repo),
        f"--session={session}",
        "--end",
    ]


def read_result(status: int, stdout: bytes, stderr: bytes) -> dict[str, Any]:
    """The ``--json`` object of a finished run.

    Raises:
        CaptureFailure: the run printed no object (a usage error, 129: its
            message without the synopsis that follows it), or
            its object carries an ``error`` (nothing, or not all, was
            captured: the object says what is left, a kept worktree).
    """
    # a usage error's synopsis names the command line's options, not the call's
    messages = stderr.decode("utf-8", "replace").partition("\nusage: ")[0]
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
