"""The formats of a result: porcelain v1, JSON, the human summary, and the
output of ``list`` and ``prune``, as pure functions (design: "Porcelain
v1", Architecture).

:mod:`git_isopatch.outcome` decides what of it is shown (and the
messages and exit status); this module is loaded only when a format is
(a summary, ``--porcelain``, ``--json``, ``list``), so a quiet run does
not pay for it.  Nothing here writes.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from .git.quote import quote_c_style, quoted, shell_quoted

if TYPE_CHECKING:
    from .result import CaptureResult, OutputMode

#: The version of the result's format: ``version 1`` (design: Porcelain v1).
#: Keys are only ever added to a version; one that changes meaning makes
#: the next.
FORMAT_VERSION = 1

#: Porcelain v1 keys, in output order (design: Porcelain v1); the JSON
#: object has the same keys in the same order, and its schema
#: (``schema/result.json``) lists them so; :data:`JSON_ONLY_KEYS` are
#: in the JSON object alone.
PORCELAIN_KEYS = (
    "version",
    "command",
    "base",
    "exit",
    "signal",
    "timed-out",
    "limit-reached",
    "command-error",
    "sandbox",
    "patch",
    "files",
    "path",
    "insertions",
    "deletions",
    "applied",
    "stdout",
    "stderr",
    "stdout-text",
    "stderr-text",
    "session",
    "session-patch",
    "session-files",
    "worktree",
    "shared-write",
    "checkout-change",
    "outside-write",
    "duration",
    "error",
    "error-code",
    "hint",
)

#: Keys of the JSON object only (and MCP's): the porcelain names the files.
JSON_ONLY_KEYS = frozenset({"stdout-text", "stderr-text"})

#: Keys that may repeat: one record each (a JSON array).
LIST_KEYS = frozenset(
    {"command", "path", "shared-write", "checkout-change", "outside-write", "hint"}
)

#: Keys whose value is a path (quoted like git quotes paths without ``-z``);
#: each ``command`` argument is quoted so too, so that one is one line.
PATH_KEYS = frozenset(
    {
        "command",
        "patch",
        "stdout",
        "stderr",
        "session-patch",
        "worktree",
        "checkout-change",
        "outside-write",
    }
)

#: Keys whose value is ``<name> <word>``: the name is quoted as a path is.
QUOTED_NAME_KEYS = frozenset({"shared-write"})

#: Keys whose value is one line of text: a newline in it becomes a space
#: without ``-z``.
TEXT_KEYS = frozenset({"error", "command-error", "hint"})


def result_fields(result: CaptureResult) -> dict[str, object]:
    """The porcelain/JSON fields of a ``CaptureResult``, in order, absent
    ones left out (design: Porcelain v1)."""
    fields: dict[str, object] = {
        "version": FORMAT_VERSION,
        "command": list(result.command) or None,
        "base": result.base,
        "exit": result.exit_code,
        "signal": None if result.timed_out else signal_name(result.command_signal),
        "timed-out": True if result.timed_out else None,
        "limit-reached": result.limit_reached,
        "command-error": result.command_error,
        "sandbox": result.sandboxed,
        "patch": result.patch_path,
        "files": result.files,
        "path": None if result.paths is None else [change.fields() for change in result.paths],
        "insertions": result.insertions,
        "deletions": result.deletions,
        "applied": result.applied,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "stdout-text": result.stdout_text,
        "stderr-text": result.stderr_text,
        "session": result.session,
        "session-patch": result.session_patch,
        "session-files": result.session_files,
        "worktree": result.worktree_path,
        "shared-write": [write.record() for write in result.shared_writes] or None,
        "checkout-change": list(result.checkout_changes) or None,
        "outside-write": list(result.outside_writes) or None,
        "duration": None if result.duration is None else round(result.duration, 3),
        "error": result.error,
        "error-code": result.error_code,
        "hint": [
            *result.hints,
            *result.informational_hints,
            *result.apply_hints,
            *([result.session_broken] if result.session_broken else []),
        ]
        or None,
    }
    return {k: v for k, v in fields.items() if v is not None}


def signal_name(number: int | None) -> str | None:
    """``SIGTERM`` for 15; ``SIG<n>`` for a number Python does not name."""
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def failure_fields(message: str, code: str, hint: str | None = None) -> dict[str, object]:
    """The porcelain/JSON fields of a failure before any result existed:
    ``version``, ``error``, ``error-code``, and a ``hint`` per line of git's
    advice."""
    fields: dict[str, object] = {"version": FORMAT_VERSION, "error": message, "error-code": code}
    if hint:
        fields["hint"] = hint.splitlines()
    return fields


def _value_bytes(key: str, one: object, *, nul: bool) -> bytes:
    """One record's value: quoted as git quotes paths without ``nul``."""
    if isinstance(one, bool):
        return b"true" if one else b"false"
    if isinstance(one, dict):  # a ``path``: status, path, and the old path of a rename
        raw = one["status"].encode() + b" " + _value_bytes("patch", one["path"], nul=nul)
        if "old-path" in one:  # as git status --porcelain=v2: <path><sep><old path>
            raw += (b"\0" if nul else b"\t") + _value_bytes("patch", one["old-path"], nul=nul)
        return raw
    raw = os.fsencode(one) if isinstance(one, str) else str(one).encode()
    if nul:
        return raw
    if key in PATH_KEYS:
        return quote_c_style(raw)
    if key in QUOTED_NAME_KEYS:
        name, _, rest = raw.rpartition(b" ")
        return quote_c_style(name) + b" " + rest
    if key in TEXT_KEYS:
        return raw.replace(b"\n", b" ")
    return raw


