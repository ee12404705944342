"""Bring a patch into the user's work tree (and index), all or nothing.

``git apply`` itself is not all or nothing: it checks every hunk first, but
then removes every file it rewrites before it writes any, so a write that
fails half-way (a file where a folder must go, no space left, a read-only
file) leaves files deleted.  So the work tree is never handed to it.
Instead:

1. *Compute*, writing nothing of the user's: the current work-tree content
   of each path the patch touches is hashed (with git's own input
   conversion: ``core.autocrlf``, ``eol``, clean filters) into a temporary
   index that holds only those paths (``GIT_INDEX_FILE``); ``git apply
   --cached`` applies the patch there, checking every hunk as ``git
   apply`` would; the results are read back with git's output conversion
   (``git cat-file --filters``).  With ``index_file`` the same patch is
   also applied with ``--cached`` to a copy of that index.
2. *Prepare*: every new content is written beside its target (same
   folder, a temporary name ``.isopatch-new-*``), every file that will be
   replaced or removed is kept (a hard link, else a copy) in a journal
   folder ``<git-dir>/isopatch-apply-*/old/<path>``, and the new index is
   written to ``<index>.lock`` (git's own lock: a concurrent git fails
   rather than being overwritten).  A failure here has changed nothing.
3. *Switch*: removals, then renames into place, then the index; a failure
   puts back every path done so far from the journal.
4. *Verify* that the touched paths hold what the patch says, then remove
   the journal.

A rename replaces a file whole, so a ``SIGKILL`` during the switch leaves
each path either as it was or with its new content, never truncated; what
a kill leaves behind is the journal (the originals of what was replaced)
and ``.isopatch-new-*`` files not yet renamed.

No ``--3way`` and no ``--reject``: neither conflict markers nor ``.rej``
files are ever left.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .result import Err, GitError, GitResult, Ok
from .run import run_git
from .types import GitDirPath, RepoPath

#: ``-c`` settings for ``git apply`` and the temporary indexes: the user's
#: ``apply.ignoreWhitespace`` would let context match loosely
#: (git-config(1)); no hook and no file system monitor hook runs; the
#: index copies are full, plain ones (see :data:`.snapshot.SNAPSHOT_CONFIG`).
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

#: Prefix of the journal folder in the git directory, and of the new
#: contents written beside their targets before they are renamed into place.
JOURNAL_PREFIX = "isopatch-apply-"
NEW_PREFIX = ".isopatch-new-"

#: The reason's start when, with an index, the fix applies to the index but
#: not on top of the work tree's unstaged edits.
UNSTAGED_REFUSAL = "the fix does not apply on top of your unstaged changes"

GITLINK = "160000"
SYMLINK = "120000"


@dataclass(frozen=True)
class Entry:
    """An index entry: ``mode`` as git writes it (``100644``, ``100755``,
    ``120000``, ``160000``) and the object id."""

    mode: str
    oid: str


@dataclass
class _Plan:
    """What the switch does: ``removals`` (paths of files and symlinks),
    ``writes`` (path -> (mode, new bytes)), the paths whose current file is
    replaced, and the parents that were missing."""

    removals: list[str] = field(default_factory=list)
    writes: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    replaced: set[str] = field(default_factory=set)


def _fail(reason: str, err: int | None = None) -> Err:
    return Err(GitError(reason=reason, errno=err))


def _os_fail(what: str, exc: OSError) -> Err:
    return _fail(f"{what}: {exc.strerror or exc}", exc.errno)


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
        return _os_fail(f"cannot read the patch '{patch}'", exc)
    return Ok(tuple(dict.fromkeys(paths)))


def _index_git(git_dir: GitDirPath, top: RepoPath, index: str, env: Mapping[str, str]):
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


def _ancestors(path: str) -> Iterator[str]:
    """``a``, ``a/b`` for ``a/b/c``."""
    parts = path.split("/")
    for n in range(1, len(parts)):
        yield "/".join(parts[:n])


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _work_tree_entries(
    git, top: RepoPath, paths: Sequence[str], gitlinks: Mapping[str, Entry]
) -> GitResult[dict[str, Entry]]:
    """The work tree's current content of ``paths`` as index entries
    (hashed into the object store with git's input conversion); a path the
    work tree does not have is left out, a folder in the work tree is a
    gitlink when the user's index has one there (``gitlinks``)."""
    entries: dict[str, Entry] = {}
    regular: list[str] = []
    for path in paths:
        for parent in _ancestors(path):
            st = _lstat(os.path.join(top, parent))
            if st is None:
                break
            if stat.S_ISLNK(st.st_mode):
                return _fail(f"'{path}' is beyond a symbolic link in the work tree ('{parent}')")
        st = _lstat(os.path.join(top, path))
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


def _read_entries(git, paths: Sequence[str]) -> GitResult[dict[str, Entry]]:
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
            return _fail(f"'{os.fsdecode(name)}' is unmerged in the index")
        entries[os.fsdecode(name)] = Entry(mode, oid)
    return Ok(entries)


def _write_entries(git, entries: Mapping[str, Entry]) -> GitResult[bytes]:
    lines = b"".join(
        f"{e.mode} {e.oid}\t".encode() + os.fsencode(p) + b"\0" for p, e in entries.items()
    )
    return git(["update-index", "-z", "--index-info"], input=lines)


def _apply_cached(git, patch: str, where: str) -> GitResult[None]:
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
                    reason=f"the patch does not apply to {where} as it is now: {reason}",
                )
            )


