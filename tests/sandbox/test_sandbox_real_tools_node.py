"""Node's real tools under the sandbox (issue 19, "Real tools"): a local
npm package run through ``npm ci --offline`` and ``npm run``, and through
``npx --offline``, each with a warm ``~/.npm``; prettier through ``--link
node_modules`` with its cache (``node_modules/.cache``, in the user's
checkout).  Each gives byte for byte the patch it gives unconfined, and
the sandboxed run leaves the user's repository and ``$HOME`` as they were
(:mod:`real_tools_helpers`).

The local package is ``tests/fixtures/npm-tidy`` (packed once per session,
no registry); prettier is ``tests/fixtures/node-prettier``, installed once
per session from the npm registry (``npm ci``), as
``test_includes_real_projects.py`` does.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from real_tools_helpers import quiet_by_default, sandboxed_and_unconfined
from repo_helpers import git, isopatch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TIDY = FIXTURES / "npm-tidy"
PRETTIER = FIXTURES / "node-prettier"

pytestmark = pytest.mark.needs("nodejs", "npm")

SOURCES = {
    "src/index.js": "function f() {\n\treturn 1;   \n}\n",
    "src/lib/util.js": "export const x = 2;\t\n",
    "src/clean.js": "export const y = 3;\n",
}


def _quiet(env: Mapping[str, str]) -> dict[str, str]:
    """npm without its notices (update check, funding, audit: the network)."""
    return {
        **env,
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
    }


def _once(shared: Path, name: str, make) -> Path:
    """``shared/name``, made by ``make(target)`` once for the whole session
    (xdist workers share it through a lock file)."""
    target = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "ready").exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            make(target)
            (target / "ready").touch()
    return target


def _npm(args: list[str], cwd: Path, env: Mapping[str, str]) -> None:
    subprocess.run(
        ["npm", *args],
        cwd=cwd,
        env=dict(env),
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )


@pytest.fixture(scope="session")
def tidy_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The local package, ``npm pack``ed once (its own npm cache, no HOME)."""
    shared = tmp_path_factory.getbasetemp().parent
    digest = hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted(TIDY.rglob("*")) if p.is_file())
    ).hexdigest()[:16]

    def pack(target: Path) -> None:
        env = _quiet({**os.environ, "npm_config_cache": str(target / "cache")})
        _npm(["pack", "--pack-destination", str(target), str(TIDY)], target, env)

    return _once(shared, f"npm-tidy-{digest}", pack) / "isopatch-tidy-1.0.0.tgz"


@pytest.fixture
def tidy_project(make_repo, env, tidy_tarball: Path) -> Path:
    """A Node project whose ``tidy`` script runs the local package (a
    ``file:`` dependency on its tarball, committed in ``vendor/``), its
    ``package-lock.json`` committed; installed once unconfined in the
    user's checkout, which leaves ``~/.npm`` warm."""
    package = (
        '{"name": "tidy-app", "version": "1.0.0", "private": true,\n'
        ' "scripts": {"tidy": "isopatch-tidy src"},\n'
        ' "devDependencies": {"isopatch-tidy": "file:vendor/isopatch-tidy-1.0.0.tgz"}}\n'
    )
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": package,
            "vendor/isopatch-tidy-1.0.0.tgz": tidy_tarball.read_bytes(),
            **SOURCES,
        }
    )
    _npm(["install", "--offline"], repo, _quiet(env))
    git("add", "package-lock.json", cwd=repo, env=env)
    git("commit", "-q", "-m", "lock", cwd=repo, env=env)
    assert (Path(env["HOME"]) / ".npm" / "_cacache").is_dir()
    return repo


def _tidied(patch: bytes) -> None:
    assert patch.count(b"diff --git") == 2, patch
    assert b"+  return 1;\n" in patch and b"+export const x = 2;\n" in patch, patch


def test_npm_ci_offline_then_npm_run(env, tidy_project: Path, no_leftovers) -> None:
    """``npm ci --offline`` installs from the warm cache into the worktree
    (``node_modules`` ignored: not in the patch), ``npm run`` runs the
    package's program; npm logs to ``~/.npm/_logs`` on each call."""
    command = ["sh", "-c", "npm ci --offline && npm run tidy"]
    pair = sandboxed_and_unconfined(tidy_project, command, _quiet(env))
    patch = pair.same_patch()
    _tidied(patch)
    assert b"node_modules" not in patch
    assert "tidied src/index.js" in pair.output(pair.sandboxed, "stdout")
    # npm rotates its logs on every call: one line, never a warning
    line = quiet_by_default(tidy_project, command, _quiet(env))
    assert line.endswith(": ~/.npm"), line


