"""``git isopatch prune -h`` says what each option does, in git's words
(``git worktree prune -h``: "report pruned working trees"), and the manual
page says the same: ``-v`` reports every worktree and every
result folder that is removed, not the worktrees alone."""

from __future__ import annotations

from pathlib import Path

from repo_helpers import isopatch

ROOT = Path(__file__).resolve().parents[2]
VERBOSE = "report what is pruned, caches included"


def _words(text: str) -> str:
    """``text`` with its markup (``**``, backquotes) dropped and its white
    space folded: a sentence the page wraps reads whole."""
    return " ".join(text.replace("**", "").replace("`", "").split())


def test_prune_short_help_says_what_v_reports(env, make_repo) -> None:
    run = isopatch("prune", "-h", cwd=make_repo(), env=env)
    assert run.returncode == 129
    assert f"    -v, --verbose         {VERBOSE}" in run.out.splitlines()


def test_the_page_says_what_h_says_of_v() -> None:
    page = _words((ROOT / "man" / "git-isopatch.rst").read_text())
    assert "-v, --verbose reports what is pruned, caches included" in page


def test_v_reports_a_worktree_and_a_result_folder(env, make_repo) -> None:
    """What ``-h`` promises: both kinds of removal are on stdout."""
    repo = make_repo()
    kept = isopatch("--no-sandbox", "--porcelain", "--keep", "--", "touch", "a", cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    plain = isopatch("--no-sandbox", "--porcelain", "--", "touch", "b", cwd=repo, env=env)
    assert plain.returncode == 0, plain.err
    folder = str(Path(plain.fields()["patch"]).parent)
    pruned = isopatch("prune", "-v", "--expire", "now", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    lines = pruned.out.splitlines()
    assert f"Removing {kept.fields()['worktree']}: kept" in lines
    assert f"Removing {folder}: result folder" in lines
    assert not Path(folder).exists()
