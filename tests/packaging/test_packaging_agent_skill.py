"""The agent skill, ``skills/git-isopatch/SKILL.md`` (design: Command line,
"An agent skill ships with the package"): its front matter is what the
Agent Skills format asks, it is installed with the package as shared data
where the README's copy command finds it, and every command in it runs
against a real repository and does what the text around it says.  The
commands are read from the file itself, so the file cannot drift."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from repo_helpers import git, repo_state

yaml = pytest.importorskip("yaml", reason="needs the Python package 'pyyaml' (the test extra)")

ROOT = Path(__file__).resolve().parents[2]
SKILL = ROOT / "skills" / "git-isopatch" / "SKILL.md"
INSTALLED = "share/git-isopatch/skills/git-isopatch/SKILL.md"

#: A file that ruff formats, formats differently at 60 columns, and fixes
#: (an unused import): three candidates that differ.
SOURCE = (
    "import os\n"
    "def total(first,second):\n"
    "    return {'first': first, 'second': second, 'sum_of_both': first + second}\n"
)


def front_matter(text: str) -> tuple[dict, str]:
    """The YAML front matter of a SKILL.md and the Markdown after it."""
    assert text.startswith("---\n"), "SKILL.md must start with its front matter"
    head, separator, body = text[4:].partition("\n---\n")
    assert separator, "the front matter must end with a line '---'"
    return yaml.safe_load(head), body


def fenced(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``language`` in a Markdown text."""
    blocks = re.findall(r"^( *)```(\w*)\n(.*?)^\1```$", text, flags=re.MULTILINE | re.DOTALL)
    return [
        re.sub(rf"^{indent}", "", body, flags=re.MULTILINE)
        for indent, lang, body in blocks
        if lang == language
    ]


def test_front_matter_is_the_agent_skills_format() -> None:
    """agentskills.io: ``name`` 1-64 lowercase letters, digits and single
    hyphens, the name of the skill's folder; ``description`` 1-1024
    characters saying what it does and when to use it."""
    meta, body = front_matter(SKILL.read_text(encoding="utf-8"))
    assert meta["name"] == "git-isopatch" == SKILL.parent.name
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    description = meta["description"]
    assert isinstance(description, str) and 0 < len(description) <= 1024
    assert "git isopatch --json -- <command>" in description
    for word in ("remote", "credential", "publish", "deploy", "irreversible"):
        assert word in description, word
    assert body.lstrip().startswith("# ")


def test_the_skill_covers_the_call_the_result_candidates_apply_and_prune() -> None:
    _, body = front_matter(SKILL.read_text(encoding="utf-8"))
    headings = re.findall(r"^## (.+)$", body, flags=re.MULTILINE)
    assert headings == [
        "When to use it, and when not",
        "The call",
        "Reading the result",
        "Candidates side by side",
        "Several steps in one session",
        "Applying the chosen one",
        "Cleaning up",
    ]
    for words in ("--apply", "all or nothing", "prune", "ignore those you do not know"):
        assert words in body, words


def test_the_example_result_has_the_keys_of_a_real_one(env, make_repo) -> None:
    """The JSON shown under "Reading the result" names only keys that a
    run really prints, with values of their kind."""
    (example,) = [json.loads(block) for block in fenced(SKILL.read_text(), "json")]
    repo = make_repo({"app.py": SOURCE})
    done = subprocess.run(
        ["git-isopatch", "--json", "--", "ruff", "format", "."],
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
    )
    real = json.loads(done.stdout)
    assert set(example) <= set(real)
    assert all(type(example[key]) is type(real[key]) for key in example)


