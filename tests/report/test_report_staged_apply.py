"""Report step, the human summary of ``--staged --apply``: it says what was
done in git's words (the patch went into the index and the work tree), and
when the patch does not apply, the messages come as ``git apply`` and
``git am`` give them: what happened (the diffstat, the summary), then
``error:``, then the ``hint:`` lines that explain it."""

from __future__ import annotations

import subprocess

import pytest
from repo_helpers import git, isopatch, write_tree

#: The command: the last line "bad" becomes "good".
FIX = ("sh", "-c", "sed -i 's/^bad$/good/' f")
BASE = "".join(f"line {n}\n" for n in range(1, 10))
STAGED = BASE + "bad\n"
#: An unstaged edit next to the fix: the fix cannot be merged with it.
NEXT_TO_FIX = STAGED.replace("line 9\n", "an unstaged edit\n")
STAGE_HINT = (
    "hint: stage those files whole (git add) or set their unstaged edits aside, then run it again"
)


def _staged_repo(make_repo, env, unstaged: str | None = None):
    repo = make_repo({"f": BASE})
    write_tree(repo, {"f": STAGED})
    git("add", "f", cwd=repo, env=env)
    if unstaged is not None:
        write_tree(repo, {"f": unstaged})
    return repo


def test_staged_apply_says_the_index_and_the_work_tree(env, make_repo) -> None:
    repo = _staged_repo(make_repo, env)
    run = isopatch("--no-sandbox", "--staged", "--apply", "--", *FIX, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert git("status", "--porcelain", cwd=repo, env=env) == b"M  f\n"  # index and work tree
    assert run.err.splitlines()[-1] == (
        "isopatch: 1 file changed, exit 0, applied to the index and the work tree"
    )


def test_apply_without_staged_says_the_work_tree_alone(env, make_repo) -> None:
    repo = make_repo({"f": STAGED})
    run = isopatch("--no-sandbox", "--apply", "--", *FIX, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert git("status", "--porcelain", cwd=repo, env=env) == b" M f\n"  # not the index
    assert run.err.splitlines()[-1] == "isopatch: 1 file changed, exit 0, applied to the work tree"


def test_a_failed_staged_apply_gives_its_hints_after_the_summary_and_error(env, make_repo) -> None:
    repo = _staged_repo(make_repo, env, unstaged=NEXT_TO_FIX)
    run = isopatch("--no-sandbox", "--staged", "--apply", "--", *FIX, cwd=repo, env=env)
    assert run.returncode == 128, run.err
    lines = run.err.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("isopatch: "))
    assert lines[:summary] == [" f | 2 +-", " 1 file changed, 1 insertion(+), 1 deletion(-)"]
    assert lines[summary].startswith("isopatch: 1 file changed, exit 0, patch ")
    assert lines[summary + 1].startswith(
        "error: the fix does not apply on top of your unstaged changes"
    )
    assert lines[summary + 2].startswith("hint: nothing was written; the patch is kept at ")
    assert lines[summary + 3 :] == [STAGE_HINT]
    assert (repo / "f").read_text() == NEXT_TO_FIX


def test_the_porcelain_still_holds_the_apply_hint(env, make_repo) -> None:
    repo = _staged_repo(make_repo, env, unstaged=NEXT_TO_FIX)
    run = isopatch(
        "--no-sandbox", "--porcelain", "--staged", "--apply", "--", *FIX, cwd=repo, env=env
    )
    assert run.returncode == 128, run.err
    records = run.out.splitlines()
    assert "applied false" in records and "error-code apply-failed" in records
    assert records[-1] == STAGE_HINT.replace("hint: ", "hint ", 1)
    assert [line for line in run.err.splitlines() if line.startswith("hint: ")][-1] == STAGE_HINT


def test_in_a_pre_commit_hook_the_apply_hint_says_commit_again(env, make_repo) -> None:
    """Run by ``git commit``'s pre-commit hook (git names the index in
    ``GIT_INDEX_FILE``), the way on is to commit again; the commit stops."""
    repo = _staged_repo(make_repo, env, unstaged=NEXT_TO_FIX)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(
        "#!/bin/sh\n"
        "exec git isopatch --no-sandbox --staged --apply -q -- sh -c \"sed -i 's/^bad$/good/' f\"\n"
    )
    hook.chmod(0o755)
    committed = subprocess.run(
        ["git", "commit", "-q", "-m", "fix"], cwd=repo, env=env, capture_output=True, check=False
    )
    assert committed.returncode != 0
    err = committed.stderr.decode()
    assert err.splitlines()[-1] == STAGE_HINT.replace("run it again", "commit again"), err
    assert git("rev-list", "--count", "HEAD", cwd=repo, env=env) == b"1\n"


def _user_state(repo, env) -> tuple[bytes, bytes, dict[str, tuple[bytes, int]]]:
    """The index's entries, what differs from it, and every file of the
    work tree with its mode."""
    entries = git("ls-files", "--stage", "-z", cwd=repo, env=env)
    unstaged = git("diff", "--binary", cwd=repo, env=env)
    files = {
        str(path.relative_to(repo)): (path.read_bytes(), path.stat().st_mode)
        for path in repo.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(repo).parts
    }
    return entries, unstaged, files


#: Unstaged work a fix cannot go on top of, and what the error says of it:
#: the staged file deleted, edited again on the fix's own line, or an
#: untracked file where the fix makes one.
IN_THE_WAY = {
    "deleted": ({"f": None}, FIX, "f: does not exist in the work tree"),
    "same-line": ({"f": STAGED.replace("bad\n", "bad, edited\n")}, FIX, "patch failed: f:"),
    "untracked": (
        {"new": "mine\n"},
        ("sh", "-c", "sed -i 's/^bad$/good/' f; echo theirs > new"),
        "new: already exists in the work tree",
    ),
}


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
@pytest.mark.parametrize("case", sorted(IN_THE_WAY))
def test_unstaged_work_in_the_fixs_way_is_kept_and_named(env, make_repo, case, sandbox) -> None:
    """An unstaged change the fix cannot go on top of stops the apply
    before anything is written (as ``git apply`` refuses a patch that does
    not fit), and the error names it."""
    unstaged, command, reason = IN_THE_WAY[case]
    repo = _staged_repo(make_repo, env)
    for name, text in unstaged.items():
        if text is None:
            (repo / name).unlink()
        else:
            write_tree(repo, {name: text})
    before = _user_state(repo, env)
    run = isopatch(sandbox, "--staged", "--apply", "--", *command, cwd=repo, env=env)
    assert run.returncode == 128, run.err
    error = [line for line in run.err.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and reason in error[0], run.err
    assert error[0].startswith("error: the fix does not apply on top of your unstaged changes: ")
    assert run.err.splitlines()[-1] == STAGE_HINT
    assert _user_state(repo, env) == before


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_an_unstaged_mode_change_stays_beside_the_fix(env, make_repo, sandbox) -> None:
    repo = _staged_repo(make_repo, env)
    (repo / "f").chmod(0o755)
    run = isopatch(sandbox, "--staged", "--apply", "--", *FIX, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fixed = STAGED.replace("bad\n", "good\n")
    assert git("show", ":f", cwd=repo, env=env).decode() == fixed
    assert git("ls-files", "--stage", "f", cwd=repo, env=env).startswith(b"100644 ")
    assert (repo / "f").read_text() == fixed and (repo / "f").stat().st_mode & 0o777 == 0o755
    assert git("diff", cwd=repo, env=env).decode().splitlines()[1:] == [
        "old mode 100644",
        "new mode 100755",
    ]
