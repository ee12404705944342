"""The sandbox's cache layer (issue 34, "Warm caches, safely";
:mod:`git_isopatch.sandbox.cache_layer`): what a sandboxed command writes
under the user's cache folders is kept for the later sandboxed runs of the
same repository, never in the real home, never seen by another
repository; ``prune`` clears it, configuration turns it off, a bound
clears it, two runs at once both succeed, and what a command left there
is read and removed as hostile input.  With the real bubblewrap, on real
repositories."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from repo_helpers import BIN_DIR, ISOPATCH, isopatch
from sandbox_helpers import run_as_nobody

from git_isopatch.sandbox import cache_layer

WRITE = "mkdir -p ~/.cache/tool && printf warm > ~/.cache/tool/db"
READ = "cat ~/.cache/tool/db 2>/dev/null || printf cold"


@pytest.fixture
def cache(env) -> Path:
    """The user's XDG cache folder, ``~/.cache``, as a user has one (the
    ``env`` fixture's is elsewhere)."""
    folder = Path(env["HOME"]) / ".cache"
    folder.mkdir()
    (folder / "theirs").write_text("the user's own\n")
    env["XDG_CACHE_HOME"] = str(folder)
    return folder


def _sh(repo: Path, env, script: str, *options: str, git_options: tuple[str, ...] = ()):
    run = isopatch(
        "--porcelain", "--sandbox", *options, "--", "sh", "-c", script,
        cwd=repo, env=env, git_options=git_options,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    return run


def _stdout(run) -> str:
    return Path(run.fields()["stdout"]).read_text()


def _tree(folder: Path) -> dict[str, str]:
    """What ``folder`` holds, but the sandbox's availability answers
    (git-isopatch's own, kept in the XDG cache folder)."""
    return {
        str(p.relative_to(folder)): p.read_text() if p.is_file() else ""
        for p in sorted(folder.rglob("*"))
        if p.relative_to(folder).parts[0] != "git-isopatch"
    }


def _layer_root(repo: Path) -> Path:
    return Path(cache_layer.cache_root(str(repo / ".git")))


def test_the_next_run_sees_what_the_first_wrote_the_home_does_not(env, make_repo, cache) -> None:
    repo = make_repo()
    before = _tree(cache)
    first = _sh(repo, env, WRITE)
    assert "outside-write" not in first.out, first.out  # kept, not discarded
    assert _stdout(_sh(repo, env, READ)) == "warm"
    assert _tree(cache) == before
    other = make_repo(name="other")
    assert _stdout(_sh(other, env, READ)) == "cold"


def test_a_cache_folder_s_layer_keeps_its_name_across_versions(env, make_repo, cache) -> None:
    """The layer of a cache folder is named by the start of the SHA-256 of
    its real path, as before: a layer an earlier version kept stays warm."""
    import hashlib

    repo = make_repo()
    _sh(repo, env, WRITE)
    name = hashlib.sha256(os.fsencode(os.path.realpath(cache))).hexdigest()[:16]
    assert (_layer_root(repo) / name / "upper").is_dir()


def test_unconfined_runs_use_the_real_caches(env, make_repo, cache) -> None:
    repo = make_repo()
    _sh(repo, env, WRITE)
    assert _stdout(_sh(repo, env, READ, "--no-sandbox")) == "cold"


@pytest.mark.parametrize(
    "options, git_options",
    [(("--no-cache",), ()), ((), ("-c", "isopatch.cache=false"))],
    ids=["option", "configuration"],
)
def test_turned_off_cache_writes_are_discarded(env, make_repo, cache, options, git_options) -> None:
    repo = make_repo()
    first = _sh(repo, env, WRITE, *options, git_options=git_options)
    assert f"outside-write {cache}/tool/db" in first.out, first.out
    assert _stdout(_sh(repo, env, READ, *options, git_options=git_options)) == "cold"
    assert not _layer_root(repo).exists()


def test_a_bad_cache_value_is_fatal(env, make_repo, cache) -> None:
    repo = make_repo()
    for key, value in (("cache", "maybe"), ("cacheLimit", "lots")):
        run = isopatch(
            "--", "true", cwd=repo, env=env, git_options=("-c", f"isopatch.{key}={value}")
        )
        assert run.returncode == 128, run.err
        assert f"fatal: bad config value for 'isopatch.{key}'" in run.err


def test_prune_clears_it(env, make_repo, cache) -> None:
    repo = make_repo()
    _sh(repo, env, WRITE)
    dry = isopatch("prune", "-n", cwd=repo, env=env)
    assert dry.returncode == 0 and ": cache layer" in dry.out, dry.out
    assert _stdout(_sh(repo, env, READ)) == "warm"
    later = isopatch("prune", "--expire", "1.hour.ago", cwd=repo, env=env)
    assert later.returncode == 0 and "cache layer" not in later.out
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0 and ": cache layer" in pruned.out, pruned.out
    assert _stdout(_sh(repo, env, READ)) == "cold"


def test_past_its_bound_it_is_cleared(env, make_repo, cache) -> None:
    repo = make_repo()
    bound = ("-c", "isopatch.cacheLimit=64k")
    _sh(repo, env, WRITE, git_options=bound)
    assert _stdout(_sh(repo, env, READ, git_options=bound)) == "warm"
    big = "head -c 200000 /dev/zero > ~/.cache/tool/big"
    _sh(repo, env, big, git_options=bound)
    assert _stdout(_sh(repo, env, READ, git_options=bound)) == "cold"


def test_two_runs_at_once_both_succeed(env, make_repo, cache, tmp_path: Path) -> None:
    """The first holds the layer; the second, while it runs, has none (its
    cache writes discarded and reported), and both give their patch."""
    repo = make_repo()
    sync = tmp_path / "sync"
    sync.mkdir()
    first_script = f"{WRITE} && echo 1 > one && : > {sync}/started && "
    first_script += f"while [ ! -e {sync}/done ]; do sleep 0.05; done"
    first = subprocess.Popen(
        [ISOPATCH, "--porcelain", "--sandbox", "--allow-write", sync, "--", "sh", "-c",
         first_script],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (sync / "started").exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = _sh(
            repo,
            env,
            f"{READ}; mkdir -p ~/.cache/tool; printf second > ~/.cache/tool/other; echo 2 > two",
        )
        assert _stdout(second) == "cold"
        assert f"outside-write {cache}/tool/other" in second.out, second.out
        assert "path A two" in second.out
    finally:
        (sync / "done").touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err.decode()
    assert b"path A one" in out
    assert _stdout(_sh(repo, env, f"{READ}; cat ~/.cache/tool/other 2>/dev/null; :")) == "warm"


AS_NOBODY = """
home = os.environ["HOME"]
os.makedirs(os.path.join(home, ".cache"))
os.environ["XDG_CACHE_HOME"] = os.path.join(home, ".cache")
def run(script):
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--", "sh", "-c",
         script], cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    records = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines())
    with open(records["stdout"]) as handle:
        return done.returncode, handle.read(), done.stderr.decode()
first = run(sys.argv[1])
second = run(sys.argv[2])
print(json.dumps({"first": first, "second": second,
                  "home": os.listdir(os.path.join(home, ".cache"))}))
"""


def test_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, WRITE, READ) as seen:
        assert seen["first"][0] == 0, seen["first"][2]
        assert seen["second"][:2] == [0, "warm"], seen["second"][2]
        assert set(seen["home"]) <= {"git-isopatch"}  # the sandbox's availability answers


@pytest.mark.hostile
def test_what_cannot_be_measured_is_cleared_nothing_followed(
    env, make_repo, cache, tmp_path: Path
) -> None:
    """Deeper than the walk goes, a FIFO, links out of the layer (to a
    folder of the user's and to a big file, neither counted nor touched):
    the run succeeds, and the layer is cleared after it."""
    repo = make_repo()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine\n")
    bound = ("-c", "isopatch.cacheLimit=1m")
    links = f"{WRITE} && ln -s {victim} ~/.cache/tool/out && ln -s /usr/bin ~/.cache/tool/bin"
    links += " && mkfifo ~/.cache/tool/fifo"
    _sh(repo, env, links, git_options=bound)
    assert _stdout(_sh(repo, env, READ, git_options=bound)) == "warm"  # links not counted
    deep = "cd ~/.cache/tool && i=0; while [ $i -lt 300 ]; do mkdir d && cd d; i=$((i+1)); done"
    _sh(repo, env, deep, git_options=bound)
    assert _stdout(_sh(repo, env, READ, git_options=bound)) == "cold"
    assert _tree(victim) == {"keep": "mine\n"}


@pytest.mark.hostile
def test_prune_removes_what_the_command_left_and_nothing_it_points_to(
    env, make_repo, cache, tmp_path: Path
) -> None:
    repo = make_repo()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine\n")
    plant = f"{WRITE} && ln -s {victim} ~/.cache/tool/out && mkfifo ~/.cache/tool/fifo"
    plant += " && mkdir -p ~/.cache/tool/locked/in && chmod 000 ~/.cache/tool/locked"
    _sh(repo, env, plant)
    pruned = isopatch("prune", "-v", cwd=repo, env=env)
    assert pruned.returncode == 0 and ": cache layer" in pruned.out, pruned.err
    assert not _layer_root(repo).exists()
    assert _tree(victim) == {"keep": "mine\n"}


def test_a_repository_where_no_layer_can_be_kept_runs_without_one(
    env, make_repo, cache, tmp_path: Path
) -> None:
    """A git directory on a file system overlayfs refuses as an upper layer
    (an overlay itself: a container's image, WSL's drives, FUSE) can keep
    no cache layer: the run goes on without it, its cache writes discarded
    and reported, as with ``--no-cache``."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("an overlay mount of the test's own needs root and unshare (util-linux)")
    folders = {name: tmp_path / name for name in ("lower", "upper", "work", "merged")}
    for folder in folders.values():
        folder.mkdir()
    make_repo(name="lower/repo")
    options = ",".join(f"{n}dir={folders[n]}" for n in ("lower", "upper", "work"))
    run = [str(ISOPATCH), "--porcelain", "--sandbox", "--", "sh", "-c", f"{WRITE}; echo n > new"]
    merged = folders["merged"]
    script = f"mount -t overlay overlay -o {options} {merged} && cd {merged}/repo && "
    script += shlex.join(run)
    done = subprocess.run(
        [unshare, "-m", "sh", "-c", script], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "path A new" in done.stdout, done.stdout
    assert f"outside-write {cache}/tool/db" in done.stdout, done.stdout
    assert not (folders["upper"] / "repo" / ".git" / "isopatch" / "caches").exists()


@pytest.mark.hostile
def test_a_cache_folder_holding_the_checkout_gets_no_layer(env, make_repo) -> None:
    """``XDG_CACHE_HOME`` above the checkout: a cache layer there would keep
    the command's writes to the checkout for the next run."""
    repo = make_repo()
    above = {**env, "XDG_CACHE_HOME": str(repo.parent)}
    _sh(repo, above, "echo planted > ../planted; echo x >> README")
    assert _stdout(_sh(repo, above, "cat ../planted 2>/dev/null || printf none")) == "none"


def test_black_is_warm_on_its_second_sandboxed_run(env, make_repo, cache) -> None:
    """black keys its cache by each file's path: the worktree of the next
    run is where the last one was, and its cache layer holds the cache."""
    if not (BIN_DIR / "black").exists():
        pytest.skip("black (the test extra: pip install -e '.[test]') is not installed")
    repo = make_repo({"app.py": "x = 1\n", "pkg/mod.py": "def f():\n    return 2\n"})
    runs = [isopatch("--sandbox", "--", "black", "-v", ".", cwd=repo, env=env) for _ in "12"]
    for run in runs:
        assert run.returncode == 0, run.err
    assert "app.py already well formatted" in runs[0].err, runs[0].err
    assert "app.py wasn't modified on disk since last run" in runs[1].err, runs[1].err
    assert "mod.py wasn't modified on disk since last run" in runs[1].err
    assert not (cache / "black").exists()


def _folders(tmp_path: Path, *names: str) -> list[str]:
    for name in names:
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    return [str(tmp_path / name) for name in names]


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({"XDG_CACHE_HOME": "home/.cache"}, ["home/.cache"]),
        ({"XDG_CACHE_HOME": "home/missing"}, []),  # none to lay over
        ({"XDG_CACHE_HOME": "elsewhere/cache"}, []),  # not copy-on-write
        ({"XDG_CACHE_HOME": "home"}, []),  # the copy-on-write folder itself
        ({"XDG_CACHE_HOME": "home/src"}, []),  # holds the checkout
        ({"XDG_CACHE_HOME": "home/src/app/.cache"}, []),  # in the checkout
        (
            {"XDG_CACHE_HOME": "home/.cache", "PIP_CACHE_DIR": "home/.cache/pip"},
            ["home/.cache"],
        ),
        (
            {"XDG_CACHE_HOME": "home/.cache", "npm_config_cache": "home/.npm"},
            ["home/.cache", "home/.npm"],
        ),
    ],
)
def test_usable_folders(tmp_path: Path, environ, expected) -> None:
    _folders(tmp_path, "home/.cache/pip", "home/.npm", "home/src/app/.cache", "elsewhere/cache")
    absolute = {key: str(tmp_path / value) for key, value in environ.items()}
    found = cache_layer.usable_folders(
        {"HOME": "/nonexistent", **absolute},
        within=[str(tmp_path / "home")],
        apart_from=[str(tmp_path / "home/src/app")],
    )
    assert found == tuple(str(tmp_path / e) for e in expected)


def test_a_cache_folder_with_a_mount_beneath_gets_no_layer(tmp_path: Path) -> None:
    """An overlay cannot take it as its lower layer in the sandbox's user
    namespace: planned on a mount table with one beneath, it has none."""
    from git_isopatch.sandbox.layers import CACHE, Layer
    from git_isopatch.sandbox.namespaces import NamespacePolicy

    home, cache = _folders(tmp_path, "home", "home/.cache")
    kept = Layer(cache, CACHE, str(tmp_path / "kept"))
    policy = NamespacePolicy(writable=(), copy_on_write=(home,), caches=(kept,))
    assert kept in policy.plan(mounts=["/"])
    assert kept not in policy.plan(mounts=["/", f"{cache}/fuse"])
