"""Real formatters end to end (issue 5): a Node project formatted by
prettier through ``npm run lint:fix`` with ``--link node_modules``, a Python
project formatted by ruff, and ruff on top of unstaged edits with
``--include-uncommitted``.

The Node project is ``tests/fixtures/node-prettier`` (``package.json`` and
``package-lock.json`` pinning prettier); ``npm ci`` installs it once per test
session from the npm registry.  ``.ci/run`` installs node and npm where they
are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import BIN_DIR, apply_to_clean_checkout, git, isopatch, repo_state, write_tree

NODE_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "node-prettier"

UNFORMATTED_JS = "const a = {b:1,c:[1,2,3]}\nfunction f ( x ){return x*2}\nexport default   f\n"
PRETTIER_JS = (
    "const a = { b: 1, c: [1, 2, 3] };\nfunction f(x) {\n  return x * 2;\n}\nexport default f;\n"
)

UNFORMATTED_PY = "def f( a,b ):\n    return {'x':a,'y':b}\nx=[1,2,\n3]\n"
RUFF_PY = 'def f(a, b):\n    return {"x": a, "y": b}\n\n\nx = [1, 2, 3]\n'


@pytest.fixture
def node_project(make_repo, prettier_node_modules: Path) -> Path:
    """A committed Node project with an unformatted source file and its
    (ignored) ``node_modules`` installed."""
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": (NODE_FIXTURE / "package.json").read_bytes(),
            "package-lock.json": (NODE_FIXTURE / "package-lock.json").read_bytes(),
            "src/index.js": UNFORMATTED_JS,
        }
    )
    shutil.copytree(prettier_node_modules, repo / "node_modules", symlinks=True)
    return repo


def _npm_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "npm_config_update_notifier": "false", "npm_config_fund": "false"}


@pytest.mark.needs("nodejs", "npm")
def test_npm_lint_fix_needs_node_modules(env, node_project: Path) -> None:
    run = isopatch(
        "--porcelain", "--", "npm", "run", "lint:fix", cwd=node_project, env=_npm_env(env)
    )
    assert run.fields()["exit"] == "127", "prettier is not found without node_modules"


SANDBOX = pytest.mark.parametrize("options", [(), ("--sandbox",)], ids=["plain", "sandbox"])


@pytest.mark.needs("nodejs", "npm")
@SANDBOX
def test_npm_lint_fix_with_linked_node_modules(
    env, node_project: Path, tmp_path: Path, no_leftovers, options: tuple[str, ...]
) -> None:
    """Under ``--sandbox`` too: the linked ``node_modules`` is read-only
    then, and npm's own writes to ``~/.npm`` fail without stopping it."""
    before = repo_state(node_project, env)
    run = isopatch(
        "--porcelain",
        *options,
        "--link",
        "node_modules",
        "--",
        "npm",
        "run",
        "lint:fix",
        cwd=node_project,
        env=_npm_env(env),
    )
    assert run.returncode == 0, run.err + Path(run.fields()["stderr"]).read_text()
    assert repo_state(node_project, env) == before
    patch = Path(run.fields()["patch"])
    assert b"node_modules" not in patch.read_bytes()
    assert run.fields()["files"] == "1"
    checkout = apply_to_clean_checkout(
        node_project, run.fields()["base"], patch, tmp_path / "checkout", env
    )
    assert (checkout / "src/index.js").read_text() == PRETTIER_JS


@SANDBOX
def test_ruff_format_python_project(
    env, make_repo, tmp_path: Path, no_leftovers, options: tuple[str, ...]
) -> None:
    assert (BIN_DIR / "ruff").exists(), "ruff comes with the test extra"
    repo = make_repo({"app.py": UNFORMATTED_PY, "pkg/mod.py": RUFF_PY})
    before = repo_state(repo, env)
    run = isopatch("--porcelain", *options, "--", "ruff", "format", ".", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert run.fields()["files"] == "1"
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "checkout", env
    )
    assert (checkout / "app.py").read_text() == RUFF_PY
    assert (checkout / "pkg/mod.py").read_text() == RUFF_PY


