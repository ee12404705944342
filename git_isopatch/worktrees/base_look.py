"""What a base tree's checkout alone makes differ from its commit, looked
at once when it is made or moved (design: The patch, "changes nobody
made"), for every run over it (:func:`.fidelity.look_over_base_tree`),
and its submodules' paths (gitlinks: a change below one is the
submodule's, :meth:`.run_layer.RunLayer.compared`).

A run in a worktree of its own looks before every command
(:func:`.fidelity.look_before_command`); a base tree is never written
after its checkout, so one look serves every run: it is kept in the base
tree's private folder (:data:`BASELINE_FILE`), with the commit it was
found for.  Beside it, the table of where each entry of the base tree's
index starts (:data:`INDEX_TABLE`, :func:`..git.partial_index.index_table`):
a run's extraction reads the entries of the paths it compares alone
(:mod:`.compared_index`).  A base tree made before tables were kept gets
its table from the first run over it (:func:`keep_missing_table`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..git.admin_files import read_admin_file, replace_admin_file
from ..git.index_entries import parse_entries, read_index
from ..git.partial_index import index_table
from ..git.record import Record
from ..git.result import Err, GitResult, Ok
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..logger import log

if TYPE_CHECKING:
    from ..git.moved_checkout import Difference

#: The file of a base tree's private folder that holds what its look found:
#: each path ended by NUL, after a kind byte (``b``: differs after
#: checkout; ``g``: a gitlink).
BASELINE_FILE = "isopatch-baseline"
_HEADER = b"git-isopatch baseline 2\n"
#: The file of a base tree's private folder that holds where each entry of
#: its index starts (:func:`..git.partial_index.index_table`).
INDEX_TABLE = "isopatch-index-table"
#: What :data:`INDEX_TABLE` holds for an index that has no table (a version
#: 4 or sparse index, a split one): no run makes it again.
NO_TABLE = b"git-isopatch no index table\n"


class BaseLook(Record):
    """What :func:`look_once` found.

    Attributes:
        baseline: the paths the checkout alone makes differ.
        gitlinks: the submodules' paths (index entries of mode 160000).
        known: the look was made (else both are empty for want of it).
    """

    baseline: tuple[bytes, ...] = ()
    gitlinks: tuple[bytes, ...] = ()
    known: bool = False


def check_out_base_tree(
    path: WorktreePath,
    admin_dir: GitDirPath,
    commit: CommitId,
    *,
    moved: Difference | None,
    env: Mapping[str, str],
    progress: bool,
) -> GitResult[None]:
    """Check out the base tree at ``path`` (registered without a checkout)
    or, ``moved``, move it from its ``HEAD`` (``moved.old``) to ``commit``:
    by that difference (:func:`..git.moved_checkout.move_by_difference`;
    its index table and gitlinks then follow without a walk of the index)
    where it can be, else whole; then :func:`look_once`."""
    from ..git.checkouts import check_out_worktree  # not for a warm run
    from ..git.moved_checkout import Whole, move_by_difference

    whole = Whole()
    if moved is not None:
        try:
            table = read_admin_file(os.path.join(admin_dir, INDEX_TABLE), limit=1 << 32)
        except OSError:
            table = b""
        match move_by_difference(admin_dir, path, moved, commit, table, env=env):
            case Ok(spliced):
                before = look_of(admin_dir, moved.old)
                links = {p for p in before.gitlinks if p not in spliced.changed}
                links.update(spliced.gitlinks)
                if before.known:
                    walked = (spliced.table, sorted(links))
                    kept = tuple(p for p in before.baseline if p not in spliced.changed)
                    since = (kept, spliced.changed)
                    look_once(path, admin_dir, commit, env=env, walked=walked, since=since)
                else:
                    look_once(path, admin_dir, commit, env=env)
                return Ok(None)
            case Err(error):
                log.debug("moved whole: %s", error.message())
            case Whole() as whole:
                pass
    done = check_out_worktree(
        admin_dir,
        path,
        commit if moved is not None else None,
        env=env,
        progress=progress,
        rewrite=whole.rewrite,
    )
    if isinstance(done, Ok):
        look_once(path, admin_dir, commit, env=env)
    return done


def look_once(
    path: WorktreePath,
    admin_dir: GitDirPath,
    commit: CommitId,
    *,
    env: Mapping[str, str],
    walked: tuple[bytes | None, list[bytes]] | None = None,
    since: tuple[tuple[bytes, ...], frozenset[bytes]] | None = None,
) -> None:
    """The paths the checkout of the base tree at ``path`` alone makes
    differ from ``commit`` (a conversion of the attributes that does not
    give the blob back, :func:`..git.baseline.read_baseline`; none where
    no attributes apply), kept in ``admin_dir`` with its index's table and
    gitlinks (``walked``, when known, else from a walk of the index).
    ``since``, for a base tree moved by the difference (no attributes file
    changed): the paths the look of the commit it left found that the move
    did not change, which stay, and those it changed, the only ones looked
    at.  Best effort: without it, a run finds none."""
    from ..git.attributes import index_may_track_attributes
    from ..git.baseline import read_baseline
    from ..git.pinned import read_settings
    from .fidelity import attributes_may_apply

    paths: list[bytes] = []
    settings = read_settings(admin_dir, env)
    if index_may_track_attributes(admin_dir) or attributes_may_apply(admin_dir, settings, env):
        looked = read_baseline(
            path,
            commit,
            git_dir=admin_dir,
            env=env,
            whole=False,
            conversions=True if since is None else sorted(since[1]),
        )
        match looked:
            case Ok(found):
                paths = sorted({*found.paths, *(since[0] if since else ())})
            case Err(error):
                log.debug("no look at the base tree: %s", error.message())
                return
    table, links = walked or _index_of(admin_dir, len(commit) // 2)
    _keep_table(admin_dir, table)
    if links is None:
        return
    listed = [b"b" + p for p in paths] + [b"g" + p for p in links]
    data = _HEADER + commit.encode() + b"\n" + b"".join(p + b"\0" for p in listed)
    try:
        replace_admin_file(os.path.join(admin_dir, BASELINE_FILE), data)
    except OSError as exc:
        log.debug("could not keep the base tree's look: %s", exc)


def _index_of(admin_dir: GitDirPath, hash_size: int) -> tuple[bytes | None, list[bytes] | None]:
    """The table of the index of ``admin_dir`` (``None`` for an index that
    has none) and its gitlinks' paths (``None`` when the index cannot be
    read)."""
    index = read_index(admin_dir)
    walked = None if index is None else index_table(index, hash_size)
    if walked is not None:
        return walked
    entries = None if index is None else parse_entries(index, hash_size)  # version 4
    if entries is None:
        return None, None
    return None, [name for name, meta in entries if meta[24:28] == b"\x00\x00\xe0\x00"]


def _keep_table(admin_dir: GitDirPath, table: bytes | None) -> None:
    """Keep ``table``, the index's (:data:`INDEX_TABLE`), or
    :data:`NO_TABLE`.  Best effort: a table that does not match the index
    is never used."""
    try:
        replace_admin_file(os.path.join(admin_dir, INDEX_TABLE), table or NO_TABLE)
    except OSError as exc:
        log.debug("could not keep the base tree's index table: %s", exc)


def keep_missing_table(admin_dir: GitDirPath, hash_size: int) -> None:
    """Keep the table of the index of the base tree whose private folder is
    ``admin_dir`` when it has none (made before tables were kept), once:
    the run pinning it (which holds it at its commit) takes the lock beside
    the table without waiting, and writes it unless another run did first.
    A run that finds the lock held reads the whole index meanwhile.  Best
    effort, never raises."""
    path = os.path.join(admin_dir, INDEX_TABLE)
    if os.path.lexists(path):
        return
    from .lock import try_flock  # only for a base tree without a table

    try:
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.debug("could not lock the base tree's index table: %s", exc)
        return
    try:
        if try_flock(fd, exclusive=True) and not os.path.lexists(path):
            _keep_table(admin_dir, _index_of(admin_dir, hash_size)[0])
    except Exception as exc:  # best effort: the run reads the whole index
        log.debug("could not keep the base tree's index table: %s", exc)
    finally:
        os.close(fd)


def look_of(admin_dir: GitDirPath, commit: str) -> BaseLook:
    """What :func:`look_once` found for the base tree whose private folder
    is ``admin_dir``, checked out at ``commit``; an unknown one when none
    is kept for that commit."""
    try:
        data = read_admin_file(os.path.join(admin_dir, BASELINE_FILE), limit=1 << 30)
    except OSError:
        return BaseLook()
    head = _HEADER + commit.encode() + b"\n"
    if not data.startswith(head):
        return BaseLook()
    listed = [path for path in data[len(head) :].split(b"\0") if path]
    baseline = tuple(p[1:] for p in listed if p[:1] == b"b")
    return BaseLook(baseline, tuple(p[1:] for p in listed if p[:1] == b"g"), True)
