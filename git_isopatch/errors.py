"""Known failures, classified into a stable code and a one-line message.

Design: Architecture, "Known failures ... are classified into a user message
and a stable code; an unknown failure is a bug and propagates as a crash".
The table :data:`FAILURE_TABLE` is the single place where git's and the OS's
wording is matched; each row has a test in ``tests/cli/test_cli_errors.py``.
"""

from __future__ import annotations

import errno as errno_codes
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .git.record import Record
from .git.result import Err, GitError, Ok

if TYPE_CHECKING:
    from .git.repo import UserRepository


class IsopatchError(Exception):
    """A known failure: git-isopatch prints ``fatal: <message>`` and exits 128.

    Attributes:
        code: stable machine-readable code (``porcelain``/``json`` ``error-code``).
        message: one line, git style (lowercase start, no full stop).
        hint: an optional ``hint:`` line.
        worktree: the path of a worktree kept for inspection, if any.
    """

    exit_status = 128

    def __init__(
        self, code: str, message: str, *, hint: str | None = None, worktree: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.worktree = worktree


class Interrupted(Exception):
    """A signal that reached git-isopatch stopped the run before it had a
    result: it ends with ``128 + signum`` and nothing on stdout, as the
    signal says, not as the failure the signal caused (a git it killed).

    Attributes:
        signum: the signal, when known.
    """

    def __init__(self, what: str, signum: int | None = None) -> None:
        super().__init__(what)
        self.signum = signum


class UnexpectedGitFailure(RuntimeError):
    """Git failed in a way the classification table does not know: a bug."""

    def __init__(self, action: str, error: GitError) -> None:
        super().__init__(
            f"{action}: git {' '.join(error.args[1:4])}... failed "
            f"(status {error.returncode}): {error.message()}"
        )
        self.error = error


class FailureKind(Record):
    """One row of the classification table.

    Attributes:
        code: the stable code.
        errnos: OS error numbers that mean this failure.
        pattern: a regular expression searched in git's stderr (``LC_ALL=C``)
            or in the failure's reason (compiled when a failure is
            classified, not as the table is built: most runs classify none).
        timed_out: matches a timed-out git call.
        any_git_refusal: matches any git call that ended with an exit
            status other than 129 (git's usage error, which means that
            git-isopatch called git wrongly: a bug).
    """

    code: str
    errnos: frozenset[int] = frozenset()
    pattern: str | None = None
    timed_out: bool = False
    any_git_refusal: bool = False

    def matches(self, error: GitError) -> bool:
        if self.timed_out and error.timed_out:
            return True
        if self.any_git_refusal:
            return bool(error.args) and error.returncode not in (None, USAGE_STATUS)
        if error.errno is not None and error.errno in self.errnos:
            return True
        if self.pattern is None:
            return False
        text = error.stderr.decode("utf-8", "replace") + "\n" + error.reason
        return re.search(self.pattern, text, re.MULTILINE) is not None


#: git's exit status for a usage error (parse-options.c).
USAGE_STATUS = 129


def _row(
    code: str,
    errnos: tuple[int, ...] = (),
    pattern: str | None = None,
    timed_out: bool = False,
    any_git_refusal: bool = False,
) -> FailureKind:
    return FailureKind(
        code=code,
        errnos=frozenset(errnos),
        pattern=pattern or None,
        timed_out=timed_out,
        any_git_refusal=any_git_refusal,
    )


#: Known git and OS failures, most specific first.
FAILURE_TABLE: tuple[FailureKind, ...] = (
    _row("timeout", timed_out=True),
    # a signal reached git-isopatch while it streamed the patch, and the
    # git doing it was stopped (git.stream.stop_streams)
    _row("interrupted", pattern=r"^stopped by a signal$"),
    _row(
        "no-space",
        (errno_codes.ENOSPC, errno_codes.EDQUOT),
        r"No space left on device|Disk quota exceeded",
    ),
    _row("read-only", (errno_codes.EROFS,), r"Read-only file system"),
    _row("permission-denied", (errno_codes.EACCES, errno_codes.EPERM), r"Permission denied"),
    _row("git-not-found", pattern=r"cannot run git: No such file"),
    _row(
        "bad-config",
        pattern=r"bad config (?:line|value|file)|bad (?:numeric|boolean) config value"
        r"|unable to parse command-line config",
    ),
    # our own file operations (the -o target): by errno only, never by
    # git's wording, which says "No such file" of many things
    _row("no-such-file", (errno_codes.ENOENT,)),
    _row("not-a-directory", (errno_codes.ENOTDIR,), r": Not a directory$"),
    _row("is-a-directory", (errno_codes.EISDIR,)),
    _row("not-a-git-repository", pattern=r"not a git repository"),
    # git refuses a repository another user owns (safe.directory, git-config(1))
    _row("dubious-ownership", pattern=r"detected dubious ownership"),
    _row("not-a-work-tree", pattern=r"must be run in a work tree"),
    _row("unborn-head", pattern=r"unborn HEAD"),
    _row("ambiguous-revision", pattern=r"short object ID \S+ is ambiguous"),
    _row(
        "unknown-revision",
        pattern=r"unknown revision|bad revision|invalid reference|is not a commit",
    ),
    _row("worktree-locked", pattern=r"is locked|locked working tree|missing but locked"),
    _row("worktree-exists", pattern=r"already exists|already registered|already checked out"),
    _row("index-locked", pattern=r"index\.lock': File exists"),
    # Checkout could not write a file; git does not say why (entry.c).
    _row("checkout-failed", pattern=r"unable to (?:write|create) file"),
    _row(
        "unsupported-repository",
        pattern=r"unsupported repository|unknown repository extension"
        r"|expected git repo version <= \d+",
    ),
    # a partial clone needs an object its promisor remote cannot give
    # (git-config(1), remote.<name>.promisor; the remote is gone or offline)
    _row("promisor-remote", pattern=r"from promisor remote"),
    # a clean/smudge filter the repository requires failed (gitattributes(5));
    # a long-running ``filter.<driver>.process`` that cannot start or dies
    # leaves git with a closed pipe: "the remote end hung up unexpectedly"
    # (pkt-line.c), where no remote is involved
    _row(
        "filter-failed",
        pattern=r"filter '?[^ ]*'? failed|filter [^ ]+ failed"
        r"|^fatal: the remote end hung up unexpectedly$",
    ),
    # the command left a repository without commits inside its worktree
    _row("embedded-repository", pattern=r"does not have a commit checked out"),
    # --recurse-submodules: git submodule update could not clone, fetch or
    # check out a submodule (submodule--helper's messages name its path)
    _row(
        "submodule-failed",
        pattern=r"in submodule path|into submodule path|submodule path '[^']*'",
    ),
    # Last: any other refusal of git is git's, said in its words (design:
    # "a failure of git that the repository explains is git's message under
    # fatal:"); only a usage error of git, or no git at all, is a bug.
    _row("git-failed", any_git_refusal=True),
)


def classify(error: GitError) -> str | None:
    """Return the code of the first matching row of :data:`FAILURE_TABLE`.

    Returns ``None`` for a failure no row knows (the caller treats that as a
    bug and raises :class:`UnexpectedGitFailure`).
    """
    for kind in FAILURE_TABLE:
        if kind.matches(error):
            return kind.code
    return None


def classify_os_error(exc: OSError) -> str | None:
    """Classify an ``OSError`` raised by our own file operations."""
    return classify(GitError(reason=exc.strerror or str(exc), errno=exc.errno))


def known_os_failure(action: str, exc: OSError) -> IsopatchError:
    """Turn ``exc``, raised by our own file operations, into an
    :class:`IsopatchError` reading ``<action>: <strerror>``.

    Raises:
        OSError: ``exc`` itself, when no row of the table knows it (a bug).
    """
    code = classify_os_error(exc)
    if code is None:
        raise exc
    return IsopatchError(code, f"{action}: {exc.strerror}")


def known_failure(
    action: str, error: GitError, *, worktree: str | None = None, hint: str | None = None
) -> IsopatchError:
    """Turn ``error`` into an :class:`IsopatchError` for ``action``.

    ``action`` reads as the start of the message, e.g. ``"could not create
    worktree at '/tmp/x'"``; git's own line follows after ``": "``.

    Raises:
        UnexpectedGitFailure: ``error`` matches no row of the table.
    """
    code = classify(error)
    if code is None:
        raise UnexpectedGitFailure(action, error)
    message = error.message()
    if code == "filter-failed" and (
        message == "the remote end hung up unexpectedly" or message.startswith("packet write")
    ):
        message = _filter_process_message(error, message)
    hint = hint or "\n".join(error.hints) or None
    return IsopatchError(code, f"{action}: {message}", worktree=worktree, hint=hint)


#: ``HEAD`` has no commit yet: what starts from what the user has.
UNBORN_HINT = (
    "there is no commit yet: --include-uncommitted starts from your work tree,"
    " --staged from your index"
)


def repository_failure(error: GitError, default: str | None = None) -> IsopatchError:
    """git's or libgit2's refusal of the repository or the base, with git's
    advice as hints; ``default`` is the code when no specific row of the
    table classifies it (else ``git-failed``, or ``not-a-git-repository``
    for libgit2's own refusals)."""
    code = classify(error)
    if default is not None and code in (None, "git-failed"):
        code = default
    hint = "\n".join(error.hints) or None
    if code == "unborn-head" and error.message().startswith("unborn HEAD: 'HEAD' "):
        hint = hint or UNBORN_HINT  # the default base: the user's work is there
    return IsopatchError(code or "not-a-git-repository", error.message(), hint=hint)


def open_repository(repo_path: str, environ: Mapping[str, str]) -> UserRepository:
    """Step 2, first half: the user's repository as git would find it, as
    every command of git-isopatch opens it (a run, ``list``, ``prune``, the
    MCP server's ``apply``), or git's refusal classified.

    Raises:
        IsopatchError: ``not-a-git-repository`` or ``not-a-work-tree``.
    """
    from .git.repo import open_user_repository

    match open_user_repository(repo_path, environ):
        case Ok(repository):
            return repository
        case Err(error):
            raise repository_failure(error)


def config_failure(
    message: str, *, hint: str | None = None, error: GitError | None = None
) -> IsopatchError:
    """``bad-config`` for an ``isopatch.*`` value git-isopatch cannot use
    (``message``: ``bad config value for '<key>'``, ``hint``: why); with
    ``error``, git's refusal to read the configuration, classified
    (``message`` is then the action: :func:`known_failure`)."""
    if error is not None:
        return known_failure(message, error)
    return IsopatchError("bad-config", message, hint=hint)


def _filter_process_message(error: GitError, said_last: str) -> str:
    """What git says when a ``filter.<driver>.process`` program could not
    start or died (``said_last``: "the remote end hung up unexpectedly", or,
    when git was writing to it as it died, "packet write with format
    failed (...)"), put in words that name the filter: the line its shell
    or program printed, if any ("git-lfs filter-process: 1: git-lfs: not
    found"), then git's own words in parentheses."""
    said = [
        line.strip()
        for line in error.stderr.decode("utf-8", "replace").splitlines()
        if line.strip()
        and not line.startswith(("fatal: ", "error: ", "warning: ", "hint: "))
        and not line.startswith(("Preparing worktree", "HEAD is now at", "Updating files"))
    ]
    detail = f": {said[-1]}" if said else ""
    return f"a filter process failed{detail} ({said_last})"


#: The error code of a sandbox that cannot be had here.
UNAVAILABLE = "sandbox-unavailable"


def unavailable(message: str) -> IsopatchError:
    """The ``sandbox-unavailable`` failure, naming what is missing (in
    bubblewrap's words where it said why)."""
    return IsopatchError(
        UNAVAILABLE,
        f"--sandbox is not available: {message}",
        hint="\"Sandbox\" in 'git isopatch --help' says what it needs",
    )


#: The error code of a sandbox that failed under a run: what it should
#: have told (how the command ended, what our own git reads) is lost.
SANDBOX_FAILED = "sandbox-failed"


def sandbox_failed(message: str) -> IsopatchError:
    """The ``sandbox-failed`` failure: ``message`` says what failed."""
    return IsopatchError(SANDBOX_FAILED, f"the sandbox failed: {message}")
