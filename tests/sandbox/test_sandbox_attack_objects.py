"""A command cannot change what the base's objects read as to git-isopatch's
own git, and so hide a change from the patch (design: The patch, "what
the command left is hostile input").

The extraction's ``git diff <base>`` reads the base's commit, trees and
blobs through the repository's object store and refs as the command left
them (its copy-on-write view under the sandbox, the repository itself
unconfined).  A command that edits a tracked file and makes git read the
base's blob as the new content (a replace ref, ``git replace <blob>
<new>``) leaves git nothing to show: the patch was empty while the
worktree held the edit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state
from sandbox_helpers import run_as_nobody

#: Edits ``README`` and replaces the base's blob of it with the new one.
REPLACE = """\
set -e
old=$(git rev-parse HEAD:README)
printf 'edited\\n' > README
git replace -f "$old" "$(git hash-object -w README)"
"""


def _edit_in_the_patch(run, repo: Path, tmp_path: Path, env) -> None:
    """The run took the edit: its patch gives ``edited`` on a clean
    checkout of the base."""
    assert run.returncode == 0, run.err
    fields = run.fields()
    assert fields["files"] == "1", run.out
    clean = apply_to_clean_checkout(repo, "HEAD", Path(fields["patch"]), tmp_path / "clean", env)
    assert (clean / "README").read_bytes() == b"edited\n"


@pytest.mark.hostile
@pytest.mark.parametrize("confined", ["--sandbox", "--no-sandbox"])
def test_a_replace_ref_the_command_makes_hides_no_edit(
    env, make_repo, tmp_path: Path, confined: str
) -> None:
    repo = make_repo({"README": "hello\n"})
    script = tmp_path / "replace.sh"
    script.write_text(REPLACE)
    before = repo_state(repo, env)
    run = isopatch(confined, "--porcelain", "--", "sh", script, cwd=repo, env=env)
    _edit_in_the_patch(run, repo, tmp_path, env)
    assert "refs/replace/" in run.err  # named, as any ref the command changed
    if confined == "--sandbox":
        assert repo_state(repo, env) == before


@pytest.mark.hostile
def test_the_users_own_replace_refs_still_shape_the_patch(env, make_repo, tmp_path: Path) -> None:
    """A replace ref of the user's stays in force: the worktree is checked
    out through it, and the patch applies to a checkout that is too."""
    repo = make_repo({"README": "hello\n"})
    (repo / "README").write_text("replaced\n")
    new = git("hash-object", "-w", "README", cwd=repo, env=env).decode().strip()
    git("replace", git("rev-parse", "HEAD:README", cwd=repo, env=env).decode().strip(), new,
        cwd=repo, env=env)  # fmt: skip
    git("checkout", "-q", "--", "README", cwd=repo, env=env)
    script = tmp_path / "edit.sh"
    script.write_text("printf 'edited\\n' >> README\n")
    run = isopatch("--porcelain", "--", "sh", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"])
    assert b"\n replaced\n+edited\n" in patch.read_bytes()
    git("apply", "--check", patch, cwd=repo, env=env)


#: As uid 65534: the run of :data:`REPLACE` (``sys.argv[1]``) in a
#: repository tracking ``README``, and what its patch gives on a clean checkout.
AS_NOBODY = """
def git(*args, cwd=repo):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout
with open(os.path.join(repo, "README"), "w") as handle:
    handle.write("hello\\n")
git("add", "README")
git("commit", "-q", "-m", "readme")
done = subprocess.run(
    [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox",
     "--", "sh", "-c", sys.argv[1]],
    cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines() if line)
clean = os.path.join(os.environ["HOME"], "clean")
git("clone", "-q", "--shared", repo, clean)
if os.path.getsize(fields["patch"]):
    git("apply", "--binary", fields["patch"], cwd=clean)
with open(os.path.join(clean, "README")) as handle:
    readme = handle.read()
print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "readme": readme}))
"""


@pytest.mark.hostile
def test_a_replace_ref_hides_no_edit_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, REPLACE) as seen:
        assert seen["code"] == 0, seen["err"]
        assert seen["readme"] == "edited\n", seen
