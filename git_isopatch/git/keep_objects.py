"""Copy into an object store of one's own what a command made reachable.

A session's steps keep their commits in the session's own object store;
the command writes its objects where git puts them in the repository it
works in (under the sandbox a copy-on-write view, discarded when the run
ends).  :func:`pack_reachable` packs, into the store ``GIT_OBJECT_DIRECTORY``
names, the objects reachable from some commits and not from others
(``git pack-objects --revs``), read from that store and its alternates,
and with them the blobs an index holds that the first tip does not
(what the command staged and did not commit) and the store does not hold
yet.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .process import Spawn
from .result import Err, GitResult, Ok
from .run import run_git
from .snapshot import SNAPSHOT_CONFIG
from .types import CommitId, GitDirPath

#: The empty blob (SHA-1, SHA-256): what an intent-to-add entry names,
#: often never written; left out.
EMPTY_BLOBS = frozenset(
    {
        "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
        "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
    }
)


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
    commit, an unborn ``HEAD``, is left out), and the blobs the ``index``
    file holds where it differs from the first tip (:func:`_staged`), that
    ``known`` does not reach."""
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
    if index is not None and wanted:
        match _staged(git_dir, wanted[0], index, env, spawn):
            case Err() as failed:
                return failed
            case Ok(blobs) if blobs:
                match _not_kept(git_dir, blobs, env, spawn):
                    case Err() as failed:
                        return failed
                    case Ok(new):
                        wanted += new
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


def _staged(
    git_dir: GitDirPath, tree: str, index: str, env: Mapping[str, str], spawn: Spawn | None
) -> GitResult[list[str]]:
    """The blobs of ``index`` whose entries differ from ``tree``'s (``git
    diff-index --cached``: what was staged and not committed; gitlinks,
    removals and intent-to-add entries left out).  Cheaper than ``pack-objects --indexed-objects``,
    which walks every entry of the index (a quarter of a second of CPU at
    5,000 files)."""
    listed = run_git(
        [f"--git-dir={git_dir}", "diff-index", "--cached", "-z", "--no-abbrev", "--no-renames"]
        + [tree, "--"],
        env={**env, "GIT_INDEX_FILE": index},
        config=SNAPSHOT_CONFIG,
        spawn=spawn,
    )
    if isinstance(listed, Err):
        return listed
    blobs = []
    for record in listed.value.split(b"\0")[::2]:
        fields = record.lstrip(b":").split(b" ")
        if len(fields) == 5 and fields[1] not in (b"000000", b"160000"):
            blob = fields[3].decode("ascii")
            if blob.strip("0") and blob not in EMPTY_BLOBS:
                blobs.append(blob)
    return Ok(blobs)


def _not_kept(
    git_dir: GitDirPath, blobs: list[str], env: Mapping[str, str], spawn: Spawn | None
) -> GitResult[list[str]]:
    """Those of ``blobs`` that the store ``GIT_OBJECT_DIRECTORY`` names does
    not hold itself (read without its alternates): the index still names
    what an earlier step staged and packed, which no commit reaches."""
    listed = run_git(
        [f"--git-dir={git_dir}", "cat-file", "--batch-check=%(objectname)"],
        env={**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": ""},
        config=SNAPSHOT_CONFIG,
        input="".join(f"{blob}\n" for blob in blobs).encode("ascii"),
        spawn=spawn,
    )
    if isinstance(listed, Err):
        return listed
    missing = b" missing"
    return Ok(
        [
            line[: -len(missing)].decode("ascii")
            for line in listed.value.splitlines()
            if line.endswith(missing)
        ]
    )
