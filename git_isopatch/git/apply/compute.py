"""Step 1 of an apply (see :mod:`..apply`), *compute*, writing nothing of
the user's: the work tree's content of the paths a patch touches, hashed
into a temporary index, the patch applied there with ``git apply
--cached``, and the patched contents read back as a checkout writes them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence

from ..record import Record
from ..result import Err, GitError, GitResult, Ok
from ..run import run_git
from ..types import GitDirPath, RepoPath

#: ``-c`` settings for ``git apply`` and the temporary indexes: the user's
#: ``apply.ignoreWhitespace`` would let context match loosely
#: (git-config(1)); no hook and no file system monitor hook runs; the
#: index copies are full, plain ones (see :data:`..snapshot.SNAPSHOT_CONFIG`).
APPLY_CONFIG: tuple[tuple[str, str], ...] = (
    ("apply.ignoreWhitespace", "no"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.splitIndex", "false"),
    ("index.sparse", "false"),
)

#: ``git apply`` options: ``--whitespace=nowarn`` overrides the user's
#: ``apply.whitespace`` (``error`` would refuse, ``fix`` would rewrite what
#: the command wrote: the work tree must get exactly the captured change).
APPLY_OPTIONS: tuple[str, ...] = ("--whitespace=nowarn",)

GITLINK = "160000"
SYMLINK = "120000"


class Entry(Record):
    """An index entry: ``mode`` as git writes it (``100644``, ``100755``,
    ``120000``, ``160000``) and the object id."""

    mode: str
    oid: str


def fail(reason: str, err: int | None = None) -> Err:
    return Err(GitError(reason=reason, errno=err))


def os_fail(what: str, exc: OSError) -> Err:
    return fail(f"{what}: {exc.strerror or exc}", exc.errno)


#: C escapes git uses in a quoted path (git(1), ``core.quotePath``).
_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34, b"\\": 92}


def _unquote(name: bytes) -> bytes:
    """A path as git writes it in a patch header, unquoted."""
    if not name.startswith(b'"'):
        return name
    out = bytearray()
    body = name[1:-1]
    i = 0
    while i < len(body):
        char = body[i : i + 1]
        if char != b"\\":
            out += char
            i += 1
        elif body[i + 1 : i + 2] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1 : i + 2]])
            i += 2
        else:
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
    return bytes(out)


def patch_paths(top: RepoPath, patch: str, *, env: Mapping[str, str]) -> GitResult[tuple[str, ...]]:
    """Every path the patch names, old and new names of a rename alike, as
    git spells them (from the top): ``git apply --numstat -z`` names each
    file by its new name; the old names of renames and copies are their
    ``rename from``/``copy from`` header lines (a hunk's lines start with a
    space, ``+`` or ``-``, a binary patch's with a length letter)."""
    args = ["-C", top, "apply", *APPLY_OPTIONS, "--numstat", "-z", "--", os.path.abspath(patch)]
    match run_git(args, env=env, config=APPLY_CONFIG):
        case Ok(output):
            pass
        case Err() as err:
            return err
    paths: list[str] = []
    for record in output.split(b"\0"):
        if record:
            paths.append(os.fsdecode(record.split(b"\t", 2)[2]))
    try:
        with open(patch, "rb") as handle:
            for line in handle:
                for header in (b"rename from ", b"copy from "):
                    if line.startswith(header):
                        paths.append(os.fsdecode(_unquote(line[len(header) :].rstrip(b"\n"))))
    except OSError as exc:
        return os_fail(f"cannot read the patch '{patch}'", exc)
    return Ok(tuple(dict.fromkeys(paths)))


def index_git(git_dir: GitDirPath, top: RepoPath, index: str, env: Mapping[str, str]):
    """:func:`run_git` bound to the temporary index ``index``, at ``top``."""
    index_env = {**env, "GIT_INDEX_FILE": index}

    def git(args: Sequence[str], input: bytes | None = None) -> GitResult[bytes]:
        return run_git(
            [f"--git-dir={git_dir}", f"--work-tree={top}", *args],
            env=index_env,
            config=APPLY_CONFIG,
            cwd=top,
            input=input,
            timeout=None,
        )

    return git


def ancestors(path: str) -> Iterator[str]:
    """``a``, ``a/b`` for ``a/b/c``."""
    parts = path.split("/")
    for n in range(1, len(parts)):
        yield "/".join(parts[:n])


def lstat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def work_tree_entries(
    git, top: RepoPath, paths: Sequence[str], gitlinks: Mapping[str, Entry]
) -> GitResult[dict[str, Entry]]:
    """The work tree's current content of ``paths`` as index entries
    (hashed into the object store with git's input conversion); a path the
    work tree does not have is left out, a folder in the work tree is a
    gitlink when the user's index has one there (``gitlinks``)."""
    entries: dict[str, Entry] = {}
    regular: list[str] = []
    for path in paths:
        for parent in ancestors(path):
            st = lstat_or_none(os.path.join(top, parent))
            if st is None:
                break
            if stat.S_ISLNK(st.st_mode):
                return fail(f"'{path}' is beyond a symbolic link in the work tree ('{parent}')")
        st = lstat_or_none(os.path.join(top, path))
        if st is None:
            continue
        if stat.S_ISREG(st.st_mode):
            regular.append(path)
        elif stat.S_ISLNK(st.st_mode):
            target = os.fsencode(os.readlink(os.path.join(top, path)))
            match git(["hash-object", "-w", "--no-filters", "--stdin"], input=target):
                case Ok(out):
                    entries[path] = Entry(SYMLINK, out.decode("ascii").strip())
                case Err() as err:
                    return err
        elif stat.S_ISDIR(st.st_mode) and path in gitlinks:
            entries[path] = gitlinks[path]
    if regular:
        if any("\n" in p for p in regular):
            ids = []
            for path in regular:
                match git(["hash-object", "-w", "--", path]):
                    case Ok(out):
                        ids.append(out.decode("ascii").strip())
                    case Err() as err:
                        return err
        else:
            names = "".join(f"{p}\n" for p in regular).encode("utf-8", "surrogateescape")
            match git(["hash-object", "-w", "--stdin-paths"], input=names):
                case Ok(out):
                    ids = out.decode("ascii").split()
                case Err() as err:
                    return err
        for path, oid in zip(regular, ids, strict=True):
            mode = os.lstat(os.path.join(top, path)).st_mode
            entries[path] = Entry("100755" if mode & 0o100 else "100644", oid)
    return Ok(entries)


def read_entries(git, paths: Sequence[str]) -> GitResult[dict[str, Entry]]:
    """The entries of ``paths`` in the bound index (stage 0 only)."""
    if not paths:
        return Ok({})
    match git(["ls-files", "-s", "-z", "--", *[f":(literal){p}" for p in paths]]):
        case Ok(out):
            pass
        case Err() as err:
            return err
    entries: dict[str, Entry] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        info, name = record.split(b"\t", 1)
        mode, oid, stage = info.decode("ascii").split()
        if stage != "0":
            return fail(f"'{os.fsdecode(name)}' is unmerged in the index")
        entries[os.fsdecode(name)] = Entry(mode, oid)
    return Ok(entries)


def write_entries(git, entries: Mapping[str, Entry]) -> GitResult[bytes]:
    lines = b"".join(
        f"{e.mode} {e.oid}\t".encode() + os.fsencode(p) + b"\0" for p, e in entries.items()
    )
    return git(["update-index", "-z", "--index-info"], input=lines)


#: How the reason of a patch whose hunks do not fit begins (:func:`apply_cached`).
DOES_NOT_APPLY = "the patch does not apply to "


def apply_cached(git, patch: str, where: str) -> GitResult[None]:
    """``git apply --cached`` into the bound index, which holds ``where``
    ("the work tree", "the index"): the reason is git's ``error:`` lines
    joined, speaking of ``where``."""
    match git(["apply", "--cached", *APPLY_OPTIONS, "--", os.path.abspath(patch)]):
        case Ok():
            return Ok(None)
        case Err(error):
            text = error.stderr.replace(b" in index", f" in {where}".encode())
            text = text.replace(b"does not match index", f"does not match {where}".encode())
            lines = [
                line.removeprefix("error: ").removeprefix("fatal: ")
                for line in text.decode("utf-8", "replace").splitlines()
                if line.strip()
            ]
            reason = "; ".join(lines) or error.message()
            return Err(
                GitError(
                    args=error.args,
                    returncode=error.returncode,
                    stderr=text,
                    reason=f"{DOES_NOT_APPLY}{where} as it is now: {reason}",
                )
            )


def patched_contents(
    git, entries: Mapping[str, Entry], scratch: str
) -> GitResult[dict[str, bytes]]:
    """The bytes a checkout writes for each entry (smudge filters, ``eol``,
    ``core.autocrlf``), a symlink's target as it is: ``git checkout-index``
    of the bound index into ``scratch`` (``git cat-file --batch --filters``
    reports the unconverted size)."""
    if not entries:
        return Ok({})
    prefix = os.path.join(scratch, "checkout", "")
    names = b"".join(os.fsencode(p) + b"\0" for p in entries)
    match git(["checkout-index", "-f", "-z", "--stdin", f"--prefix={prefix}"], input=names):
        case Ok():
            pass
        case Err() as err:
            return err
    contents: dict[str, bytes] = {}
    try:
        for path, entry in entries.items():
            written = os.path.join(prefix, path)
            if entry.mode == SYMLINK:
                contents[path] = os.fsencode(os.readlink(written))
            else:
                with open(written, "rb") as handle:
                    contents[path] = handle.read()
    except OSError as exc:
        return os_fail("cannot read the patched contents", exc)
    return Ok(contents)