def test_npm_without_network_gets_the_network_hint(env, make_repo) -> None:
    """The registry's name cannot be resolved in the sandbox (EAI_AGAIN or
    ENOTFOUND): the hint names ``--allow-network``; a failing npm script
    that never asks the network gets none."""
    repo = make_repo({"package.json": '{"scripts": {"lint": "exit 1"}}\n'})
    asks = ["npm", "view", "left-pad", "version", "--fetch-retries=0"]
    run = isopatch("--", *asks, cwd=repo, env=_quiet(env), timeout=120)
    assert run.returncode != 0, run.err
    assert "hint: the command failed after trying the network" in run.err, run.err
    lint = isopatch("--", "npm", "run", "lint", cwd=repo, env=_quiet(env), timeout=120)
    assert lint.returncode == 1, lint.err
    assert "hint:" not in lint.err, lint.err


def test_npx_offline_with_a_warm_cache(env, tidy_project: Path, tidy_tarball: Path) -> None:
    """``npx`` of a package the project does not install: from its cache in
    ``~/.npm/_npx`` (warmed unconfined first), no network."""
    command = ["npx", "--offline", "--yes", f"--package=file:{tidy_tarball}", "--"]
    warm = subprocess.run(
        [*command, "isopatch-tidy"], cwd=tidy_project, env=_quiet(env), capture_output=True
    )
    assert warm.returncode == 0, warm.stderr
    assert any((Path(env["HOME"]) / ".npm" / "_npx").iterdir())
    pair = sandboxed_and_unconfined(tidy_project, [*command, "isopatch-tidy", "src"], _quiet(env))
    _tidied(pair.same_patch())


UNFORMATTED_JS = "const a = {b:1,c:[1,2,3]}\nfunction f ( x ){return x*2}\nexport default   f\n"


@pytest.fixture(scope="session")
def prettier_node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``npm ci`` of the prettier fixture, once per session (the npm
    registry; the same folder ``test_includes_real_projects.py`` fills)."""
    shared = tmp_path_factory.getbasetemp().parent
    key = hashlib.sha256((PRETTIER / "package-lock.json").read_bytes()).hexdigest()[:16]

    def install(target: Path) -> None:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(PRETTIER / name, target / name)
        env = _quiet({**os.environ, "npm_config_cache": str(shared / "npm-cache")})
        _npm(["ci", "--ignore-scripts"], target, env)

    return _once(shared, f"npm-prettier-real-tools-{key}", install) / "node_modules"


def test_prettier_with_its_cache_through_a_linked_node_modules(
    env, make_repo, prettier_node_modules: Path, no_leftovers
) -> None:
    """prettier's ``--cache`` writes ``node_modules/.cache/prettier``: through
    ``--link node_modules`` that is the user's own ``node_modules``.  In the
    sandbox the write is discarded (the checkout stays as it was);
    unconfined it is real."""
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": (PRETTIER / "package.json").read_bytes(),
            "package-lock.json": (PRETTIER / "package-lock.json").read_bytes(),
            "src/index.js": UNFORMATTED_JS,
            "src/other.js": "let   b=2\n",
        }
    )
    shutil.copytree(prettier_node_modules, repo / "node_modules", symlinks=True)
    command = ["npx", "--offline", "prettier", "--write", "--cache", "src"]
    pair = sandboxed_and_unconfined(repo, command, _quiet(env), options=("--link", "node_modules"))
    patch = pair.same_patch()
    assert patch.count(b"diff --git") == 2 and b"node_modules" not in patch, patch
    assert b"+function f(x) {\n+  return x * 2;\n+}\n" in patch, patch
    assert (repo / "node_modules" / ".cache" / "prettier").is_dir(), "unconfined, it is real"


def test_npm_ci_offline_from_a_warm_registry_cache(
    env, make_repo, prettier_node_modules: Path, no_leftovers
) -> None:
    """prettier's tarball from the npm registry, in ``~/.npm/_cacache`` (the
    session's install left it there): ``npm ci --offline`` installs it in
    the worktree with no network, ``npm run`` formats."""
    shutil.copytree(prettier_node_modules.parent.parent / "npm-cache", Path(env["HOME"]) / ".npm")
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": (PRETTIER / "package.json").read_bytes(),
            "package-lock.json": (PRETTIER / "package-lock.json").read_bytes(),
            "src/index.js": UNFORMATTED_JS,
        }
    )
    command = ["sh", "-c", "npm ci --offline --ignore-scripts && npm run lint:fix"]
    pair = sandboxed_and_unconfined(repo, command, _quiet(env))
    patch = pair.same_patch()
    assert patch.count(b"diff --git") == 1 and b"node_modules" not in patch, patch
    assert b"+function f(x) {\n+  return x * 2;\n+}\n" in patch, patch
