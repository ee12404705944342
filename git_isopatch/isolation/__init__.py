"""The isolation layer: ephemeral worktrees, their records, the command's
process group, and the classification of known failures.  Knows nothing of
the command line."""

from .errors import IsopatchError, UnexpectedGitFailure

__all__ = ["IsopatchError", "UnexpectedGitFailure"]
