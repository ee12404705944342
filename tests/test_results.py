"""Leave nothing behind (design: "Placement"): a run keeps its private
``git-isopatch-*`` folder only when someone will read it; the ones left
behind expire after two weeks, automatically at most once a day per
repository, and with ``git isopatch prune``.  Never a folder git-isopatch
did not make, nor one that holds a worktree."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from repo_helpers import isopatch

from git_isopatch.isolation import results

CHANGE = ("sh", "-c", "echo changed >> README")
DAY = 24 * 3600


def _folders(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["TMPDIR"]).glob("git-isopatch-*"))


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then), follow_symlinks=False)


def _stamp(repo: Path) -> Path:
    return repo / ".git" / results.STAMP


def _old_result_folder(tmp: Path, common_dir: Path, name: str, days: float = 15) -> Path:
    """A result folder as a run leaves it, last modified ``days`` ago."""
    folder = tmp / f"git-isopatch-{name}"
    folder.mkdir(mode=0o700)
    (folder / "isopatch.patch").write_text("")
    results.mark(str(folder), str(common_dir))
    _age(folder, days)
    return folder


def test_a_plain_run_keeps_its_patch_in_a_marked_folder(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    (folder,) = _folders(env)
    assert sorted(p.name for p in folder.iterdir()) == [results.MARKER, "isopatch.patch"]
    marker = (folder / results.MARKER).read_bytes()
    assert marker == os.fsencode(os.path.realpath(repo / ".git")) + b"\n"


def test_output_to_a_file_leaves_nothing(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    run = isopatch("-o", tmp_path / "out.patch", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert (tmp_path / "out.patch").read_bytes().startswith(b"diff --git a/README b/README\n")
    assert _folders(env) == []


def test_output_with_porcelain_keeps_the_captured_output(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    run = isopatch("--porcelain", "-o", tmp_path / "p", "--", *CHANGE, cwd=repo, env=env)
    assert Path(run.fields()["stdout"]).is_file() and Path(run.fields()["stderr"]).is_file()


def test_stdout_leaves_nothing(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--stdout", "--", *CHANGE, cwd=repo, env=env)
    assert run.stdout.startswith(b"diff --git a/README b/README\n")
    assert _folders(env) == []


@pytest.mark.parametrize(("command", "status"), [(CHANGE, 1), (("true",), 0), (("false",), 1)])
def test_exit_code_quiet_leaves_nothing(env, make_repo, command, status: int) -> None:
    repo = make_repo()
    run = isopatch("--exit-code", "-q", "--", *command, cwd=repo, env=env)
    assert (run.returncode, run.err) == (status, "")
    assert _folders(env) == []


@pytest.mark.parametrize(("command", "status"), [(CHANGE, 0), (("false",), 1)])
def test_quiet_leaves_nothing(env, make_repo, command, status: int) -> None:
    """Nothing names the patch of a ``-q`` run, so nothing of it stays."""
    repo = make_repo()
    run = isopatch("-q", "--", *command, cwd=repo, env=env)
    assert (run.returncode, run.err) == (status, "")
    assert _folders(env) == []


def test_exit_code_without_quiet_keeps_the_patch_it_names(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--exit-code", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 1
    patch = Path(run.err.split(", patch ")[1].split()[0])
    assert patch.is_file()


def test_a_kept_worktree_keeps_its_folder_with_stdout(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("--keep", "--stdout", "-q", "--", *CHANGE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert _folders(env) == []  # the worktree lives beside the checkout
    (folder,) = repo.parent.glob("repo.isopatch-*")
    assert (folder / "repo" / ".git").is_file()
    assert not (folder / "isopatch.patch").exists()


def test_prune_removes_old_result_folders_of_this_repository_only(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    other = make_repo(name="other")
    tmp = Path(env["TMPDIR"])
    old = _old_result_folder(tmp, repo / ".git", "old")
    recent = _old_result_folder(tmp, repo / ".git", "recent", days=3)
    others = _old_result_folder(tmp, other / ".git", "others")
    unmarked = tmp / "git-isopatch-unmarked"
    unmarked.mkdir()
    _age(unmarked, 30)
    not_ours = tmp / "not-isopatch"
    not_ours.mkdir()
    results.mark(str(not_ours), str(repo / ".git"))
    _age(not_ours, 30)
    link = tmp / "git-isopatch-link"
    link.symlink_to(old)

    dry = isopatch("prune", "-n", cwd=repo, env=env)
    assert dry.out == f"Removing {old}: result folder\n"
    assert old.is_dir()

    done = isopatch("prune", "-v", cwd=repo, env=env)
    assert done.returncode == 0, done.err
    assert done.out == f"Removing {old}: result folder\n"
    assert not old.exists()
    assert recent.is_dir() and others.is_dir() and unmarked.is_dir() and not_ours.is_dir()
    assert link.is_symlink()

    now = isopatch("prune", "--expire", "now", cwd=repo, env=env)
    assert now.returncode == 0, now.err
    assert not recent.exists() and others.is_dir()


def test_prune_reads_only_the_configuration_it_uses(env, make_repo) -> None:
    """A bad value of a key prune does not use is no error: git reads a key
    where a command uses it."""
    repo = make_repo()
    old = _old_result_folder(Path(env["TMPDIR"]), repo / ".git", "old")
    bad = ("-c", "isopatch.pool=few", "-c", "isopatch.sandbox=maybe", "-c", "isopatch.timeout=x")
    done = isopatch("prune", "-v", cwd=repo, env=env, git_options=bad)
    assert done.returncode == 0, done.err
    assert done.out == f"Removing {old}: result folder\n"


def test_prune_leaves_a_folder_that_holds_a_worktree_to_worktree_pruning(env, make_repo) -> None:
    repo = make_repo()
    kept = isopatch("--keep", "--porcelain", "--", *CHANGE, cwd=repo, env=env)
    folder = Path(kept.fields()["worktree"]).parent
    _age(folder, 30)
    found = results.result_folders(str(repo / ".git"), str(folder.parent))
    assert [f.path for f in found] == []
    assert not results.discard(str(folder))
    assert (folder / "repo" / ".git").is_file()


def test_a_run_expires_old_result_folders_once_a_day(env, make_repo) -> None:
    """The time of the worktree lock, which every run opens, keeps count:
    no other file is added to the git directory."""
    repo = make_repo()
    other = make_repo(name="other")
    tmp = Path(env["TMPDIR"])
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    old = _old_result_folder(tmp, repo / ".git", "old")
    others = _old_result_folder(tmp, other / ".git", "others")
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert old.is_dir(), "the lock was made a moment ago: not yet"

    _age(_stamp(repo), 1.5)
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert not old.exists(), "a day later, expired"
    assert others.is_dir(), "another repository's folder is its own business"
    assert time.time() - _stamp(repo).stat().st_mtime < 600

    again = _old_result_folder(tmp, repo / ".git", "again")
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert again.is_dir(), "not twice in a day"

    _age(_stamp(repo), 1.5)
    isopatch("--stdout", "--", "true", cwd=repo, env=env)
    assert not again.exists(), "a day later, again"


def test_automatic_expiry_skips_a_repository_where_it_cannot_keep_time(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    common = repo / ".git"
    (common / results.STAMP).mkdir()  # the stamp cannot be written
    old = _old_result_folder(Path(env["TMPDIR"]), common, "old")
    assert not results.expire_automatically(str(common), env["TMPDIR"])
    assert old.is_dir()


def test_discard_refuses_what_git_isopatch_did_not_make(tmp_path: Path) -> None:
    unmarked = tmp_path / "git-isopatch-x"
    unmarked.mkdir()
    (unmarked / "file").write_text("mine")
    assert not results.discard(str(unmarked)) and (unmarked / "file").exists()
    renamed = tmp_path / "mine"
    renamed.mkdir()
    results.mark(str(renamed), str(tmp_path))
    assert not results.discard(str(renamed)) and renamed.is_dir()
    target = tmp_path / "target"
    target.mkdir()
    results.mark(str(target), str(tmp_path))
    link = tmp_path / "git-isopatch-link"
    link.symlink_to(target)
    assert not results.discard(str(link)) and target.is_dir() and link.is_symlink()
    marker_link = tmp_path / "git-isopatch-marker-link"
    marker_link.mkdir()
    (marker_link / results.MARKER).symlink_to(target / results.MARKER)
    assert not results.discard(str(marker_link)) and marker_link.is_dir()


def test_the_api_deletes_nothing_it_reports(env, make_repo, tmp_path: Path) -> None:
    from git_isopatch import capture

    repo = make_repo()
    result = capture(list(CHANGE), repo_path=str(repo), capture_output=True)
    assert Path(result.patch_path).is_file() and Path(result.stdout).is_file()
    assert results.discard(result.tmpdir) and not Path(result.tmpdir).exists()
    to_file = capture(list(CHANGE), repo_path=str(repo), output=str(tmp_path / "p"))
    assert to_file.patch_path == str(tmp_path / "p") and not Path(to_file.tmpdir).exists()