def _contents(git, entries: Mapping[str, Entry], scratch: str) -> GitResult[dict[str, bytes]]:
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
        return _os_fail("cannot read the patched contents", exc)
    return Ok(contents)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _plan(
    top: RepoPath,
    paths: Sequence[str],
    before: Mapping[str, Entry],
    after: Mapping[str, Entry],
    contents: Mapping[str, bytes],
) -> GitResult[_Plan]:
    """The switch for the work tree, refusing what ``git apply`` would fail
    on half-way: a file or symbolic link where the patch needs a folder, a
    folder (with content the patch does not remove) where it needs a file."""
    plan = _Plan()
    for path in paths:
        old, new = before.get(path), after.get(path)
        if old == new or GITLINK in (getattr(old, "mode", ""), getattr(new, "mode", "")):
            continue
        if new is None:
            plan.removals.append(path)
        else:
            plan.writes[path] = (new.mode, contents[path])
            if old is not None:
                plan.replaced.add(path)
    removed = set(plan.removals)
    for path in plan.writes:
        for parent in _ancestors(path):
            st = _lstat(os.path.join(top, parent))
            if st is None:
                break
            if not stat.S_ISDIR(st.st_mode) and parent not in removed:
                kind = "symbolic link" if stat.S_ISLNK(st.st_mode) else "file"
                return _fail(
                    f"'{parent}' is a {kind} in the work tree where the patch needs a folder"
                )
        st = _lstat(os.path.join(top, path))
        if st is not None and stat.S_ISDIR(st.st_mode):
            for folder, _dirs, files in os.walk(os.path.join(top, path)):
                for name in files:
                    rel = os.path.relpath(os.path.join(folder, name), top)
                    if rel not in removed:
                        return _fail(
                            f"'{path}' is a folder in the work tree where the patch needs a file"
                        )
    return Ok(plan)


