"""The warm pool (``isopatch.pool``): a used worktree goes back to the pool,
the next run claims it, and what that run sees is exactly what a fresh
``git worktree add --detach`` gives; pooled worktrees in ``list``, ``prune``,
``isopatch.maxWorktrees``, ``git worktree prune``, ``--keep``; a crash while
one is claimed; concurrent claims."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import admin_dirs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_helpers import base_trees, git, isopatch, repo_state, write_tree


@pytest.fixture(autouse=True)
def unconfined(env) -> None:
    """These tests specify the pool of unconfined runs (commands that leave
    branches and writes behind for the pool to deal with):
    ``isopatch.sandbox=false`` in the user's global configuration, the
    sandbox being the default since issue 19; ``--sandbox`` runs say so
    (and test_lifecycle_pool_sandbox.py)."""
    git("config", "--global", "isopatch.sandbox", "false", cwd=Path(env["HOME"]), env=env)


FILES = {
    "README": "hello\n",
    "a.txt": "alpha\n",
    "b.txt": "beta\n",
    "run.sh": "#!/bin/sh\necho run\n",
    "sub/c.txt": "gamma\n",
    "sub/deep/d.txt": "delta\n",
    "link": "symlink:a.txt",
    ".gitignore": "build/\nnode_modules/\n*.o\n",
}

#: Writes what the command sees into ``probe.out`` (so that it is in the
#: patch) and exits with a code that depends on it: the files with their
#: type, permissions and size, what git status shows (ignored files too),
#: the index with its flags, HEAD, per-worktree refs and configuration,
#: the worktree's private folder, and the folder above the worktree.
PROBE = r"""
{
  echo "## files"; find . -path ./.git -prune -o -path ./probe.out -prune -o \
      \( -type d -printf '%p %y %m\n' \) -o -printf '%p %y %m %s %l\n' | LC_ALL=C sort
  echo "## status"; git status --porcelain --ignored -uall --branch
  echo "## index"; git ls-files -v -s --debug | grep -v -e ctime: -e mtime: -e dev: -e uid:
  echo "## head"; git rev-parse HEAD; git symbolic-ref -q HEAD; echo "symbolic $?"
  echo "## reflog"; git reflog --format='%H %gs' 2>&1
  echo "## refs"; git for-each-ref --format='%(refname) %(objectname)' refs/bisect refs/worktree
  echo "## config"; git config --worktree --list 2>&1; git config --get core.probekey
  echo "## admin"; ls -A "$(git rev-parse --git-dir)" | LC_ALL=C sort
  echo "## above"; ls -A ..
} > probe.out 2>&1
exit $(( $(wc -l < probe.out) % 7 ))
"""

#: Commands that litter a worktree, each in one of the ways the pool must undo.
LITTER = {
    "untracked": "echo junk > untracked.txt; mkdir -p new/dir && echo n > new/dir/f",
    "ignored": "mkdir -p build && echo o > build/out.o && echo x > top.o",
    "node_modules": "mkdir -p node_modules/pkg && echo m > node_modules/pkg/index.js",
    "nested repo": "git init -q nested && echo n > nested/f && git -C nested add f"
    " && git -C nested commit -qm n",
    "ignored nested repo": "git init -q build/inner && echo i > build/inner/f",
    "modified": "echo more >> a.txt",
    "same size, old time": "printf 'ALPHA\\n' > a.txt && touch -r b.txt a.txt",
    "mode": "chmod +x a.txt && chmod -x run.sh",
    "deleted": "rm -f b.txt && rm -rf sub/deep",
    "type change": "rm -rf sub && echo file > sub && rm -f link && echo plain > link",
    "staged": "echo s > staged.txt && git add staged.txt && git rm -q --cached README",
    "skip-worktree": "git update-index --skip-worktree a.txt && echo hidden >> a.txt",
    "assume-unchanged": "git update-index --assume-unchanged b.txt && echo hidden >> b.txt",
    "intent-to-add": "echo i > ita.txt && git add -N ita.txt",
    "worktree config": "git config extensions.worktreeConfig true"
    " && git config --worktree core.probekey worktree-value",
    "bisect": "git bisect start -q 2>/dev/null || git bisect start; git bisect bad HEAD",
    "refs/worktree": "git update-ref refs/worktree/mine HEAD",
    "commit": "echo c >> a.txt && git commit -qam 'in the worktree'",
    "branch": "git checkout -q -b branch-{n}",
    "symlink out": "ln -s /etc outside-link && ln -sf /etc sub/etc",
    "above": "echo up > ../above.txt && mkdir -p ../above.d",
    "sparse": "git sparse-checkout set --no-cone 'sub/' 2>/dev/null || true",
    "fails": "exit 3",
}

counter = itertools.count()


def _repo(tmp_path: Path, env: dict[str, str], name: str, files=FILES) -> Path:
    top = tmp_path / name
    top.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=top, env=env)
    write_tree(top, files)
    if (top / "run.sh").exists():
        (top / "run.sh").chmod(0o755)
    git("add", "-A", cwd=top, env=env)
    git("commit", "-q", "-m", "base", cwd=top, env=env)
    (top / "a.txt").write_text("alpha 2\n")
    (top / "new-in-second.txt").write_text("second\n")
    git("add", "-A", cwd=top, env=env)
    git("commit", "-q", "-m", "second", cwd=top, env=env)
    return top


def _run(repo: Path, env: dict[str, str], *args: str, pool: int | None = 1):
    options = ("-c", f"isopatch.pool={pool}") if pool is not None else ()
    return isopatch("--porcelain", *args, cwd=repo, env=env, git_options=options)


def _pooled(repo: Path, env: dict[str, str]) -> list[str]:
    run = isopatch("list", "--porcelain", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    entries = [
        dict(line.split(" ", 1) for line in block.splitlines())
        for block in run.out.split("\n\n")
        if block.strip()
    ]
    return [e["worktree"] for e in entries if e["state"] == "pooled"]


def _state(repo: Path, env: dict[str, str]) -> dict[str, object]:
    """:func:`repo_state` but for the worktree list, which holds the pool."""
    state = repo_state(repo, env)
    state.pop("worktree list")
    return state


def _where(run) -> str:  # noqa
    """The folder the command ran in (its stdout, captured by --porcelain)."""
    return Path(run.fields()["stdout"]).read_text().split("\n")[0]


def test_a_run_returns_its_worktree_and_the_next_claims_it(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    before = _state(repo, env)
    first = _run(repo, env, "--", "sh", "-c", "pwd; echo x > new.txt")
    assert first.returncode == 0, first.err
    assert "worktree" not in first.fields()
    pooled = _pooled(repo, env)
    assert pooled == [_where(first)]
    # locked with the pool's reason, detached: git worktree prune leaves it
    listed = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    block = next(b for b in listed.split("\n\n") if b.startswith(f"worktree {pooled[0]}\n"))
    assert "locked git-isopatch pooled" in block and "detached" in block
    git("worktree", "prune", cwd=repo, env=env)
    assert _pooled(repo, env) == pooled
    second = _run(repo, env, "--base", "HEAD~1", "--", "sh", "-c", "pwd; ls; cat a.txt")
    assert second.returncode == 0, second.err
    assert _where(second) == pooled[0], second.err
    assert Path(second.fields()["stdout"]).read_text().splitlines()[1:] == [
        *("README", "a.txt", "b.txt", "link", "run.sh", "sub"),
        "alpha",
    ]
    assert Path(second.fields()["patch"]).read_bytes() == b""
    # the first run's patch is still there: the pooled worktree never held it
    assert b"+x" in Path(first.fields()["patch"]).read_bytes()
    assert _state(repo, env) == before


def test_the_pool_holds_at_most_isopatch_pool_worktrees(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    runs = [
        subprocess.Popen(
            ["git", "-c", "isopatch.pool=2", "isopatch", "-q", "--", "sh", "-c", "sleep 1"],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        for _ in range(4)
    ]
    assert [r.wait(timeout=300) for r in runs] == [0, 0, 0, 0]
    assert len(_pooled(repo, env)) == 2
    assert len(admin_dirs(repo, env)) == 2


def test_pool_zero_is_off_and_a_bad_value_is_fatal(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    assert _run(repo, env, "--", "true", pool=0).returncode == 0
    assert admin_dirs(repo, env) == []
    bad = _run(repo, env, "--", "true", pool="few")  # type: ignore[arg-type]
    assert bad.returncode == 128
    assert "fatal: bad config value for 'isopatch.pool'" in bad.err
    assert "hint: 'few' is not a number of worktrees (0 for no pool)" in bad.err
    assert admin_dirs(repo, env) == []


def test_keep_takes_the_worktree_out_of_the_pool(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    _run(repo, env, "--", "true")
    [pooled] = _pooled(repo, env)
    kept = _run(repo, env, "--keep", "--", "sh", "-c", "pwd")
    assert kept.fields()["worktree"] == pooled == _where(kept)
    assert _pooled(repo, env) == []
    states = isopatch("list", cwd=repo, env=env).out
    assert "kept" in states and "pooled" not in states
    # a later run does not take the kept one
    later = _run(repo, env, "--", "sh", "-c", "pwd")
    assert _where(later) != pooled


def test_prune_removes_pooled_worktrees(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    before = _state(repo, env)
    _run(repo, env, "--", "sh", "-c", "mkdir -p node_modules/x && echo 1 > node_modules/x/y")
    [pooled] = _pooled(repo, env)
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0, pruned.err
    assert pooled in pruned.out
    assert admin_dirs(repo, env) == []
    assert not Path(pooled).exists() and not Path(pooled).parent.exists()
    assert _state(repo, env) == before


def test_max_worktrees_counts_pooled_ones_and_evicts_them_first(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    _run(repo, env, "--keep", "--", "true")
    _run(repo, env, "--", "true", pool=1)
    assert len(_pooled(repo, env)) == 1 and len(admin_dirs(repo, env)) == 2
    [pooled] = _pooled(repo, env)
    # at the cap, with the pool off, the pooled one goes, not the kept one
    run = isopatch(
        "-q",
        "--",
        "sh",
        "-c",
        "pwd",
        cwd=repo,
        env=env,
        git_options=("-c", "isopatch.maxWorktrees=2", "-c", "isopatch.pool=0"),
    )
    assert run.returncode == 0, run.err
    assert "warning" not in run.err
    assert not Path(pooled).exists()
    states = isopatch("list", cwd=repo, env=env).out
    assert "kept" in states and "pooled" not in states


def test_a_crash_while_claimed_leaves_an_orphan_that_prune_clears(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    _run(repo, env, "--", "true")
    [pooled] = _pooled(repo, env)
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [
            "git",
            "-c",
            "isopatch.pool=1",
            "isopatch",
            "--",
            "sh",
            "-c",
            f"pwd > {started}; sleep 60",
        ],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (started.exists() and started.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert started.read_text().strip() == pooled
    assert "running" in isopatch("list", cwd=repo, env=env).out
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    listed = isopatch("list", cwd=repo, env=env).out
    assert "orphaned" in listed and "pooled" not in listed
    # a new run does not claim the orphan
    again = _run(repo, env, "--", "sh", "-c", "pwd")
    assert _where(again) != pooled
    isopatch("prune", cwd=repo, env=env)
    assert not Path(pooled).exists()
    assert _pooled(repo, env) == [_where(again)] or _pooled(repo, env) == []


def test_a_branch_checked_out_by_the_command_is_released(env, tmp_path) -> None:
    repo = _repo(tmp_path, env, "repo")
    run = _run(repo, env, "--", "git", "checkout", "-q", "-b", "topic")
    assert run.returncode == 0
    assert len(_pooled(repo, env)) == 1
    # the user can check the branch out: no worktree holds it
    git("checkout", "-q", "topic", cwd=repo, env=env)


def test_a_worktree_that_cannot_be_brought_back_is_not_used(env, tmp_path) -> None:
    """A populated submodule folder survives read-tree and clean; the check
    finds it and the run gets a fresh worktree."""
    sub = _repo(tmp_path, env, "subrepo")
    repo = _repo(tmp_path, env, "repo")
    git(
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(sub),
        "mod",
        cwd=repo,
        env=env,
    )
    git("commit", "-qm", "submodule", cwd=repo, env=env)
    first = _run(
        repo,
        env,
        "--",
        "sh",
        "-c",
        f"pwd; rmdir mod && cp -r '{sub}' mod && rm -rf mod/.git && echo x > mod/y",
    )
    assert first.returncode == 0, first.err
    [pooled] = _pooled(repo, env)
    second = _run(repo, env, "--", "sh", "-c", "pwd; ls -A mod")
    assert second.returncode == 0, second.err
    assert _where(second) != pooled
    assert Path(second.fields()["stdout"]).read_text().splitlines()[1:] == []
    assert not Path(pooled).exists()


def test_concurrent_runs_never_claim_the_same_worktree(env, tmp_path) -> None:
    """Four pooled worktrees, eight runs at once that wait for each other
    (so they overlap), each writing a marker into its worktree: no
    worktree is used by two of them, and none sees another's marker."""
    repo = _repo(tmp_path, env, "repo")
    warm = [
        subprocess.Popen(
            ["git", "-c", "isopatch.pool=8", "isopatch", "-q", "--", "sh", "-c", "sleep 2"],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        for _ in range(4)
    ]
    assert [w.wait(timeout=300) for w in warm] == [0] * 4
    assert len(_pooled(repo, env)) == 4
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    command = (
        'ls marker-* 2>/dev/null; : > "marker-$RUN"; pwd; : > "$BARRIER/$RUN"; n=0; '
        'while [ "$(ls "$BARRIER" | wc -l)" -lt 8 ]; do '
        "n=$((n+1)); [ $n -lt 2400 ] || exit 99; sleep 0.05; done"
    )
    runs = [
        subprocess.Popen(
            ["git", "-c", "isopatch.pool=8", "isopatch", "--porcelain", "--", "sh", "-c", command],
            cwd=repo,
            env={**env, "BARRIER": str(barrier), "RUN": str(n)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(8)
    ]
    outs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0] * 8, [e.decode() for _, e in outs]
    places = []
    for n, (out, _) in enumerate(outs):
        fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
        seen = Path(fields["stdout"]).read_text().splitlines()
        assert seen == [seen[-1]], f"run {n} saw another run's files: {seen}"
        places.append(seen[-1])
        patch = Path(fields["patch"]).read_text()
        assert patch.count("diff --git") == 1 and f"marker-{n}" in patch
    assert len(set(places)) == 8
    assert len(set(places) & set(_pooled(repo, env))) >= 4


@settings(
    max_examples=int(os.environ.get("ISOPATCH_POOL_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    litter=st.lists(st.sampled_from(sorted(LITTER)), min_size=1, max_size=5),
    litter_base=st.sampled_from(["HEAD", "HEAD~1"]),
    probe_base=st.sampled_from(["HEAD", "HEAD~1"]),
    with_link=st.booleans(),
)
def test_a_claimed_worktree_is_indistinguishable_from_a_fresh_one(
    env, tmp_path, litter, litter_base, probe_base, with_link
) -> None:
    """Random littering, then the probe: the same patch and exit code from
    the claimed worktree as from a fresh one at the same base."""
    n = next(counter)
    repo = _repo(tmp_path / f"ex{n}", env, "repo")
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "dep.js").write_text("dep\n")
    link = ("--link", "node_modules") if with_link else ()
    steps = "; ".join(f"( {LITTER[name].format(n=n)} )" for name in litter)
    first = _run(repo, env, "--base", litter_base, *link, "--", "sh", "-c", f"pwd; {steps}")
    assert "error" not in first.fields(), first.out
    assert _pooled(repo, env) == [_where(first)]
    probe = ("--base", probe_base, "--", "sh", "-c", f"pwd; {PROBE}")
    warm = _run(repo, env, *probe, pool=1)
    assert _where(warm) == _where(first), warm.err
    assert isopatch("prune", cwd=repo, env=env).returncode == 0
    cold = _run(repo, env, *probe, pool=1)  # a fresh one, placed as a pooled one is
    assert _where(cold) != _where(first)
    warm_patch = Path(warm.fields()["patch"]).read_bytes()
    cold_patch = Path(cold.fields()["patch"]).read_bytes()
    assert warm_patch == cold_patch
    assert warm.returncode == cold.returncode
    assert warm.fields()["base"] == cold.fields()["base"]


@pytest.mark.parametrize("pointer", ["commondir", "gitdir"])
def test_a_worktree_whose_private_folder_leads_elsewhere_is_not_used(
    env, tmp_path, pointer
) -> None:
    """``commondir`` and ``gitdir`` in the private folder say where git
    finds the repository (its configuration, which names programs) and the
    worktree.  A run puts back what its command rewrote; a process the
    command left behind can rewrite them later, while the worktree waits in
    the pool: the claim removes such a worktree before any git runs there,
    even when the pointer leads to a copy of the repository that git would
    accept."""
    repo = _repo(tmp_path, env, "repo")
    first = _run(repo, env, "--", "pwd")
    assert first.returncode == 0, first.err
    [admin] = admin_dirs(repo, env)
    copy = tmp_path / "copy"
    shutil.copytree(repo / ".git", copy, ignore=shutil.ignore_patterns("worktrees"))
    target = copy if pointer == "commondir" else copy / "elsewhere" / ".git"
    (admin / pointer).write_text(f"{target}\n")  # as a process left behind would
    second = _run(repo, env, "--", "sh", "-c", "pwd; ls -A")
    assert second.returncode == 0, second.err
    assert _where(second) != _where(first)
    seen = Path(second.fields()["stdout"]).read_text().splitlines()[1:]
    assert sorted(seen) == sorted(p.name for p in repo.iterdir())


def test_a_sandboxed_run_leaves_the_pool_alone(env, tmp_path) -> None:
    """``--sandbox`` goes over a base tree: it neither claims the pooled
    worktree nor gives one back; the pool serves unconfined runs."""
    repo = _repo(tmp_path, env, "repo")
    first = _run(repo, env, "--", "pwd")
    assert first.returncode == 0, first.err
    assert _pooled(repo, env) == [_where(first)]
    outside = repo / "a.txt"
    command = f"pwd; echo inside > made.txt; echo x >> '{outside}' || echo denied"
    second = _run(repo, env, "--sandbox", "--", "sh", "-c", command)
    assert second.returncode == 0, second.err
    assert _where(second) != _where(first)
    # the write outside lands in a copy-on-write layer, discarded and named
    assert Path(second.fields()["stdout"]).read_text().splitlines()[1:] == []
    assert f"outside-write {outside}" in second.out.splitlines()
    assert outside.read_text() == "alpha 2\n"
    assert b"+++ b/made.txt" in Path(second.fields()["patch"]).read_bytes()
    assert _pooled(repo, env) == [_where(first)]
    assert len(base_trees(repo, env)) == 1


@pytest.mark.hostile
def test_an_ignored_gitattributes_converts_the_untouched_files_of_a_pooled_worktree(
    env, make_repo
) -> None:
    """A ``.gitattributes`` the command writes and ignores applies all the
    same: in a warm worktree (its index not racily clean), the untouched
    CRLF file ``text`` now normalises is in the patch, as in a fresh one;
    the same for one in a folder of tracked files."""
    repo = make_repo({"crlf.txt": b"one\r\ntwo\r\n", "a.txt": "a\n", "s/crlf.txt": b"x\r\n"})
    assert _run(repo, env, "--no-sandbox", "--", "true").returncode == 0
    time.sleep(1.1)  # the pooled worktree's index is older than its files
    script = "echo '*.txt text' > .gitattributes && echo .gitattributes >> .gitignore"
    run = _run(repo, env, "--no-sandbox", "--", "sh", "-c", script)
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"diff --git a/crlf.txt b/crlf.txt" in patch, patch
    # the same in a folder of tracked files, the worktree warm again
    time.sleep(1.1)
    run = _run(repo, env, "--no-sandbox", "--", "sh", "-c", script.replace("> .", "> s/."))
    assert run.returncode == 0, run.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert b"diff --git a/s/crlf.txt b/s/crlf.txt" in patch, patch
    assert b"diff --git a/crlf.txt" not in patch, patch


def test_a_pooled_worktree_over_its_own_attributes_file_gives_what_a_fresh_one_does(
    env, make_repo
) -> None:
    """A relative ``core.attributesFile`` names a file git reads from the
    top of the worktree: a fresh one (``git worktree add``) has not written
    it when it checks out and converts nothing by it; a pooled worktree
    brought to another commit converts what it writes by the rules of the
    commit it held, which its check then finds differing from the commit:
    it is not used.  Runs at each commit see what fresh ones do."""
    repo = make_repo({"a.txt": "one\n", "attributes": "*.txt text eol=crlf\n"})
    git("config", "core.attributesFile", "attributes", cwd=repo, env=env)
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "attributes").write_text("")
    git("commit", "-q", "-am", "no conversion", cwd=repo, env=env)
    for base in ("main~", "main", "main~"):
        run = _run(repo, env, "--base", base, "--", "sh", "-c", "cat a.txt; echo x >> a.txt")
        assert run.returncode == 0, run.err
        assert b"\r" not in Path(run.fields()["stdout"]).read_bytes(), base
        assert b"\r" not in Path(run.fields()["patch"]).read_bytes(), base
