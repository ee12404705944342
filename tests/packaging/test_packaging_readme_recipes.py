"""The README's recipes run as printed (issue 34: "Keep checking that every
command in the README runs"): the preview lines, ``--apply``, the git
pre-commit hook, the pre-commit framework's configuration, the husky hook,
the CI step and the Python API, each for real on a test repository with
the real tools (ruff, pre-commit, prettier through npm).  The agents'
recipes (the skill's copy command, the parallel candidates) run in
``test_packaging_agent_skill.py``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from node_helpers import NODE_FIXTURE
from repo_helpers import git, write_tree

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

UNFORMATTED = "def f( a,b ):\n    return {'x':a,'y':b}\n"
FORMATTED = 'def f(a, b):\n    return {"x": a, "y": b}\n'
UNFORMATTED_JS = "const a = {b:1}\n"
PRETTIER_JS = "const a = { b: 1 };\n"
#: Lines the formatters leave as they are, between a fix at the top and an
#: unstaged edit at the end: beyond a hunk's three lines of context.
#: (Within them, the pre-commit framework rolls the fix back, and
#: ``--staged --apply`` refuses, as both say.)
KEPT_PY = "\n\n" + "".join(f"v{n} = {n}\n" for n in range(8))  # after a def: two blank lines
KEPT_JS = "".join(f"const v{n} = {n};\n" for n in range(8))


def _recipe(heading: str, language: str, containing: str = "") -> str:
    """The fenced ``language`` block under the README heading ``heading``
    (up to the next heading) that holds ``containing``."""
    section = re.split(r"\n##+ ", README.split(f"\n### {heading}\n")[1])[0]
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    (block,) = [b for b in blocks if containing in b]
    return block


def _bash(script: str, repo: Path, env, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def _commit(repo: Path, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "commit", "-q", "-m", "with the hook"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _partly_staged(repo: Path, env, name: str, bad: str) -> str:
    """``name`` staged unformatted at its top, then an unstaged line added
    at its end, far below: returns the rest of the file after the fix."""
    python = name.endswith(".py")
    kept = KEPT_PY if python else KEPT_JS
    (repo / name).write_text(bad + kept)
    git("add", name, cwd=repo, env=env)
    extra = "z = [1]\n" if python else "let z = [1];\n"
    (repo / name).write_text(bad + kept + extra)
    return kept + extra


def test_the_preview_recipes(env, make_repo, prettier_node_modules: Path) -> None:
    block = _recipe("Preview a change", "sh")
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": (NODE_FIXTURE / "package.json").read_bytes(),
            "src/index.js": UNFORMATTED_JS,
            "app.py": UNFORMATTED,
        }
    )
    shutil.copytree(prettier_node_modules, repo / "node_modules", symlinks=True)
    (repo / "notes.txt").write_text("an uncommitted file\n")
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) == 4, lines
    for line in lines:
        before = git("status", "--porcelain", cwd=repo, env=env)
        done = _bash(line, repo, env)
        if "| git apply" in line:  # the one that applies
            assert (repo / "app.py").read_text() == FORMATTED
            git("checkout", "--", "app.py", cwd=repo, env=env)
        else:
            assert git("status", "--porcelain", cwd=repo, env=env) == before, line
            assert "1 file changed" in done.stderr, (line, done.stderr)


def test_the_apply_recipe(env, make_repo) -> None:
    line = _recipe("Bring it home: `--apply`", "sh").strip()
    repo = make_repo({"app.py": UNFORMATTED})
    _bash(line, repo, env)
    assert (repo / "app.py").read_text() == FORMATTED


def test_the_git_hook_recipe_commits_the_fix_and_keeps_unstaged_edits(env, make_repo) -> None:
    hook = _recipe("A git pre-commit hook", "sh", "#!/bin/sh")
    repo = make_repo({"app.py": "x = 1\n", "other.py": "y = 2\n"})
    (repo / ".git" / "hooks" / "pre-commit").write_text(hook)
    (repo / ".git" / "hooks" / "pre-commit").chmod(0o755)
    extra = _partly_staged(repo, env, "app.py", UNFORMATTED)
    (repo / "other.py").write_text("y=[ 2 ]\n")  # not staged: neither fixed nor committed
    done = _commit(repo, env)
    assert done.returncode == 0, done.stderr
    assert git("show", "HEAD:app.py", cwd=repo, env=env).decode() == FORMATTED + KEPT_PY
    assert (repo / "app.py").read_text() == FORMATTED + extra
    assert git("show", "HEAD:other.py", cwd=repo, env=env) == b"y = 2\n"
    assert (repo / "other.py").read_text() == "y=[ 2 ]\n"


@pytest.mark.needs("pre-commit")
def test_the_pre_commit_framework_recipe(env, make_repo) -> None:
    """The fix lands in the work tree beside the unstaged edit, the index
    as staged: pre-commit stops the commit, and the staged fix commits."""
    config = _recipe("The pre-commit framework", "yaml")
    repo = make_repo({".pre-commit-config.yaml": config, "app.py": "x = 1\n"})
    installed = subprocess.run(
        ["pre-commit", "install"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    extra = _partly_staged(repo, env, "app.py", UNFORMATTED)
    done = _commit(repo, env)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "files were modified" in out, out
    assert git("show", ":app.py", cwd=repo, env=env).decode() == UNFORMATTED + KEPT_PY
    assert (repo / "app.py").read_text() == FORMATTED + extra
    git("add", "app.py", cwd=repo, env=env)
    done = _commit(repo, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git("show", "HEAD:app.py", cwd=repo, env=env).decode() == FORMATTED + extra


@pytest.mark.needs("pre-commit")
def test_the_pre_commit_framework_recipe_beside_an_unstaged_edit_in_its_way(env, make_repo) -> None:
    """An unstaged edit next to the fix: pre-commit rolls the fix back and
    puts the edit back, the index as staged (a hook that wrote the index
    made pre-commit fail to put the edit back)."""
    config = _recipe("The pre-commit framework", "yaml")
    repo = make_repo({".pre-commit-config.yaml": config, "app.py": "x = 1\n"})
    installed = subprocess.run(
        ["pre-commit", "install"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    (repo / "app.py").write_text('x = {  "a":1 }\n')
    git("add", "app.py", cwd=repo, env=env)
    (repo / "app.py").write_text('x = {  "a":1 }\n# unstaged\n')
    done = _commit(repo, env)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "An unexpected error" not in done.stdout + done.stderr
    assert git("show", ":app.py", cwd=repo, env=env).decode() == 'x = {  "a":1 }\n'
    assert (repo / "app.py").read_text() == 'x = {  "a":1 }\n# unstaged\n'


#: A pre-commit configuration that runs ruff format on what it is given.
RUFF_FORMAT_HOOK = """repos:
  - repo: local
    hooks:
      - id: ruff-format
        name: ruff format
        entry: ruff format
        language: system
        types: [python]
