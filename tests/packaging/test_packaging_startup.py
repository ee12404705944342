"""Start-up: a run imports only what its path uses.  ``-h`` and
``--version`` load nothing beyond the parser; a plain unconfined capture
leaves the sandbox, the snapshot, the sparse checkout, the pool's refresh, rendering
and ``list``/``prune`` unloaded.  Found with ``python -X importtime``, which
names every module a process imports; no time is asserted."""

from __future__ import annotations

import pytest
from startup_helpers import imported

#: Modules only some paths need.
PATH_ONLY = {
    "git_isopatch.sandbox.landlock",  # the sandbox (the default; not --no-sandbox)
    "ctypes",  # the sandbox's system calls
    "git_isopatch.git.snapshot",  # --include-uncommitted
    "git_isopatch.git.sparse",  # --include-uncommitted in a sparse checkout
    "git_isopatch.git.refresh",  # isopatch.pool
    "git_isopatch.git.sweep",  # isopatch.pool, a claim
    "hashlib",  # a path that differed from the base before the command
    "git_isopatch.render",  # a summary, --porcelain, --json, list
    "git_isopatch.manage",  # list, prune
}

#: What -h and --version must not load: anything beyond the parser.
BEYOND_THE_PARSER = PATH_ONLY | {
    "pygit2",
    "git_isopatch.capture",
    "git_isopatch.settings",
    "git_isopatch.git",
    "git_isopatch.worktrees",
    "git_isopatch.sandbox",
    "git_isopatch.worktrees.provider",
    "git_isopatch.errors",
}


@pytest.mark.parametrize("option", ["-h", "--version"])
def test_help_and_version_load_nothing_beyond_the_parser(env, make_repo, option) -> None:
    loaded = imported([option], make_repo(), env)
    assert loaded & BEYOND_THE_PARSER == set()


def test_a_plain_run_loads_only_what_it_uses(env, make_repo) -> None:
    loaded = imported(["-q", "--no-sandbox", "--", "true"], make_repo(), env)
    assert "pygit2" in loaded and "git_isopatch.capture" in loaded
    assert loaded & PATH_ONLY == set()


def test_the_paths_that_need_them_load_them(env, make_repo) -> None:
    """The check above can fail: the same probe sees the modules when the
    path needs them."""
    repo = make_repo()
    assert "git_isopatch.git.snapshot" in imported(
        ["-q", "--include-uncommitted", "--", "true"], repo, env
    )
    assert "git_isopatch.render" in imported(["--porcelain", "--", "true"], repo, env)
    assert "git_isopatch.sandbox.landlock" in imported(["-q", "--", "true"], repo, env)
    imported(["-q", "--", "true"], repo, env, config="'isopatch.pool=1'")
    assert "git_isopatch.git.refresh" in imported(
        ["-q", "--", "true"], repo, env, config="'isopatch.pool=1'"
    )
    assert "git_isopatch.manage" in imported(["list"], repo, env)
