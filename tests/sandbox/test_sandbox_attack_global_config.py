"""A sandboxed command writes git's global configuration in its
copy-on-write home (``~/.gitconfig``, ``$XDG_CONFIG_HOME/git/ignore`` and
``attributes``): the writes are discarded, yet git-isopatch's own git,
which runs in the same namespaces, reads them while it takes the patch.
The patch must be the change as the user's git sees it: a new file the
planted ignore rule hides, and an edit a planted clean filter turns back
into the base's content, are in it.  (Fails today: both are left out.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch

pytestmark = pytest.mark.hostile

PLANT = (
    'mkdir -p "$XDG_CONFIG_HOME/git" && echo n > new.txt && echo evil >> a.txt'
    ' && printf "new.txt\\n" > "$XDG_CONFIG_HOME/git/ignore"'
    ' && printf "a.txt filter=hide\\n" > "$XDG_CONFIG_HOME/git/attributes"'
    " && git config --global filter.hide.clean 'printf \"hi\\n\"'"
)


def test_global_configuration_the_command_wrote_does_not_shape_its_patch(env, make_repo) -> None:
    repo = make_repo({"a.txt": "hi\n"})
    run = isopatch("--porcelain", "--sandbox", "--keep", "--", "sh", "-c", PLANT, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    kept = Path(fields["worktree"])
    assert (kept / "a.txt").read_text() == "hi\nevil\n"
    patch = Path(fields["patch"]).read_bytes()
    git("worktree", "remove", "--force", kept, cwd=repo, env=env)
    assert b"+++ b/new.txt" in patch, patch
    assert b"+evil" in patch, patch
