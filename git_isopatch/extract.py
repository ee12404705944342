"""Step 6 of the procedure: the patch out of the worktree.

Untracked files are marked intent-to-add in the worktree's own index, then
``git diff --binary <commit>`` (pinned options, :mod:`.git.diff`) streams
into a 0600 file in the run's private folder (or beside ``-o``, renamed
over it); its paths are counted and read with their status and line
counts as it is read once, before it is renamed (:mod:`.git.patch.paths`)
and, when a summary is shown, its diffstat taken.  git runs through the
run's :class:`.worktrees.worktree_git.WorktreeGit`: where the command ran,
inside its namespaces under the sandbox, and not at all when the command
left in the git directory what git would wait on (``unsafe-git-dir``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Sequence
from typing import IO

from .errors import IsopatchError, known_failure, known_os_failure
from .git.diff import Paths, apply_size_warning
from .git.patch.headers import quote_headers
from .git.patch.paths import PatchContents, read_patch
from .git.record import Record
from .git.result import Err, Ok
from .git.submodule import Submodule, patch_stat
from .git.temporary import make_file
from .git.types import CommitId, GitDirPath
from .logger import log
from .values import Extracted, Start
from .worktrees.diff_index import prepare_index
from .worktrees.fidelity import Fidelity
from .worktrees.results import open_private
from .worktrees.worktree_git import WorktreeGit

PATCH_NAME = "isopatch.patch"


class Compared(Record):
    """What a run over a base tree tells the extraction.

    Attributes:
        only: the paths to compare (:meth:`.worktrees.run_layer.RunLayer.compared`),
            ``None`` for all.
        locate: where a path of the worktree lies on disk, ``None`` for
            the worktree's own folder.
        attributes: the run's layer holds a ``.gitattributes``: every
            path is compared, every file read again, as when
            ``info/attributes`` changed.
        index: an index holding what git reads to compare ``only``
            (:func:`.worktrees.compared_index.compared_index`), ``None``
            for the worktree's own.
    """

    only: Sequence[bytes] | None = None
    locate: Callable[[bytes], str | None] | None = None
    attributes: bool = False
    index: str | None = None


def extract(
    git: WorktreeGit,
    start: Start,
    private_dir: str,
    submodules: Sequence[Submodule],
    warn: Callable[[str], None],
    *,
    fidelity: Fidelity | None = None,
    attributes_outside: bool = False,
    compared: Compared | None = None,
) -> Extracted:
    """Step 6: the patch of the worktree against ``start.commit``, in
    ``private_dir`` or at ``start.output``; the linked and copied paths
    never enter it, nor the paths that differed before the command and that
    it left as they were (``fidelity``, :meth:`.worktrees.fidelity.Fidelity.left_out`);
    the changes inside each of ``submodules`` (populated by
    ``--recurse-submodules``) follow the superproject's, while they are
    still submodules.  When the command changed the attributes
    (``attributes_outside``: ``info/attributes``), git compares every file
    again (:func:`.worktrees.fidelity.settle_attributes`).  Over a base
    tree, ``compared`` names the paths to compare (the others cannot
    differ) and where each lies on disk; when the attributes changed,
    every path is compared.  With
    ``start.diffstat`` the diffstat is taken, coloured as git colours a
    diff where it goes (``start.terminal_columns``).

    Raises:
        IsopatchError: a classified git or OS failure; ``unsafe-git-dir``.
    """
    _refuse_planted(git)
    git.warn_changed_submodules(submodules, warn)
    base = start.commit
    output = None if start.output is None else (start.output, start.output_folder or "")
    if output is not None and start.output_identity is not None:  # a device, a FIFO
        output, special = None, (start.output, start.output_folder or "", start.output_identity)
    else:
        special = None
    exclude = [include.path for include in start.includes]
    compared = compared or Compared()
    if fidelity is not None:
        exclude += fidelity.left_out(git.worktree, warn, compared.locate)
    looked = Paths(exclude, compared.only, compared.index)
    attributes_outside = attributes_outside or compared.attributes
    patch, contents, looked = _extract_patch(
        git, base, private_dir, output, looked, submodules, warn, attributes_outside
    )
    if special is not None:
        _copy_into(patch, *special)
    files = contents.files
    too_large = apply_size_warning(os.path.getsize(patch))
    if too_large is not None:
        warn(too_large)
    shown = None
    if start.diffstat and files:
        if submodules:
            shown = _submodule_patch_stat(patch, git)
        else:
            shown = _diffstat(git, base, looked, start.repository.git_dir, start.terminal_columns)
    return Extracted(patch, files, shown, contents, special[0] if special else None)


#: The error code of a git directory git-isopatch's own git must not read.
UNSAFE_GIT_DIR = "unsafe-git-dir"


def _refuse_planted(git: WorktreeGit) -> None:
    """Run no git on a git directory where the command left what git would
    wait on for ever or read without end (a FIFO for ``config``, a link to
    ``/dev/zero``): the run fails, naming it.

    Raises:
        IsopatchError: ``unsafe-git-dir``.
    """
    planted = git.planted()
    if planted:
        more = f" and {len(planted) - 1} more" if len(planted) > 1 else ""
        raise IsopatchError(
            UNSAFE_GIT_DIR,
            f"the command left '{planted[0]}'{more} in the git directory, which git would "
            "wait on, read without end or take for the repository's objects (a FIFO, a "
            "device, a link, an object that is not what its name says): no patch taken",
        )


def _umask() -> int:
    """The process's umask: ``Umask:`` of ``/proc/self/status`` (Linux 4.7),
    else set and restored (not thread-safe, hence the second choice)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _output_mode(name: str, folder: int) -> int:
    """The mode an ``-o`` file gets: what ``--stdout > FILE`` would leave,
    the existing file's permission bits when it replaces one (``name`` in
    the folder open as ``folder``), else 0666 less the umask.  (The run's
    private files stay 0600.)"""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    return 0o666 & ~_umask()