@dataclass
class _Switch:
    """The journal of one apply: kept originals, new contents beside their
    targets, and the undo steps of what the switch has done."""

    top: str
    journal: str
    temps: dict[str, str] = field(default_factory=dict)
    undo: list[Callable[[], None]] = field(default_factory=list)

    def keep(self, path: str) -> None:
        """Keep the current file (or symlink) at ``path`` in the journal: a
        hard link, else (another file system, a mount) a copy."""
        target = os.path.join(self.top, path)
        kept = os.path.join(self.journal, "old", path)
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        try:
            os.link(target, kept, follow_symlinks=False)
        except OSError:
            if os.path.islink(target):
                os.symlink(os.readlink(target), kept)
            else:
                shutil.copy2(target, kept)

    def put_back(self, path: str) -> None:
        kept = os.path.join(self.journal, "old", path)
        target = os.path.join(self.top, path)
        try:
            os.rename(kept, target)
        except OSError:
            tmp = self._temp_name(os.path.dirname(target))
            if os.path.islink(kept):
                os.symlink(os.readlink(kept), tmp)
            else:
                shutil.copy2(kept, tmp)
            os.rename(tmp, target)

    def _temp_name(self, folder: str) -> str:
        return os.path.join(folder, NEW_PREFIX + os.urandom(6).hex())

    def stage(self, path: str, mode: str, content: bytes, old_mode: int | None) -> None:
        """Write the new content of ``path`` beside it, in the nearest
        folder that exists (a folder the patch makes does not yet)."""
        folder = os.path.dirname(os.path.join(self.top, path))
        while not os.path.isdir(folder) or os.path.islink(folder):
            folder = os.path.dirname(folder)
        tmp = self._temp_name(folder)
        if mode == SYMLINK:
            os.symlink(os.fsdecode(content), tmp)
            self.temps[path] = tmp
        else:
            if old_mode is not None:
                perms = stat.S_IMODE(old_mode) & ~0o111
                if mode == "100755":
                    perms |= (perms & 0o444) >> 2
            else:
                perms = (0o777 if mode == "100755" else 0o666) & ~_umask()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self.temps[path] = tmp
            try:
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, perms)
            finally:
                os.close(fd)

    def discard(self) -> None:
        for tmp in self.temps.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass
        shutil.rmtree(self.journal, ignore_errors=True)

    def roll_back(self) -> None:
        for step in reversed(self.undo):
            try:
                step()
            except OSError:
                pass  # the journal keeps what could not be put back
        self.undo.clear()


def _remove_empty_parents(switch: _Switch, path: str) -> None:
    """Remove the folders ``path`` leaves empty, as ``git apply`` does."""
    for parent in reversed(list(_ancestors(path))):
        folder = os.path.join(switch.top, parent)
        try:
            mode = os.lstat(folder).st_mode
            os.rmdir(folder)
        except OSError:
            return
        switch.undo.append(lambda f=folder, m=mode: os.mkdir(f, stat.S_IMODE(m)))


def _make_parents(switch: _Switch, path: str) -> None:
    for parent in _ancestors(path):
        folder = os.path.join(switch.top, parent)
        if os.path.isdir(folder) and not os.path.islink(folder):
            continue
        os.mkdir(folder)
        switch.undo.append(lambda f=folder: os.rmdir(f))


def _do_switch(switch: _Switch, plan: _Plan) -> None:
    top = switch.top
    for path in plan.removals:
        os.unlink(os.path.join(top, path))
        switch.undo.append(lambda p=path: switch.put_back(p))
        _remove_empty_parents(switch, path)
    for path in plan.writes:
        _make_parents(switch, path)
        target = os.path.join(top, path)
        st = _lstat(target)
        if st is not None and stat.S_ISDIR(st.st_mode):
            os.rmdir(target)  # emptied by the removals (checked by the plan)
            switch.undo.append(lambda t=target, m=st.st_mode: os.mkdir(t, stat.S_IMODE(m)))
        os.rename(switch.temps[path], target)
        del switch.temps[path]
        if path in plan.replaced:
            switch.undo.append(lambda p=path: switch.put_back(p))
        else:
            switch.undo.append(lambda t=target: os.unlink(t))


def _verify(top: str, plan: _Plan) -> list[str]:
    """The touched paths that do not hold what the patch says (something
    else wrote there meanwhile)."""
    wrong = []
    for path in plan.removals:
        if path not in plan.writes and _lstat(os.path.join(top, path)) is not None:
            wrong.append(path)
    for path, (mode, content) in plan.writes.items():
        target = os.path.join(top, path)
        try:
            if mode == SYMLINK:
                ok = os.fsencode(os.readlink(target)) == content
            else:
                st = os.lstat(target)
                with open(target, "rb") as handle:
                    ok = (
                        stat.S_ISREG(st.st_mode)
                        and bool(st.st_mode & 0o100) == (mode == "100755")
                        and handle.read() == content
                    )
        except OSError:
            ok = False
        if not ok:
            wrong.append(path)
    return wrong


