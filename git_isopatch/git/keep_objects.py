"""Copy into an object store of one's own what a command made reachable.

A session's steps keep their commits in the session's own object store;
the command writes its objects where git puts them in the repository it
works in (under the sandbox a copy-on-write view, discarded when the run
ends).  :func:`pack_reachable` packs, into the store ``GIT_OBJECT_DIRECTORY``
names, the objects reachable from some commits and not from others
(``git pack-objects --revs``), read from that store and its alternates,
and with them the blobs an index names (what the command staged and did
not commit).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .process import Spawn
from .result import Err, GitResult, Ok
from .run import run_git
from .snapshot import SNAPSHOT_CONFIG
from .types import CommitId, GitDirPath


def pack_reachable(
    git_dir: GitDirPath,
    tips: Sequence[str],
    known: Sequence[CommitId],
    *,
    env: Mapping[str, str],
    index: str | None = None,
    spawn: Spawn | None = None,
) -> GitResult[None]:
    """Pack into ``env``'s ``GIT_OBJECT_DIRECTORY`` the objects reachable
    from ``tips`` (revisions of ``git_dir``; one that does not name a
    commit, an unborn ``HEAD``, is left out), and those the ``index`` file
    names, that ``known`` does not reach."""
    wanted = []
    for tip in tips:
        match run_git(
            [f"--git-dir={git_dir}", "rev-parse", "--verify", "-q", f"{tip}^{{commit}}"],
            env=env,
            config=SNAPSHOT_CONFIG,
            spawn=spawn,
        ):
            case Ok(output):
                wanted.append(output.decode("ascii").strip())
            case Err():
                continue
    if index is not None:
        match _index_objects(git_dir, index, env=env, spawn=spawn):
            case Ok(named):
                wanted += named
            case Err() as err:
                return err
    revisions = "".join(f"{rev}\n" for rev in wanted) + "".join(f"^{rev}\n" for rev in known)
    base_name = os.path.join(env["GIT_OBJECT_DIRECTORY"], "pack", "pack")
    packed = run_git(
        [f"--git-dir={git_dir}", "pack-objects", "-q", "--revs", base_name],
        env=env,
        config=SNAPSHOT_CONFIG,
        input=revisions.encode("ascii"),
        spawn=spawn,
    )
    return packed if isinstance(packed, Err) else Ok(None)


def _index_objects(
    git_dir: GitDirPath, index: str, *, env: Mapping[str, str], spawn: Spawn | None
) -> GitResult[list[str]]:
    """The blobs the ``index`` file names (every stage; not its gitlinks).
    Not ``pack-objects --indexed-objects``: that reads the index of every
    worktree of the repository too, and another sandboxed run's names
    blobs that only its own copy-on-write store holds."""
    match run_git(
        [f"--git-dir={git_dir}", "ls-files", "-s", "-z"],
        env={**env, "GIT_INDEX_FILE": index},
        config=SNAPSHOT_CONFIG,
        spawn=spawn,
    ):
        case Ok(output):
            entries = [e.split(b" ", 2) for e in output.split(b"\0") if e]
            return Ok(sorted({e[1].decode("ascii") for e in entries if e[0] != b"160000"}))
        case Err() as err:
            return err
