"""A checkout that failed for want of room, told as such (``no-space``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import IsopatchError
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.temporary import default_folder
from ..git.types import CommitId
from ..git.worktree import checkout_size


def no_space(
    repository: UserRepository,
    base: CommitId,
    path: str,
    tmp_root: str | None,
    failure: IsopatchError,
    *,
    env: Mapping[str, str],
) -> IsopatchError:
    """A failed checkout (git: "unable to write file", without a reason)
    becomes ``no-space`` when the checkout needs more room or more
    files than the file system under ``tmp_root`` offers (statvfs(3));
    else ``failure`` as it was."""
    try:
        fs = os.statvfs(tmp_root or default_folder())
    except OSError:
        return failure
    block = fs.f_frsize or fs.f_bsize or 4096
    match checkout_size(repository.git_dir, base, block=block, env=env):
        case Ok((needed, files)):
            pass
        case Err():
            return failure
    free = fs.f_bavail * block
    if needed > free:
        why = f"the checkout needs {needed} bytes, {free} are free"
    elif fs.f_files and files > fs.f_favail:
        why = f"the checkout needs {files} files, {fs.f_favail} inodes are free"
    else:
        return failure
    return IsopatchError(
        "no-space",
        f"could not create worktree at '{path}': No space left on device ({why})",
        hint=f"git said: {failure.message.split(': ', 1)[-1]}",
    )