def _run_blocks(blocks: list[str], repo: Path, env: dict[str, str], state: Path) -> list[str]:
    """Run the blocks one after the other in one bash (variables carry
    over, as an agent's shell would keep them), with ``set -e``; after each,
    save ``git status``, ``app.py``, the worktree list and the result
    folders under ``state`` (the last block removes the result folders).
    Returns each block's stdout."""
    script = [
        "set -euo pipefail",
        "snap () {",
        '  git status --porcelain > "$STATE/$1.status"',
        '  cp app.py "$STATE/$1.app"',
        '  git worktree list --porcelain > "$STATE/$1.worktrees"',
        '  mkdir "$STATE/$1.results"',
        '  for f in "$TMPDIR"/git-isopatch-*; do',
        '    [ -e "$f" ] && cp -r "$f" "$STATE/$1.results/"',
        "  done",
        '  printf "\\n@@block %s@@\\n" "$1"',
        "}",
    ]
    for number, block in enumerate(blocks):
        script += [block, f"snap {number}"]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=repo,
        env={**env, "STATE": str(state)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outputs = re.split(r"\n@@block \d+@@\n", done.stdout)
    assert len(outputs) == len(blocks) + 1 and outputs[-1] == ""
    return outputs[:-1]


def _listed(worktrees: Path) -> int:
    """The worktrees ``git worktree list`` named, but git-isopatch's base
    trees (in ``.git/isopatch/``: the sandboxed runs' kept checkouts)."""
    lines = worktrees.read_text().splitlines()
    return sum(1 for x in lines if x.startswith("worktree ") and "/.git/isopatch/" not in x)


def test_every_command_of_the_skill_does_what_it_says(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo({"app.py": SOURCE})
    state = tmp_path / "state"
    state.mkdir()
    before = repo_state(repo, env)
    blocks = fenced(SKILL.read_text(encoding="utf-8"), "sh")
    assert len(blocks) == 6
    call, review, candidates, session, chosen, cleanup = blocks
    assert "--session" in session and "--end" in session
    assert "git isopatch --json --" in call and "prune" in cleanup
    # the chosen candidate's previewed patch is applied, its command not run again
    assert "apply" in chosen and "git isopatch" not in chosen and "narrow.json" in chosen
    outputs = _run_blocks(blocks, repo, env, state)

    def saved(number: int, path: str) -> bytes:
        """A result file as it was after block ``number``."""
        return (state / f"{number}.results" / Path(path).relative_to(env["TMPDIR"])).read_bytes()

    def unchanged(number: int) -> None:
        assert (state / f"{number}.status").read_text() == ""
        assert (state / f"{number}.app").read_text() == SOURCE

    # The call: one object on stdout, the patch in it, the checkout untouched.
    result = json.loads(outputs[0])
    assert result["exit"] == 0 and result["files"] == 1
    assert b"+++ b/app.py" in saved(0, result["patch"])
    unchanged(0)
    # Look at the patch: git apply --stat names the file.
    assert re.search(r"^ app\.py \| +\d+ [+-]+$", outputs[1], flags=re.MULTILINE)
    unchanged(1)
    # Candidates side by side: three results, three different patches.
    results = [json.loads(line) for line in outputs[2].splitlines() if line.strip()]
    assert [r["exit"] for r in results] == [0, 0, 0]
    assert [r["files"] for r in results] == [1, 1, 1]
    patches = [saved(2, r["patch"]) for r in results]
    assert len(set(patches)) == 3
    assert b"-import os" in patches[2] and b"-import os" not in patches[0]
    unchanged(2)
    # A session of two steps: its whole change holds both, then it is gone.
    whole = saved(3, outputs[3].strip())
    assert b"-import os" in whole and whole != patches[2]
    assert _listed(state / "3.worktrees") == 1
    unchanged(3)
    # The chosen one's patch applied: the work tree is the base plus that
    # patch (the 60-column candidate reverses cleanly), nothing else changed.
    assert outputs[4] == ""
    assert (state / "4.status").read_text() == " M app.py\n"
    assert (state / "4.app").read_text() != SOURCE
    narrow = tmp_path / "narrow.patch"
    narrow.write_bytes(patches[1])
    git("apply", "--check", "-R", narrow, cwd=repo, env=env)
    # Cleaning up: no worktree but the checkout, no result folder, no $out.
    assert "worktree " not in outputs[5]
    assert _listed(state / "5.worktrees") == 1
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    after = repo_state(repo, env)
    assert after["refs"] == before["refs"] and after["index"] == before["index"]


def _readme_copy_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in fenced(readme, "sh") if "~/.claude/skills" in b]
    return block


@pytest.fixture(scope="module")
def wheel_prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from this checkout without build isolation, installed
    into a fresh virtual environment (its packages from the test
    environment's, through a ``.pth`` file; nothing downloaded); after
    checking that the wheel holds the skill as shared data.  Returns the
    environment's prefix."""
    work = tmp_path_factory.mktemp("skill-install")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def run(*argv: str) -> str:
        done = subprocess.run(
            argv, cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        return done.stdout

    dist = work / "dist"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "--no-index", "-w", str(dist), str(ROOT))  # fmt: skip
    (wheel,) = dist.glob("git_isopatch-*.whl")
    data = wheel.name.split("-py")[0] + ".data/data/"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(data + INSTALLED) == SKILL.read_bytes()
    venv = work / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = str(venv / "bin" / "python")
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    Path(purelib, "test-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
        "--no-index", str(wheel))  # fmt: skip
    return venv


def test_the_readme_command_copies_the_installed_skill_where_agents_look(
    wheel_prefix: Path, env, tmp_path: Path
) -> None:
    assert (wheel_prefix / INSTALLED).read_bytes() == SKILL.read_bytes()
    test_bin = str(Path(sys.executable).parent)
    path = [p for p in env["PATH"].split(os.pathsep) if p != test_bin]
    environ = {**env, "PATH": os.pathsep.join([str(wheel_prefix / "bin"), *path])}
    done = subprocess.run(
        ["bash", "-euc", _readme_copy_command()],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    copied = Path(env["HOME"]) / ".claude" / "skills" / "git-isopatch" / "SKILL.md"
    assert copied.read_bytes() == SKILL.read_bytes()


def test_the_readme_parallel_candidates_recipe_works(env, make_repo) -> None:
    """The README's recipe, as printed: three candidates at once, the
    second brought home, everything cleaned up."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Agents")[1].split("\n## ")[0]
    (recipe,) = [b for b in fenced(section, "sh") if "wait" in b]
    repo = make_repo({"app.py": SOURCE})
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", recipe],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(r["exit"], r["files"]) for r in results] == [(0, 1)] * 3
    assert git("status", "--porcelain", cwd=repo, env=env) == b" M app.py\n"
    narrow = subprocess.run(
        ["ruff", "format", "--line-length", "60", "-"],
        input=SOURCE,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (repo / "app.py").read_text() == narrow
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    assert git("worktree", "list", "--porcelain", cwd=repo, env=env).count(b"worktree ") == 1