@dataclass(frozen=True)
class Applied:
    """A patch applied: the paths it touched, and those that did not hold
    what the patch says right afterwards (another writer meanwhile)."""

    paths: tuple[str, ...]
    not_as_patched: tuple[str, ...] = ()


def apply_to_work_tree(
    git_dir: GitDirPath,
    top: RepoPath,
    patch: str,
    *,
    env: Mapping[str, str],
    index_file: str | None = None,
    proceed: Callable[[], bool] | None = None,
) -> GitResult[Applied]:
    """Apply ``patch`` to the work tree at ``top`` as it is now (and to
    ``index_file`` too when given), all or nothing (see the module).

    Paths in the patch are from the top.  Content conversion
    (``core.autocrlf``, the ``eol`` and ``filter`` attributes) is git's
    own, as ``git apply`` does it.  A gitlink in the patch is left alone in
    the work tree (``git apply`` only makes or removes an empty folder
    there); with ``index_file`` the index gets it.

    Args:
        git_dir: the user's git directory.
        top: the top of the user's work tree.
        patch: the patch file (``a/``/``b/`` prefixes, binary-safe).
        env: git-isopatch's own git environment
            (:func:`.run.own_git_environment`).
        index_file: the index to write as well (:func:`.snapshot.user_index_file`),
            the one the patch is relative to (``--staged``); the work tree
            then gets the same change on top of its unstaged edits.
        proceed: asked once everything is computed and written beside its
            target, before the first user's path changes; ``False`` stops
            there (a signal arrived), with nothing written.

    Returns:
        ``Ok(Applied)``; ``Err(GitError)`` when any part of the patch does
        not apply, a write failed, or ``proceed`` said no: then every path
        of the work tree and the index is as it was.
    """
    match patch_paths(top, patch, env=env):
        case Ok(paths):
            pass
        case Err() as err:
            return err
    scratch = tempfile.mkdtemp(prefix=JOURNAL_PREFIX)
    try:
        return _apply(git_dir, top, patch, paths, scratch, env, index_file, proceed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _apply(
    git_dir: GitDirPath,
    top: RepoPath,
    patch: str,
    paths: tuple[str, ...],
    scratch: str,
    env: Mapping[str, str],
    index_file: str | None,
    proceed: Callable[[], bool] | None,
) -> GitResult[Applied]:
    work = _index_git(git_dir, top, os.path.join(scratch, "work-tree"), env)
    new_index = os.path.join(scratch, "index")
    staged = _index_git(git_dir, top, new_index, env)
    gitlinks: dict[str, Entry] = {}
    if index_file is not None:
        try:
            shutil.copyfile(index_file, new_index)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return _os_fail(f"cannot copy the index '{index_file}'", exc)
        match _read_entries(staged, paths):
            case Ok(entries):
                gitlinks = {p: e for p, e in entries.items() if e.mode == GITLINK}
            case Err() as err:
                return err
        applied = _apply_cached(staged, patch, "the index")
        if isinstance(applied, Err):
            return applied
    match _work_tree_entries(work, top, paths, gitlinks):
        case Ok(before):
            pass
        case Err() as err:
            return err
    if before:
        wrote = _write_entries(work, before)
        if isinstance(wrote, Err):
            return wrote
    applied = _apply_cached(work, patch, "the work tree")
    if isinstance(applied, Err):
        if index_file is not None:  # the index took it: the unstaged changes are in the way
            error = applied.error
            reason = error.reason.replace(
                "the patch does not apply to the work tree as it is now", UNSTAGED_REFUSAL
            )
            return Err(replace(error, reason=reason))
        return applied
    match _read_entries(work, paths):
        case Ok(after):
            pass
        case Err() as err:
            return err
    changed = {p: e for p, e in after.items() if before.get(p) != e and e.mode != GITLINK}
    match _contents(work, changed, scratch):
        case Ok(contents):
            pass
        case Err() as err:
            return err
    match _plan(top, paths, before, after, contents):
        case Ok(plan):
            pass
        case Err() as err:
            return err
    return _switch(git_dir, top, plan, index_file, new_index, proceed)


def _journal_folder(git_dir: GitDirPath) -> str:
    """The journal in the git directory (beside the work tree's file system
    as a rule, so originals are kept by hard link), else in ``$TMPDIR``."""
    try:
        return tempfile.mkdtemp(prefix=JOURNAL_PREFIX, dir=git_dir)
    except OSError:
        return tempfile.mkdtemp(prefix=JOURNAL_PREFIX)


def _switch(
    git_dir: GitDirPath,
    top: RepoPath,
    plan: _Plan,
    index_file: str | None,
    new_index: str,
    proceed: Callable[[], bool] | None,
) -> GitResult[Applied]:
    try:
        switch = _Switch(top=top, journal=_journal_folder(git_dir))
    except OSError as exc:
        return _os_fail("cannot make the apply's journal", exc)
    lock = None
    try:
        try:
            for path in sorted({*plan.removals, *plan.replaced}):
                switch.keep(path)
            for path, (mode, content) in plan.writes.items():
                st = _lstat(os.path.join(top, path)) if path in plan.replaced else None
                regular = st is not None and stat.S_ISREG(st.st_mode)
                switch.stage(path, mode, content, st.st_mode if regular else None)
            if index_file is not None:
                _write_lock(index_file + ".lock", new_index)
                lock = index_file + ".lock"
            if proceed is not None and not proceed():
                return _fail("interrupted before anything was written")
        except OSError as exc:
            return _os_fail(f"nothing was written: cannot write {_where(top, exc)}", exc)
        try:
            _do_switch(switch, plan)
            if lock is not None and index_file is not None:
                os.rename(lock, index_file)
                lock = None
        except BaseException as exc:
            switch.roll_back()
            if isinstance(exc, OSError):
                return _os_fail(f"all put back: cannot write {_where(top, exc)}", exc)
            raise
        wrong = _verify(top, plan)
        touched = tuple(sorted({*plan.removals, *plan.writes}))
        return Ok(Applied(paths=touched, not_as_patched=tuple(wrong)))
    finally:
        if lock is not None:
            _unlink(lock)
        switch.discard()


def _where(top: str, exc: OSError) -> str:
    """The path an ``OSError`` is about, from the top of the work tree when
    it lies inside (a rename names its target second)."""
    name = exc.filename2 if isinstance(exc.filename2, str) else exc.filename
    if not isinstance(name, str):
        return "the work tree"
    rel = os.path.relpath(name, top)
    return f"'{name if rel.startswith('..') else rel}'"


def _write_lock(lock: str, content_from: str) -> None:
    """Create ``lock`` (git's ``<index>.lock``: exclusive, so a running git
    is never overwritten) with the content of ``content_from``."""
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError as exc:
        raise OSError(
            errno.EEXIST, "another git process seems to be running (it holds the lock)", lock
        ) from exc
    try:
        with open(content_from, "rb") as source:
            while chunk := source.read(1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        _unlink(lock)
        raise
    os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def diff_color(git_dir: GitDirPath, *, to_terminal: bool, env: Mapping[str, str]) -> bool:
    """Whether git would colour a diff written to a terminal or not.

    ``git config --get-colorbool color.diff <to_terminal>`` decides with the
    user's ``color.diff`` and ``color.ui`` (``auto`` by default) and
    ``TERM=dumb`` (git-config(1), ``--get-colorbool``).  Git's own ``auto``
    looks at its standard output, which is a pipe to us: ``to_terminal`` is
    where the diff really goes (our standard error is a terminal).

    Returns:
        ``True`` for colour; ``False`` also when git cannot answer (a bad
        configuration value is reported elsewhere).
    """
    match run_git(
        [
            f"--git-dir={git_dir}",
            "config",
            "--get-colorbool",
            "color.diff",
            "true" if to_terminal else "false",
        ],
        env=env,
    ):
        case Ok(output):
            return output.strip() == b"true"
        case Err():
            return False
