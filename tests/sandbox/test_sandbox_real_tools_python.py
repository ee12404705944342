"""Python's real tools under the sandbox (issue 19, "Real tools"): ruff,
black with its worker processes, and pre-commit with a local hook
repository and a warm cache each give byte for byte the patch they give
unconfined, and the sandboxed run leaves the user's repository and
``$HOME`` as they were (:mod:`real_tools_helpers`).

black and pre-commit come with the test extra (``tests/packages.py``:
``TEST_EXTRA``); ruff too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from real_tools_helpers import quiet_by_default, sandboxed_and_unconfined
from repo_helpers import BIN_DIR, apply_to_clean_checkout, git, isopatch

UNFORMATTED = {
    "app.py": "def f( a,b ):\n    return {'x':a,'y':b}\n",
    "pkg/__init__.py": "import os, sys\nx=[1,2,\n3]\n",
    "pkg/one.py": "class A :\n  def m(self) : return  1\n",
    "pkg/two.py": "y = (  1+\n 2 )\nprint( 'two' )\n",
}
BLACK = {
    "app.py": 'def f(a, b):\n    return {"x": a, "y": b}\n',
    "pkg/__init__.py": "import os, sys\n\nx = [1, 2, 3]\n",
    "pkg/one.py": "class A:\n    def m(self):\n        return 1\n",
    "pkg/two.py": 'y = 1 + 2\nprint("two")\n',
}


def _formatted(repo: Path, patch_base: str, patch: bytes, tmp_path: Path, env) -> dict:
    (tmp_path / "tool.patch").write_bytes(patch)
    checkout = apply_to_clean_checkout(
        repo, patch_base, tmp_path / "tool.patch", tmp_path / "checkout", env
    )
    return {name: (checkout / name).read_text() for name in UNFORMATTED}


def test_ruff_format(env, make_repo, no_leftovers) -> None:
    assert (BIN_DIR / "ruff").exists(), "ruff comes with the test extra"
    repo = make_repo(UNFORMATTED)
    pair = sandboxed_and_unconfined(repo, ["ruff", "format", "."], env)
    patch = pair.same_patch()
    assert patch.count(b"diff --git") == 4


def test_ruff_check_fix(env, make_repo, no_leftovers) -> None:
    """``--fix`` rewrites imports (unused ones removed, the rest sorted) and
    writes its cache (``.ruff_cache``, ignored by its own ``.gitignore``)."""
    repo = make_repo(
        {
            "pyproject.toml": '[tool.ruff.lint]\nselect = ["F401", "I"]\n',
            "mod.py": "import sys\nimport os\nimport json\n\nprint(os.sep, json)\n",
        }
    )
    pair = sandboxed_and_unconfined(repo, ["ruff", "check", "--fix", "."], env)
    patch = pair.same_patch()
    assert b"-import sys\n-import os\n import json\n+import os\n" in patch, patch


#: Runs black, saying on stderr whether its process pool could be made:
#: black falls back to one thread, silently, where it cannot (semaphores in
#: ``/dev/shm``), and that is what this catches.
BLACK_WORKERS = textwrap.dedent(
    """\
    import sys
    from concurrent.futures import process

    made = process.ProcessPoolExecutor.__init__

    def recorded(self, *args, **kwargs):
        made(self, *args, **kwargs)
        print(f"process pool of {self._max_workers} workers", file=sys.stderr)

    process.ProcessPoolExecutor.__init__ = recorded
    from black import patched_main

    sys.argv[0] = "black"
    sys.exit(patched_main())
    """
)


@pytest.mark.needs("black")
def test_black_with_its_worker_processes(env, make_repo, tmp_path: Path, no_leftovers) -> None:
    """Four files, two workers: black formats them in a process pool (its
    cache goes to ``~/.cache/black``), in the sandbox as unconfined."""
    repo = make_repo(UNFORMATTED)
    script = tmp_path / "black_workers.py"
    script.write_text(BLACK_WORKERS)
    command = [sys.executable, script, "--workers", "2", "."]
    pair = sandboxed_and_unconfined(repo, command, env)
    patch = pair.same_patch()
    for mode, run in (("sandboxed", pair.sandboxed), ("unconfined", pair.unconfined)):
        stderr = pair.output(run, "stderr")
        assert "process pool of 2 workers" in stderr, f"{mode}: black fell back to one thread"
        assert "4 files reformatted" in stderr, stderr
    assert _formatted(repo, pair.sandboxed.fields()["base"], patch, tmp_path, env) == BLACK


@pytest.mark.needs("black")
def test_black_is_quiet_about_its_cache(env, make_repo, no_leftovers) -> None:
    """black writes its cache on every run (``$XDG_CACHE_HOME/black``):
    one line names the folder, never a warning, and ``-q`` says nothing;
    the porcelain lists every path."""
    repo = make_repo(UNFORMATTED)
    line = quiet_by_default(repo, ["black", "-q", "."], env)
    assert line.endswith(
        "written to caches and temporary folders: " + env["XDG_CACHE_HOME"] + "/black"
    ), line
    count = int(line.split()[2])
    record = isopatch("--porcelain", "--no-cache", "--", "black", "-q", ".", cwd=repo, env=env)
    written = [x for x in record.out.splitlines() if x.startswith("outside-write ")]
    assert len(written) == count and all("/xdg-cache/black" in x for x in written), record.out
    assert "isopatch:" not in record.err and "warning:" not in record.err, record.err


def test_a_linter_finding_issues_gets_no_network_hint(env, make_repo) -> None:
    """ruff's exit 1 says "issues found": the sandbox took nothing from it."""
    repo = make_repo({"mod.py": "import os\n"})
    run = isopatch("--", "ruff", "check", "--no-cache", "--select", "F401", ".", cwd=repo, env=env)
    assert run.returncode == 1, run.err
    assert "hint:" not in run.err.replace("hint: to apply it", ""), run.err


