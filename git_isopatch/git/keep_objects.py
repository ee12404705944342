"""Copy into an object store of one's own what a command made reachable.

A session's steps keep their commits in the session's own object store;
the command writes its objects where git puts them in the repository it
works in (under the sandbox a copy-on-write view, discarded when the run
ends).  :func:`pack_reachable` packs, into the store ``GIT_OBJECT_DIRECTORY``
names, the objects reachable from some commits and not from others
(``git pack-objects --revs``), read from that store and its alternates,
and with them the blobs and trees an index names (``--indexed-objects``:
what the command staged and did not commit).
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
    revisions = "".join(f"{rev}\n" for rev in wanted) + "".join(f"^{rev}\n" for rev in known)
    base_name = os.path.join(env["GIT_OBJECT_DIRECTORY"], "pack", "pack")
    indexed = [] if index is None else ["--indexed-objects"]
    packed = run_git(
        [f"--git-dir={git_dir}", "pack-objects", "-q", "--revs", *indexed, base_name],
        env=env if index is None else {**env, "GIT_INDEX_FILE": index},
        config=SNAPSHOT_CONFIG,
        input=revisions.encode("ascii"),
        spawn=spawn,
    )
    return packed if isinstance(packed, Err) else Ok(None)