"""


@pytest.mark.needs("pre-commit")
def test_the_whole_framework_recipe_checks_what_is_staged(env, make_repo) -> None:
    """``--staged --exit-code -- pre-commit run``: pre-commit finds the
    staged files in the worktree and fails on one that needs a fix; the
    unstaged work is not what it checks."""
    line = _recipe("The pre-commit framework", "sh", "pre-commit run").strip()
    repo = make_repo({".pre-commit-config.yaml": RUFF_FORMAT_HOOK, "app.py": "x = 1\n"})
    _partly_staged(repo, env, "app.py", UNFORMATTED)
    done = _bash(line, repo, env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ruff format" in done.stdout and "Failed" in done.stdout, done.stdout
    git("add", "app.py", cwd=repo, env=env)
    git("commit", "-q", "-m", "as it was", cwd=repo, env=env)
    (repo / "app.py").write_text(UNFORMATTED)  # unstaged: not checked
    (repo / "other.py").write_text("y = 2\n")
    git("add", "other.py", cwd=repo, env=env)
    done = _bash(line, repo, env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.needs("nodejs", "npm")
def test_the_husky_recipe(env, make_repo, prettier_node_modules: Path) -> None:
    """husky 9 points ``core.hooksPath`` at ``.husky/_``, whose hooks run
    ``.husky/<hook>`` with ``sh``: the same here, with the README's line
    as ``.husky/pre-commit``."""
    line = _recipe("husky and lint-staged", "sh", "xargs")
    repo = make_repo(
        {
            ".gitignore": "node_modules/\n",
            "package.json": (NODE_FIXTURE / "package.json").read_bytes(),
            "src/index.js": "const a = 1;\n",
        }
    )
    shutil.copytree(prettier_node_modules, repo / "node_modules", symlinks=True)
    write_tree(
        repo,
        {
            ".husky/pre-commit": line,
            ".husky/_/pre-commit": '#!/bin/sh\nexec sh "$(dirname "$0")/../pre-commit" "$@"\n',
        },
    )
    (repo / ".husky" / "_" / "pre-commit").chmod(0o755)
    git("config", "core.hooksPath", ".husky/_", cwd=repo, env=env)
    git("add", ".husky", cwd=repo, env=env)
    git("commit", "-q", "--no-verify", "-m", "husky", cwd=repo, env=env)
    extra = _partly_staged(repo, env, "src/index.js", UNFORMATTED_JS)
    quiet = {**env, "npm_config_update_notifier": "false"}
    done = _commit(repo, quiet)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git("show", "HEAD:src/index.js", cwd=repo, env=env).decode() == PRETTIER_JS + KEPT_JS
    assert (repo / "src" / "index.js").read_text() == PRETTIER_JS + extra


def test_the_lint_staged_configuration_names_relative_paths() -> None:
    """lint-staged hands a task absolute paths unless ``--relative``: into
    the user's checkout, where the sandbox discards the writes; the README
    says so beside its configuration, which is valid JSON."""
    section = re.split(r"\n##+ ", README.split("\n### husky and lint-staged\n")[1])[0]
    assert "lint-staged --relative" in section
    config = json.loads(_recipe("husky and lint-staged", "json"))
    (task,) = config["lint-staged"].values()
    assert task.startswith("git isopatch --staged --apply -q ")


def test_the_ci_step(env, make_repo, tmp_path: Path) -> None:
    line = _recipe("A CI step", "sh").strip()
    repo = make_repo({"app.py": UNFORMATTED})
    done = _bash(line, repo, env, check=False)
    assert done.returncode == 1, done.stderr  # formatting needed
    assert "1 file changed" in done.stderr
    assert git("status", "--porcelain", cwd=repo, env=env) == b"?? format.patch\n"
    git("apply", "format.patch", cwd=repo, env=env)
    assert (repo / "app.py").read_text() == FORMATTED
    (repo / "format.patch").unlink()
    git("commit", "-q", "-am", "formatted", cwd=repo, env=env)
    assert _bash(line, repo, env, check=False).returncode == 0  # nothing to do


def test_the_python_api_recipe(env, make_repo) -> None:
    code = _recipe("Python API", "python")
    repo = make_repo({"app.py": UNFORMATTED})
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    patch, exit_code, files = done.stdout.splitlines()[-1].split()  # after ruff's own line
    assert (exit_code, files) == ("0", "1") and Path(patch).is_file()


def test_the_mcp_registration_is_valid_json() -> None:
    registration = json.loads(_recipe("Agents: `--json`, the skill, MCP", "json"))
    assert registration["mcpServers"]["git-isopatch"] == {
        "command": "git-isopatch",
        "args": ["mcp"],
    }
