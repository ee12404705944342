"""The user's work tree as ``git status`` sees it, read without writing:
what git-isopatch compares before and after a command to say whether the
checkout changed while it ran.

``git --no-optional-locks status --porcelain=v2 --branch -z`` (git-status(1),
"Background refresh": no index refresh is written) lists the paths that
differ from the index or ``HEAD`` and the untracked ones, with the user's
own untracked and ignored handling (``status.showUntrackedFiles``,
``.gitignore``), and the commit ``HEAD`` names, in one process.  A path
listed both times may still have changed again (a file already modified
that the command rewrites), so each listed path also carries its ``lstat``
fingerprint.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from .record import Record
from .result import Err, GitResult, Ok
from .run import run_git, start_git
from .types import GitDirPath

#: No file system monitor hook runs for the look (core.fsmonitor can name a
#: program of the repository).
STATUS_CONFIG: tuple[tuple[str, str], ...] = (("core.fsmonitor", "false"),)


class CheckoutState(Record):
    """One look at the work tree.

    Attributes:
        entries: each path git status lists (bytes, from the top; an
            untracked folder ends with ``/``) -> its two status letters and
            ``lstat`` fingerprint (``None`` when it does not exist).
        head: the commit ``HEAD`` names, which the letters compare with
            (``None``: an unborn branch).
    """

    entries: Mapping[bytes, tuple[bytes, tuple[int, ...] | None]]
    head: str | None = None


#: Fields before the path in the records of ``git status --porcelain=v2``:
#: ordinary changes, renames and copies, unmerged paths.
_FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10}


def parse_status_v2(output: bytes) -> tuple[dict[bytes, bytes], str | None]:
    """``git status --porcelain=v2 --branch -z`` -> path -> ``XY`` (as the
    first format writes them: a space where nothing changed, ``??`` for an
    untracked path, ``!!`` for an ignored one; a rename or copy lists its
    new path and its source under the same letters), and the commit
    ``HEAD`` names (``None``: an unborn branch)."""
    entries: dict[bytes, bytes] = {}
    head = None
    records = iter(output.split(b"\0"))
    for record in records:
        kind = record[:1]
        if record.startswith(b"# branch.oid "):
            oid = record[len(b"# branch.oid ") :].decode("ascii", "replace")
            head = None if oid == "(initial)" else oid
        elif kind in (b"?", b"!") and record[1:2] == b" ":
            entries[record[2:]] = kind * 2
        elif kind in _FIELDS_BEFORE_PATH:
            fields = record.split(b" ", _FIELDS_BEFORE_PATH[kind])
            if len(fields) <= _FIELDS_BEFORE_PATH[kind]:
                continue
            letters = fields[1].replace(b".", b" ")
            entries[fields[-1]] = letters
            if kind == b"2":
                source = next(records, b"")
                if source:
                    entries[source] = letters
    return entries, head


def _fingerprint(path: bytes) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def read_checkout(
    git_dir: GitDirPath, top: str, *, env: Mapping[str, str]
) -> GitResult[CheckoutState]:
    """Look at the work tree ``top`` of ``git_dir`` as ``git status`` does,
    writing nothing (``--no-optional-locks``, no fsmonitor hook).

    Returns:
        ``Ok(CheckoutState)`` or ``Err(GitError)``.
    """
    return start_reading_checkout(git_dir, top, env=env)()


def start_reading_checkout(
    git_dir: GitDirPath, top: str, *, env: Mapping[str, str]
) -> Callable[[], GitResult[CheckoutState]]:
    """:func:`read_checkout` with its ``git status`` started now
    (:func:`.run.start_git`); the function returned finishes it."""
    args = [
        f"--git-dir={git_dir}",
        f"--work-tree={top}",
        "--no-optional-locks",
        "status",
        "--porcelain=v2",
        "--branch",
        "--no-ahead-behind",  # the upstream's distance is not wanted: no walk
        "-z",
    ]
    listing = start_git(args, env=env, config=STATUS_CONFIG, cwd=top)

    def finish() -> GitResult[CheckoutState]:
        match listing():
            case Ok(output):
                pass
            case Err() as err:
                return err
        root = os.fsencode(top)
        listed, head = parse_status_v2(output)
        entries = {
            path: (letters, _fingerprint(os.path.join(root, path.rstrip(b"/"))))
            for path, letters in listed.items()
        }
        return Ok(CheckoutState(entries, head))

    return finish


def work_tree_changes(
    before: CheckoutState,
    after: CheckoutState,
    git_dir: GitDirPath,
    top: str,
    *,
    env: Mapping[str, str],
    ignore: Iterable[bytes] = (),
) -> list[bytes]:
    """The paths of the work tree that changed between two looks
    (:func:`changed_paths`), when ``HEAD`` moved between them too (a
    command moved the checked-out branch): then the status letters compare
    files with another commit, and only the files themselves count.  A
    path listed both times, or only before, changed when its fingerprint
    did; one listed only after changed when it is untracked, or when the
    work tree's file differs from the old ``HEAD`` (``git diff
    --name-only``: it was clean before, so it matched it then)."""
    paths = changed_paths(before, after, ignore=ignore)
    if before.head == after.head or before.head is None:
        return paths
    root = os.fsencode(top)
    changed, new = [], []
    for path in paths:
        if path in before.entries:
            then = before.entries[path][1]
            now = _fingerprint(os.path.join(root, path.rstrip(b"/")))
            if then != now:
                changed.append(path)
        elif after.entries[path][0] == b"??":
            changed.append(path)
        else:
            new.append(path)
    if new:
        args = [f"--git-dir={git_dir}", f"--work-tree={top}", "--no-optional-locks", "diff"]
        args += ["--name-only", "-z", "--no-renames", before.head, "--", *map(os.fsdecode, new)]
        match run_git(args, env=env, config=(*STATUS_CONFIG, ("core.quotePath", "false")), cwd=top):
            case Ok(output):
                differs = set(output.split(b"\0"))
                changed += [p for p in new if p in differs]
            case Err():
                changed += new
    return sorted(changed)


def changed_paths(
    before: CheckoutState, after: CheckoutState, *, ignore: Iterable[bytes] = ()
) -> list[bytes]:
    """The paths whose status or fingerprint differs between two looks,
    sorted; paths inside a folder of ``ignore`` (from the top, no trailing
    ``/``), or folders that hold one, are left out."""
    skip = [p.rstrip(b"/") for p in ignore]

    def ignored(path: bytes) -> bool:
        bare = path.rstrip(b"/")
        return any(
            bare == s or bare.startswith(s + b"/") or s.startswith(bare + b"/") for s in skip
        )

    paths = set(before.entries) | set(after.entries)
    return sorted(
        p for p in paths if before.entries.get(p) != after.entries.get(p) and not ignored(p)
    )
