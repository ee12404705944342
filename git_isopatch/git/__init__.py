"""The git layer: branded types, ``GitResult``, the subprocess wrapper,
pygit2 look-ups and worktree operations.  Knows nothing of the worktrees or the sandbox."""

from .result import Err, GitError, GitResult, Ok
from .types import CommitId, GitDirPath, Ref, RepoPath, WorktreePath

__all__ = [
    "CommitId",
    "Err",
    "GitDirPath",
    "GitError",
    "GitResult",
    "Ok",
    "Ref",
    "RepoPath",
    "WorktreePath",
]