def _open_output_folder(folder: str, output: str) -> int:
    """The folder ``-o`` goes into, by ``folder``, its real path before the
    command ran, opened a component at a time and never through a symbolic
    link: a command that may write a folder above it (``--allow-write``)
    can swap it for a link, and git-isopatch would write the patch (of the
    command's making) where the command may not.

    Raises:
        IsopatchError: ``bad-output`` when it was replaced, a classified
            OS failure otherwise.
    """
    directory = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open("/", directory)
    try:
        for part in folder.strip("/").split("/"):
            if part:
                inner = os.open(part, directory | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise IsopatchError(
                "bad-output",
                f"refusing to write patch '{output}': its folder '{folder}' "
                "was replaced while the command ran",
            ) from None
        raise known_os_failure(f"could not write patch '{output}'", exc) from exc
    return fd


def _copy_into(patch: str, output: str, folder: str, identity: tuple[int, int, int, int]) -> None:
    """Copy ``patch`` into the character device or FIFO ``output``, as
    ``> output`` would write it: through its folder opened as before the
    command ran (:func:`_open_output_folder`), never through a link, and
    only into the file found then (``identity``: its device, inode, kind
    and device number; an inode number freed meanwhile may be used again).

    Raises:
        IsopatchError: ``bad-output`` when the command replaced it, a
            classified OS failure otherwise.
    """
    replaced = IsopatchError(
        "bad-output", f"refusing to write patch '{output}': it was replaced while the command ran"
    )
    fd = _open_output_folder(folder, output)
    try:
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
        target = os.open(os.path.basename(output), flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOENT, errno.EISDIR):
            raise replaced from None
        raise known_os_failure(f"could not write patch '{output}'", exc) from exc
    finally:
        os.close(fd)
    try:
        found = os.fstat(target)
        kind = stat.S_IFMT(found.st_mode)
        if (found.st_dev, found.st_ino, kind, found.st_rdev) != identity:
            raise replaced
        with open(patch, "rb") as data, os.fdopen(os.dup(target), "wb") as sink:
            shutil.copyfileobj(data, sink, 1 << 20)
    except OSError as exc:
        raise known_os_failure(f"could not write patch '{output}'", exc) from exc
    finally:
        os.close(target)


def _open_output(folder: int) -> tuple[IO[bytes], str]:
    """A new temporary file in the folder open as ``folder``, mode 0600, and
    its name there."""
    name = f".isopatch-{os.urandom(6).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(name, flags, 0o600, dir_fd=folder), "wb"), name


def _open_patch_file(folder: str) -> tuple[IO[bytes], str]:
    """Create the patch file in the run's private ``folder``: ``isopatch.patch``
    (mode 0600), or, when the command put something of its own under that
    name (it can guess the folder: it is the worktree's parent), a fresh
    ``isopatch-<random>.patch`` beside it; the command's file is left alone.

    Returns:
        the open file and its path.
    Raises:
        OSError: the folder cannot be written (no space, gone).
    """
    path = os.path.join(folder, PATCH_NAME)
    try:
        return open_private(path), path
    except FileExistsError:
        pass
    fd, path = make_file(folder, "isopatch-", ".patch")
    return os.fdopen(fd, "wb"), path


def _extract_patch(
    git: WorktreeGit,
    base: CommitId,
    private_dir: str,
    output: tuple[str, str] | None,
    paths: Paths,
    submodules: Sequence[Submodule],
    warn: Callable[[str], None],
    attributes_outside: bool = False,
) -> tuple[str, PatchContents, Paths]:
    """Intent-to-add, then the binary diff into a 0600 file, read once
    (:func:`.git.patch.paths.read_patch`) and its ambiguous headers quoted.

    With ``output`` (``-o`` and its folder's real path before the command
    ran), the patch is written beside it and renamed over it, so a failure
    never leaves a half-written file there.  The changes inside each
    of ``submodules`` follow the superproject's, their paths from the top
    (:func:`.git.submodule.write_submodule_diff`); their gitlinks are left
    out.  ``paths``: what the diff compares (:class:`.git.diff.Paths`).

    Returns:
        the patch path, what it holds, and what it compared.
    Raises:
        IsopatchError: a classified git or OS failure.
    """
    worktree = git.worktree
    if os.path.islink(worktree) or not os.path.isdir(worktree):
        raise IsopatchError(
            "worktree-gone", f"the command removed or replaced its worktree '{worktree}'"
        )
    try:
        return _write_patch(
            git, base, (private_dir, output), paths, warn, submodules, attributes_outside
        )
    except subprocess.SubprocessError as exc:  # only a confinement that failed raises it
        from .errors import UNAVAILABLE, sandbox_failed
        from .sandbox.inside import ViewFailed

        if isinstance(exc, ViewFailed):
            raise sandbox_failed(str(exc)) from None
        raise IsopatchError(
            UNAVAILABLE, f"--sandbox is not available: could not confine git: {exc}"
        ) from None


def _write_patch(
    git: WorktreeGit,
    base: CommitId,
    where: tuple[str, tuple[str, str] | None],
    paths: Paths,
    warn: Callable[[str], None],
    submodules: Sequence[Submodule],
    attributes_outside: bool,
) -> tuple[str, PatchContents, Paths]:
    """:func:`_extract_patch` once the worktree is there: ``where`` is the
    private folder and ``-o``."""
    private_dir, output = where
    paths, submodules = prepare_index(git, base, paths, submodules, warn, attributes_outside)
    target = os.path.join(private_dir, PATCH_NAME) if output is None else output[0]
    folder = name = None
    try:
        if output is None:
            handle, target = _open_patch_file(private_dir)
            written = target
        else:
            folder = _open_output_folder(output[1], target)
            handle, name = _open_output(folder)
            written = f"/proc/self/fd/{folder}/{name}"  # through the folder opened
    except OSError as exc:
        if folder is not None:
            os.close(folder)
        raise known_os_failure(f"could not write patch '{target}'", exc) from exc
    try:
        with handle:
            if paths.only != []:  # nothing touched: nothing to compare
                _write_diffs(git, base, handle, paths, submodules, target)
        contents, replacements = read_patch(written)
        quote_headers(written, replacements)
        if folder is not None and name is not None:
            final = os.path.basename(target)
            os.chmod(name, _output_mode(final, folder), dir_fd=folder)
            os.replace(name, final, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(written)
        raise known_os_failure(f"could not write patch '{target}'", exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(written)
        raise
    finally:
        if folder is not None:
            os.close(folder)
    return target, contents, paths


def _write_diffs(
    git: WorktreeGit,
    base: CommitId,
    handle: IO[bytes],
    paths: Paths,
    submodules: Sequence[Submodule],
    target: str,
) -> None:
    """The binary diff of ``paths``, then each submodule's, into ``handle``."""
    match git.write_binary_diff(base, handle, paths=paths):
        case Err(error):
            raise known_failure(f"could not write patch '{target}'", error)
        case Ok():
            pass
    for submodule in submodules:
        match git.write_submodule_diff(submodule, handle):
            case Err(error):
                raise known_failure(
                    f"could not write patch '{target}' (submodule '{submodule.path}')", error
                )
            case Ok():
                pass


def _submodule_patch_stat(patch: str, git: WorktreeGit) -> bytes | None:
    """The diffstat of a patch holding submodule files
    (:func:`.git.submodule.patch_stat`), or ``None`` when git cannot show
    it (logged at debug level)."""
    match patch_stat(patch, env=git.env):
        case Ok(output):
            return output
        case Err(error):
            log.debug("no diffstat: %s", error.message())
            return None


def _diffstat(
    git: WorktreeGit,
    base: CommitId,
    paths: Paths,
    user_git_dir: GitDirPath,
    width: int | None,
) -> bytes | None:
    """The diffstat of the patch just written, coloured as git colours a
    diff for where it goes (a terminal of ``width`` columns, or not one:
    ``None``, in the user's ``user_git_dir``'s configuration); ``None``
    when git cannot show it: the patch is there, and the run does not fail
    for a summary (the failure is logged at debug level)."""
    from .git.apply import diff_color  # only when a diffstat is shown

    color = diff_color(user_git_dir, to_terminal=width is not None, env=git.env)
    try:
        shown = git.diff_stat(base, paths=paths, color=color, width=width)
    except subprocess.SubprocessError as exc:  # the sandbox could not confine git
        log.debug("no diffstat: %s", exc)
        return None
    match shown:
        case Ok(output):
            return output
        case Err(error):
            log.debug("no diffstat: %s", error.message())
            return None
