"""Copy-on-write outside the worktree (``run_policy.run_policy``), on a real
repository and linked worktree with the real bubblewrap: git inside works
as in a fresh clone, tools write where they write, and nothing of it
reaches the user's repository, home or checkout; what was written outside
is listed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from repo_helpers import git, repo_state

from git_isopatch.sandbox import namespaces, namespaces_check, run_policy
from git_isopatch.sandbox.seccomp import seccomp_filter


@pytest.fixture
def bwrap() -> namespaces.Bwrap:
    return namespaces_check.check_available(allow_network=False)


def _setting(make_repo, env, tmp_path: Path, bwrap) -> tuple[Path, Path, namespaces.Namespaces]:
    repo = make_repo({"README": "hello\n", "src/a.txt": "a\n"})
    container = tmp_path / ".git-isopatch-abcdefgh"
    container.mkdir()
    worktree = container / "repo"
    git("worktree", "add", "-q", "--detach", worktree, "HEAD", cwd=repo, env=env)
    admin = git("rev-parse", "--absolute-git-dir", cwd=worktree, env=env).decode().strip()
    private = Path(env["TMPDIR"]) / "git-isopatch-private"
    (private / "tmp").mkdir(parents=True)
    places = run_policy.RunPlaces(
        worktree=str(worktree),
        admin_dir=admin,
        common_dir=str(repo / ".git"),
        top=str(repo),
        tmpdir=str(private / "tmp"),
        home=env["HOME"],
        temporary=(env["TMPDIR"],),
    )
    policy = run_policy.run_policy(places)
    box = namespaces.Namespaces(bwrap, policy, str(private / "layers"), seccomp_filter())
    box.prepare()
    return repo, worktree, box


def _run(box, argv, cwd: Path, env) -> subprocess.CompletedProcess[bytes]:
    with box.wrap(argv, cwd=str(cwd)) as wrapped:
        done = subprocess.run(
            wrapped.argv,
            pass_fds=wrapped.pass_fds,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env={**env, "TMPDIR": box.policy.writable[2]},
            timeout=120,
            check=False,
        )
        status = wrapped.finish()
    assert not namespaces._alive(status["child-pid"])
    return done


GIT_SESSION = """
set -e
git status --short
echo changed >> README
echo new > new.txt
git add -A
git commit -q -m inside
git branch inside-branch
git tag inside-tag
echo stashed >> src/a.txt
git stash -q
git config user.name Inside
git config --get user.name
git worktree add -q ../second HEAD~1
mkdir -p "$HOME/.cache/tool" && echo warm > "$HOME/.cache/tool/db"
echo planted >> "$CHECKOUT/README"
chmod 600 "$CHECKOUT/src/a.txt"
echo hook > "$CHECKOUT/.git/hooks/pre-commit"
echo tmp > "$TMPDIR/private-file"
echo ok
"""


def test_git_inside_works_and_nothing_reaches_the_user(make_repo, env, tmp_path, bwrap) -> None:
    repo, worktree, box = _setting(make_repo, env, tmp_path, bwrap)
    before = repo_state(repo, env)
    home_before = sorted(str(p) for p in Path(env["HOME"]).rglob("*"))
    done = _run(box, ["sh", "-c", GIT_SESSION], worktree, {**env, "CHECKOUT": str(repo)})
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines()[-2:] == ["Inside", "ok"]
    after = repo_state(repo, env)
    # the worktree's own HEAD moved (its admin folder is really written)
    mine = [after.pop("worktree list"), before.pop("worktree list")]
    assert after == before
    assert [m.count(b"worktree ") for m in mine] == [2, 2]
    assert sorted(str(p) for p in Path(env["HOME"]).rglob("*")) == home_before
    assert os.stat(repo / "src" / "a.txt").st_mode & 0o777 == 0o644
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    written = box.outside_writes()
    common = repo / ".git"
    for path in (
        Path(env["HOME"]) / ".cache" / "tool" / "db",
        repo / "README",
        repo / "src" / "a.txt",
        common / "hooks" / "pre-commit",
        common / "config",
        common / "refs" / "heads" / "inside-branch",
        common / "refs" / "tags" / "inside-tag",
        common / "refs" / "stash",
        worktree.parent / "second",
    ):
        assert str(path) in written, (path, written)
    assert not any(p.startswith(str(worktree) + "/") for p in written)
    # the worktree's own changes are real: its HEAD moved, its files changed
    assert (worktree / "new.txt").read_text() == "new\n"


def test_what_the_command_committed_is_read_through_its_layer(
    make_repo, env, tmp_path, bwrap
) -> None:
    """The worktree's HEAD names a commit whose objects are in the layer:
    git confined as the command was reads them, the user's store never
    holds them."""
    repo, worktree, box = _setting(make_repo, env, tmp_path, bwrap)
    base = git("rev-parse", "HEAD", cwd=repo, env=env).decode().strip()
    done = _run(
        box,
        ["sh", "-c", "echo more >> README && git commit -q -am inside && git rev-parse HEAD"],
        worktree,
        env,
    )
    assert done.returncode == 0, done.stderr.decode()
    commit = done.stdout.decode().strip()
    assert (
        subprocess.run(["git", "cat-file", "-e", commit], cwd=repo, env=env, check=False).returncode
        != 0
    )
    shown = _run(box, ["git", "diff", "--binary", base, "--", "README"], worktree, env)
    assert shown.returncode == 0, shown.stderr.decode()
    assert b"+more" in shown.stdout
    layer = box.layer_of(str(repo / ".git" / "objects"))
    assert layer is not None and os.path.isdir(layer)
    alternate = {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": layer}
    log = git("log", "-1", "--format=%s", commit, cwd=worktree, env=alternate)
    assert log.strip() == b"inside"


def test_a_pack_written_in_place_corrupts_nothing(make_repo, env, tmp_path, bwrap) -> None:
    repo, worktree, box = _setting(make_repo, env, tmp_path, bwrap)
    git("gc", "-q", cwd=repo, env=env)
    packs = sorted((repo / ".git" / "objects" / "pack").glob("*.pack"))
    assert packs
    before = {p: p.read_bytes() for p in packs}
    script = "; ".join(
        f"chmod u+w {p} && printf 'garbage' | dd of={p} bs=1 seek=20 conv=notrunc" for p in packs
    )
    done = _run(box, ["sh", "-c", script + "; echo done"], worktree, env)
    assert done.returncode == 0 and done.stdout == b"done\n", done.stderr.decode()
    assert b"records out" in done.stderr
    assert {p: p.read_bytes() for p in packs} == before
    git("fsck", "--no-progress", cwd=repo, env=env)
    assert set(map(str, packs)) <= set(box.outside_writes())