def porcelain(fields: dict[str, object], *, nul: bool) -> bytes:
    """Porcelain v1 records: ``key value`` each ended by ``\n``, or by NUL
    with ``nul`` (then nothing is quoted)."""
    end = b"\0" if nul else b"\n"
    out = bytearray()
    for key in PORCELAIN_KEYS:
        if key not in fields or key in JSON_ONLY_KEYS:
            continue
        value = fields[key]
        for one in value if key in LIST_KEYS else [value]:  # type: ignore[attr-defined]
            out += key.encode() + b" " + _value_bytes(key, one, nul=nul) + end
    return bytes(out)


def as_json(fields: dict[str, object]) -> bytes:
    """One JSON object with the porcelain fields, and a newline.  A byte of
    a path that is not UTF-8 is the lone surrogate ``\\udcXX`` of
    ``os.fsdecode`` (``os.fsencode`` gives the bytes back); ``-z``
    porcelain has the bytes themselves."""
    return json.dumps(fields, ensure_ascii=True).encode() + b"\n"


def encode(fields: dict[str, object], mode: OutputMode) -> bytes:
    """``fields`` as ``mode`` puts them on stdout: porcelain or JSON."""
    return porcelain(fields, nul=mode.nul) if mode.porcelain else as_json(fields)


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def summary_lines(
    result: CaptureResult, *, show_patch: bool = True, cwd: str | None = None
) -> Iterable[str]:
    """The human summary for stderr, after the diffstat (design: "The human
    summary"): ``isopatch: 3 files changed, exit 0, patch <path>`` (without
    the patch when not ``show_patch``: it went to stdout, or it is empty
    and goes; ``applied to the
    work tree`` instead with ``--apply``, ``applied to the index and the
    work tree`` with ``--staged --apply``), a session's whole change (which
    ``--apply`` brings home: the session's line says it was applied, not
    the step's), the kept worktree, and the next
    step: the command that applies the patch from ``cwd``
    (:func:`apply_command`), or why ``--apply`` did not apply it."""
    patch = result.patch_path
    if patch is None:
        return
    applied = f", applied to the {'index and the ' if result.applied_to_index else ''}work tree"
    session = result.session is not None and result.session_patch is not None
    line = (
        f"isopatch: {plural(result.files or 0, 'file', 'files')} changed, exit {result.exit_code}"
    )
    if result.applied and not session:
        line += applied
    elif show_patch and not result.applied:
        line += f", patch {_bare(patch)}"
    yield line
    files = result.files
    if session:  # a step's --apply brings home the session's whole change
        patch, files = result.session_patch, result.session_files
        whole = plural(files or 0, "file", "files")
        end = applied if result.applied else f", patch {_bare(patch)}" if files else ""
        yield f"isopatch: session {result.session}: {whole} changed{end}"
    if result.worktree_path is not None:
        yield f"isopatch: worktree kept at {_bare(result.worktree_path)}"
    if result.applied or result.error_code is not None:
        return
    if result.applied is False and files and result.exit_code != 0:
        yield f"hint: not applied: the command exited {result.exit_code}"
    if files and (show_patch or session) and result.top is not None:
        yield f"hint: to apply it: {apply_command(patch, result.top, cwd or os.getcwd())}"


