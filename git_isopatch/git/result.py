"""``GitResult[T] = Ok[T] | Err[GitError]`` (design: Architecture).

Git operations that can fail in an expected way return a ``GitResult``;
callers ``match`` on it::

    match run_git([...]):
        case Ok(value):
            ...
        case Err(error):
            ...
"""

from __future__ import annotations

from typing import Generic, TypeVar, Union

from .record import Record

T = TypeVar("T")


class GitError(Record):
    """A failed git invocation or look-up.

    Attributes:
        args: the argument list that was run (``[]`` for a pygit2 look-up).
        returncode: git's exit status; ``None`` when git could not be started
            or was stopped by the timeout.
        stderr: what git printed on stderr (bytes, undecoded).
        reason: a short description when there is no git stderr (OSError text,
            ``"timed out after N seconds"``, pygit2's message).
        errno: the OS error number when the failure was an ``OSError``.
        timed_out: git was stopped by the timeout.
        hints: git's advice after its message (``hint:`` lines, and the
            lines of a ``fatal:`` message after its first, such as the
            ``safe.directory`` advice), without the ``hint: `` prefix.
    """

    args: tuple[str, ...] = ()
    returncode: int | None = None
    stderr: bytes = b""
    reason: str = ""
    errno: int | None = None
    timed_out: bool = False
    hints: tuple[str, ...] = ()

    @classmethod
    def refusal(cls, args: tuple[str, ...], returncode: int, stderr: bytes) -> GitError:
        """A git refusal passed on as git said it: ``reason`` is the first
        line of ``stderr`` without its ``fatal: ``/``error: `` prefix,
        ``hints`` the advice that follows (``hint:`` lines and the
        continuation lines of the message; later ``fatal:``/``error:``
        lines, such as "Needed a single revision", are dropped); a leading
        tab becomes two spaces, as git indents its candidates."""
        lines = [line.rstrip() for line in stderr.decode("utf-8", "replace").splitlines()]
        lines = [line for line in lines if line.strip()]
        first = lines[0] if lines else f"git exited with status {returncode}"
        for prefix in ("fatal: ", "error: "):
            first = first.removeprefix(prefix)
        hints = []
        for line in lines[1:]:
            if line.startswith(("fatal: ", "error: ", "warning: ")):
                continue
            if line.startswith("hint:"):
                line = line.removeprefix("hint:").removeprefix(" ")
            hints.append("  " + line.lstrip("\t") if line.startswith("\t") else line)
        return cls(
            args=args,
            returncode=returncode,
            stderr=stderr,
            reason=first.rstrip("."),
            hints=tuple(hints),
        )

    def message(self) -> str:
        """One line: ``reason`` when the failure has an ``errno`` (the OS
        said why); else git's first ``error:`` line and its last ``fatal:``
        line in parentheses, or whichever of the two there is; else the last
        line git printed; else ``reason``.  A full stop at the end is
        dropped, as git's style wants of messages (some of git's own end
        with one, "...: File exists.")."""
        line = self._line()
        return line[:-1] if line.endswith(".") and not line.endswith("..") else line

    def _line(self) -> str:
        if (self.errno is not None or self.hints or self.returncode is not None) and self.reason:
            return self.reason
        lines = [
            line.strip()
            for line in self.stderr.decode("utf-8", "replace").splitlines()
            if line.strip()
        ]
        errors = [line[len("error: ") :] for line in lines if line.startswith("error: ")]
        fatals = [line[len("fatal: ") :] for line in lines if line.startswith("fatal: ")]
        if errors and fatals:  # "error: unable to write file x" says more than the fatal
            return f"{errors[0]} ({fatals[-1].rstrip('.')})"
        if fatals or errors:
            return (fatals or errors)[-1]
        if lines:
            return lines[-1]
        return self.reason or f"git exited with status {self.returncode}"


class Ok(Record, Generic[T]):
    value: T


class Err(Record):
    error: GitError = GitError()


GitResult = Union[Ok[T], Err]