def test_ruff_format_on_top_of_unstaged_edits(env, make_repo, no_leftovers) -> None:
    """The user un-formats a file without committing and adds a new one;
    the patch, applied to their work tree, formats both."""
    repo = make_repo({"app.py": RUFF_PY, "other.py": RUFF_PY})
    write_tree(repo, {"app.py": UNFORMATTED_PY, "new.py": UNFORMATTED_PY})
    before = repo_state(repo, env)

    plain = isopatch("--porcelain", "--", "ruff", "format", ".", cwd=repo, env=env)
    assert plain.fields()["files"] == "0", "HEAD is formatted already"

    run = isopatch(
        "--porcelain", "--include-uncommitted", "--", "ruff", "format", ".", cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    assert repo_state(repo, env) == before
    assert run.fields()["files"] == "2"
    git("apply", "--binary", run.fields()["patch"], cwd=repo, env=env)
    for name in ("app.py", "other.py", "new.py"):
        assert (repo / name).read_text() == RUFF_PY, name
    assert git("status", "--porcelain", cwd=repo, env=env) == b"?? new.py\n"


@pytest.mark.needs("nodejs", "npm")
def test_npm_workspace_packages_resolve_through_a_link_to_the_checkout(
    env, make_repo, no_leftovers
) -> None:
    """npm workspaces put relative links in node_modules (``a ->
    ../packages/a``).  Through ``--link node_modules`` they resolve against
    the real node_modules, in the user's checkout: the command would load
    (and a build would write) the checkout's workspace packages.  A
    ``--copy`` keeps the links relative to the worktree's own packages.  The
    README and the manual page say so; this is what they rest on."""
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": '{"name": "ws", "private": true, "workspaces": ["packages/*"]}\n',
            "packages/a/package.json": '{"name": "a", "version": "1.0.0", "main": "index.js"}\n',
            "packages/a/index.js": "module.exports = __dirname;\n",
            "packages/b/package.json": '{"name": "b", "version": "1.0.0", '
            '"dependencies": {"a": "1.0.0"}}\n',
            "packages/b/index.js": 'console.log(require("a"));\n',
        }
    )
    subprocess.run(
        ["npm", "install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=repo,
        env=_npm_env(env),
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    assert os.readlink(repo / "node_modules" / "a") == "../packages/a"
    command = ("--", "node", "packages/b/index.js")
    linked = isopatch("--porcelain", "--link", "node_modules", *command, cwd=repo, env=env)
    copied = isopatch("--porcelain", "--copy", "node_modules", *command, cwd=repo, env=env)
    for run in (linked, copied):
        assert run.fields()["exit"] == "0", run.err
    loaded_linked = Path(linked.fields()["stdout"]).read_text().strip()
    loaded_copied = Path(copied.fields()["stdout"]).read_text().strip()
    assert loaded_linked == str((repo / "packages" / "a").resolve())
    assert loaded_copied != loaded_linked
    assert loaded_copied.endswith("/packages/a")
    assert not Path(loaded_copied).exists(), "the worktree's own package, gone with it"


def test_a_python_editable_install_in_a_linked_venv_imports_the_checkouts_code(
    env, make_repo, no_leftovers
) -> None:
    """An editable install (``pip install -e .``, ``uv sync``: a ``.pth``
    file naming the checkout's ``src``) in ``.venv`` names an absolute path:
    through ``--link .venv``, and ``--copy .venv`` alike, the command
    imports the user's checkout's package, not the worktree's, so tests run
    there test the checkout's code.  ``PYTHONPATH=src`` puts the worktree's
    first.  The README, the manual page and the skill say so; this is what
    they rest on."""
    repo = make_repo({".gitignore": ".venv/\n", "src/pkg/__init__.py": "WHERE = 'committed'\n"})
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True)
    (site,) = (repo / ".venv" / "lib").glob("python*/site-packages")
    (site / "pkg.pth").write_text(f"{repo / 'src'}\n")  # what the editable install leaves
    change = "echo \"WHERE = 'worktree'\" > src/pkg/__init__.py; "
    show = "import pkg; print(pkg.WHERE)"
    seen = {}
    for how, prefix in (("--link", ""), ("--copy", ""), ("--link", "PYTHONPATH=src ")):
        run = isopatch(
            "--porcelain", how, ".venv", "--",
            "sh", "-c", f"{change}{prefix}.venv/bin/python -c '{show}'", cwd=repo, env=env,
        )  # fmt: skip
        assert run.fields()["exit"] == "0", run.err
        seen[how, prefix] = Path(run.fields()["stdout"]).read_text().strip()
    assert seen == {
        ("--link", ""): "committed",
        ("--copy", ""): "committed",
        ("--link", "PYTHONPATH=src "): "worktree",
    }