def _bare(path: str) -> str:
    """``path`` as the summary shows it: bare, or C-quoted when it must be."""
    return quote_c_style(os.fsencode(path)).decode("ascii")


def apply_command(patch: str, top: str, cwd: str) -> str:
    """The shell command that applies ``patch`` to the work tree at ``top``
    when typed in ``cwd``: ``git apply --whitespace=nowarn <patch>`` at the
    top, else ``git -C <top> apply --whitespace=nowarn <patch>``
    (``..``-style when ``cwd`` is below the top), since ``git apply`` in a
    subfolder leaves out the paths outside it
    (git-apply(1)).  Paths are quoted for a POSIX shell."""
    word = shell_quoted(patch)
    # --whitespace=nowarn: the user's apply.whitespace must neither refuse
    # nor "fix" a line that ends in blanks (git-config(1), apply.whitespace)
    if os.path.realpath(cwd) == os.path.realpath(top):
        return f"git apply --whitespace=nowarn {word}"
    up = os.path.relpath(os.path.realpath(top), os.path.realpath(cwd))
    where = up if all(part == ".." for part in up.split(os.sep)) else top
    return f"git -C {shell_quoted(where)} apply --whitespace=nowarn {word}"


class ListedWorktree(Protocol):
    """What ``git isopatch list`` shows of a worktree (the inventory's
    ``OwnedWorktree`` has it); a protocol so that rendering does not
    import the worktrees or the sandbox."""

    @property
    def path(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def created(self) -> float | None: ...
    @property
    def head(self) -> str | None: ...
    @property
    def command(self) -> tuple[str, ...]: ...
    @property
    def prunable(self) -> str | None: ...
    @property
    def session(self) -> str | None: ...
    @property
    def size(self) -> int | None: ...
    def age(self, now: float) -> float | None: ...


def relative_age(seconds: float | None) -> str:
    """``5 seconds ago``, ``3 minutes ago``, ``2 hours ago``, ``4 days ago``
    (the largest whole unit, as git's relative dates read); ``unknown age``
    for ``None``."""
    if seconds is None:
        return "unknown age"
    value = int(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if value >= size:
            return f"{plural(value // size, unit, unit + 's')} ago"
    return f"{plural(value, 'second', 'seconds')} ago"


def worktree_list_lines(worktrees: Iterable[ListedWorktree], now: float) -> list[str]:
    """``git isopatch list``: one line per worktree, ``<path>  <state>
    <age>  <command>``, columns aligned; a running one shows its pid, one
    whose folder is gone (or another repository's) ``, prunable``."""
    rows = []
    for worktree in worktrees:
        state = worktree.state
        if worktree.pid is not None and state == "running":
            state = f"running (pid {worktree.pid})"
        if worktree.session is not None:  # a name is no path: never quoted
            base, size = (worktree.head or "")[:12], human_size(worktree.size or 0)
            state = f"session {worktree.session} at {base}, {size}"
        if worktree.prunable is not None:  # as git worktree list annotates it
            state += ", prunable"
        path = quote_c_style(os.fsencode(worktree.path)).decode("utf-8", "replace")
        # the command may hold newlines and control bytes: quoted as in the
        # porcelain, so that a worktree is one line and none reaches a terminal
        command = quote_c_style(os.fsencode(shlex.join(worktree.command)))
        rows.append(
            (path, state, relative_age(worktree.age(now)), command.decode("utf-8", "replace"))
        )
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    # a base tree has no command: its line ends at its age, unpadded
    return [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)), row[3]]
        ).rstrip(" ")
        for row in rows
    ]