def test_pip_without_network_gets_the_network_hint(env, make_repo, tmp_path: Path) -> None:
    """pip asks the index (no retry, one second): the sandbox's network
    refuses it, and the hint names ``--allow-network``."""
    repo = make_repo()
    command = [sys.executable, "-m", "pip", "download", "--retries", "0", "--timeout", "1",
               "--no-deps", "-d", str(tmp_path / "d"), "isopatch-no-such-package"]  # fmt: skip
    run = isopatch("--", *command, cwd=repo, env=env, timeout=120)
    assert run.returncode == 1, run.err
    assert "hint: the command failed after trying the network" in run.err, run.err
    assert "--allow-network keeps the network" in run.err, run.err


HOOK = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    # strips trailing blanks; exits 1 when it changed a file, as fixers do
    import sys

    changed = 0
    for name in sys.argv[1:]:
        with open(name, "rb") as handle:
            data = handle.read()
        fixed = b"\\n".join(line.rstrip() for line in data.split(b"\\n"))
        if fixed != data:
            with open(name, "wb") as handle:
                handle.write(fixed)
            changed = 1
    sys.exit(changed)
    """
)


def _hook_repository(tmp_path: Path, env) -> tuple[Path, str]:
    """A local git repository of pre-commit hooks (one ``script`` hook);
    returns it and its commit id."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / ".pre-commit-hooks.yaml").write_text(
        "- id: strip-blanks\n  name: strip blanks\n  entry: strip_blanks.py\n"
        "  language: script\n  files: \\.txt$\n"
    )
    (hooks / "strip_blanks.py").write_text(HOOK)
    (hooks / "strip_blanks.py").chmod(0o755)
    git("init", "-q", "-b", "main", cwd=hooks, env=env)
    git("add", "-A", cwd=hooks, env=env)
    git("commit", "-q", "-m", "hooks", cwd=hooks, env=env)
    return hooks, git("rev-parse", "HEAD", cwd=hooks, env=env).decode().strip()


@pytest.mark.needs("pre-commit")
def test_pre_commit_with_a_local_hook_repository_and_a_warm_cache(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    """The cache (``~/.cache/pre-commit``: the hook repository's clone and
    ``db.db``, which every run writes) is warmed unconfined, outside
    git-isopatch; the sandboxed run then works from it."""
    env = {k: v for k, v in env.items() if k not in ("XDG_CACHE_HOME", "PRE_COMMIT_HOME")}
    # a login session's runtime folder: git-isopatch keeps its sandbox
    # checks there, not in the ~/.cache whose every file is compared
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env["XDG_RUNTIME_DIR"] = str(runtime)
    hooks, rev = _hook_repository(tmp_path, env)
    config = f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: strip-blanks\n"
    repo = make_repo(
        {
            ".pre-commit-config.yaml": config,
            "notes.txt": "one  \ntwo\t\nthree\n",
            "docs/more.txt": "four \n",
            "clean.txt": "five\n",
        }
    )
    warm = subprocess.run(
        ["pre-commit", "install-hooks"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert warm.returncode == 0, warm.stdout + warm.stderr
    cache = Path(env["HOME"]) / ".cache" / "pre-commit"
    assert (cache / "db.db").is_file(), sorted(os.listdir(cache))
    pair = sandboxed_and_unconfined(repo, ["pre-commit", "run", "--all-files"], env)
    patch = pair.same_patch(exit_code=1)  # pre-commit's exit when a hook changed files
    assert patch.count(b"diff --git") == 2, patch
    assert "Failed" in pair.output(pair.sandboxed, "stdout")
    # every run writes db.db and its log: one line, no warning, no network hint
    line = quiet_by_default(repo, ["pre-commit", "run", "--all-files"], env, exit_code=1)
    assert line.endswith(": ~/.cache/pre-commit"), line


def test_the_test_extra_brings_the_tools() -> None:
    """What ``needs`` skips without (``TEST_EXTRA``) is in the test extra,
    which ``.ci/run`` installs."""
    import tomllib

    from packages import TEST_EXTRA

    root = Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    names = {
        req.split(">")[0].split("=")[0].strip() for req in extra["optional-dependencies"]["test"]
    }
    assert set(TEST_EXTRA) <= names, names
    assert "pip install -q -e '.[test]'" in (root / ".ci" / "run").read_text()
