"""The central invariant of tests/test_roundtrip.py (issue 2) in hostile
environments (issue 4): with every diff setting of the hostile profile in
the global configuration, and from inside a hook-like environment, the
patch still reproduces the command's tree and the repository is untouched."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hostile import install_hostile_profile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_roundtrip import _check_roundtrip, base_trees, change_lists

#: What git exports to a pre-commit hook of ``git --git-dir=.git commit -a``
#: (relative GIT_DIR, GIT_INDEX_FILE at the user's index lock), and to a
#: ``!`` alias (GIT_PREFIX).
HOOK_ENVIRONMENT = {
    "GIT_DIR": ".git",
    "GIT_INDEX_FILE": ".git/index",
    "GIT_PREFIX": "",
    "GIT_EDITOR": ":",
    "GIT_REFLOG_ACTION": "commit",
}


@pytest.mark.parametrize("profile", ["hostile global configuration", "hook environment"])
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), tree=base_trees)
def test_patch_reproduces_the_worktree_in_hostile_environments(
    env: dict[str, str], data: st.DataObject, tree: dict[str, bytes], profile: str
) -> None:
    changes = data.draw(change_lists(tree))
    with tempfile.TemporaryDirectory(dir=env["TMPDIR"]) as root:
        if profile == "hook environment":
            run_env = {**env, **HOOK_ENVIRONMENT}
            check_env = env
        else:
            global_config = Path(env["HOME"]) / ".gitconfig"
            global_config.unlink(missing_ok=True)
            run_env = install_hostile_profile(env, Path(root) / "scripts")
            check_env = env
        _check_roundtrip(Path(root), check_env, tree, changes, isopatch_env=run_env)