def human_size(size: int) -> str:
    """``size`` as git writes one for people (``count-objects -H``, strbuf.c
    ``strbuf_humanise_bytes``): ``1 byte``, ``1023 bytes``, ``1.50 KiB``."""
    if size > 1 << 30:
        return f"{size >> 30}.{(size & ((1 << 30) - 1)) // 10737419:02d} GiB"
    for shift, unit, rounding in ((20, "MiB", 5243), (10, "KiB", 5)):
        if size > 1 << shift:
            x = size + rounding
            return f"{x >> shift}.{((x & ((1 << shift) - 1)) * 100) >> shift:02d} {unit}"
    return "1 byte" if size == 1 else f"{size} bytes"


def prune_lines(
    removed: Iterable[tuple[str, str]],
    folders: Iterable[tuple[str, str]],
    *,
    here: str | None,
    failed: Iterable[tuple[str, str]],
    verbose: bool,
) -> tuple[list[str], list[str]]:
    """``git isopatch prune``: the stdout lines (with ``verbose``, each
    ``(path, state)`` removed and each ``(path, what)`` of the result
    folders and the cache layer) and the stderr lines
    (the worktree ``here`` the user stands in, each ``(path, reason)`` that
    failed), each ended by a newline."""
    out = [f"Removing {path}: {state}\n" for path, state in removed] if verbose else []
    out += [f"Removing {path}: {what}\n" for path, what in folders] if verbose else []
    err = [f"warning: not pruning {quoted(here)}: you are in it\n"] if here else []
    err += [f"error: could not prune {quoted(path)}: {why}\n" for path, why in failed]
    return out, err


def worktree_list_porcelain(worktrees: Iterable[ListedWorktree], *, nul: bool) -> bytes:
    """``git isopatch list --porcelain``: per worktree, ``key value``
    records in this order, then an empty record:

    ``worktree <path>``, ``state <running|kept|pooled|orphaned|locked|base|session>``,
    ``pid <pid>`` (when known), ``created <seconds since the epoch>`` (when
    known; a session's: when its last step ended), ``head <commit id>``
    (when git reports one; a session's base), ``command <the command,
    shell-quoted>`` (when known), ``prunable <reason>`` (its folder is
    gone, or another repository's), ``session <name>`` and ``size <bytes of its whole change>`` (a
    session).

    Records end with ``\\n``; with ``nul`` they end with NUL and nothing is
    quoted, else ``worktree``, ``command`` and ``prunable`` values are quoted
    as git quotes paths (as ``git worktree list --porcelain [-z]``).
    """
    end = b"\0" if nul else b"\n"
    out = bytearray()

    def record(key: str, value: str, quoted: bool = False) -> None:
        raw = os.fsencode(value)
        if quoted and not nul:
            raw = quote_c_style(raw)
        out.extend(key.encode() + b" " + raw + end)

    for worktree in worktrees:
        record("worktree", worktree.path, quoted=True)
        record("state", worktree.state)
        if worktree.pid is not None:
            record("pid", str(worktree.pid))
        if worktree.created is not None:
            record("created", str(int(worktree.created)))
        if worktree.head:
            record("head", worktree.head)
        if worktree.command:
            record("command", shlex.join(worktree.command), quoted=True)
        if worktree.prunable is not None:
            record("prunable", worktree.prunable, quoted=True)
        if worktree.session is not None:
            record("session", worktree.session)
            record("size", str(worktree.size or 0))
        out.extend(end)
    return bytes(out)


def worktree_list_json(worktrees: Iterable[ListedWorktree]) -> bytes:
    """``git isopatch list --json``: one JSON array and a newline, an object
    per worktree with the keys of :func:`worktree_list_porcelain`, in its
    order, absent ones left out: ``worktree``, ``state``, ``head``,
    ``prunable`` strings, ``pid`` and ``created`` (seconds since the epoch)
    numbers, and ``command`` the argument list, an array of strings.
    Paths are decoded as the other JSON output decodes them (a byte that is
    not UTF-8 becomes a lone surrogate)."""
    objects = []
    for worktree in worktrees:
        fields: dict[str, object] = {
            "worktree": worktree.path,
            "state": worktree.state,
            "pid": worktree.pid,
            "created": None if worktree.created is None else int(worktree.created),
            "head": worktree.head or None,
            "command": list(worktree.command) or None,
            "prunable": worktree.prunable,
            "session": worktree.session,
            "size": None if worktree.session is None else worktree.size or 0,
        }
        objects.append({k: v for k, v in fields.items() if v is not None})
    return json.dumps(objects, ensure_ascii=True).encode() + b"\n"
