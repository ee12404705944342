"""What a careful user notices: the Python the package claims, the mode of
the ``-o`` file, ``-o -``, and control bytes in ``git isopatch list``."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch

ROOT = Path(__file__).resolve().parent.parent


def test_the_python_claimed_is_the_python_needed() -> None:
    """``requires-python``, ruff's target and the README name one oldest
    Python: 3.11 (``subprocess``'s ``process_group``, ``tomllib``,
    ``str.removeprefix`` in match statements...)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["requires-python"] == ">=3.11"
    assert project["tool"]["ruff"]["target-version"] == "py311"
    assert "Requires Python 3.11+" in (ROOT / "README.md").read_text()
    uses = re.findall(r"process_group=", (ROOT / "git_isopatch/isolation/command.py").read_text())
    assert uses, "the reason for 3.11 moved: update this test and the claim"


def _run_with_umask(umask: int, repo: Path, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ISOPATCH), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(umask),
        timeout=120,
    )


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_file_follows_the_umask(env, make_repo, umask: int, mode: int) -> None:
    """As ``--stdout > FILE`` would create it."""
    repo = make_repo()
    target = repo.parent / "change.patch"
    done = _run_with_umask(umask, repo, env, "-q", "-o", str(target), "--", "touch", "new")
    assert done.returncode == 0, done.stderr
    assert target.stat().st_mode & 0o777 == mode
    assert b"new file mode" in target.read_bytes()


def test_output_file_that_exists_keeps_its_mode(env, make_repo) -> None:
    """``>`` truncates a file and keeps its mode; so does ``-o``."""
    repo = make_repo()
    target = repo.parent / "change.patch"
    target.write_text("old\n")
    target.chmod(0o640)
    done = _run_with_umask(0o022, repo, env, "-q", "-o", str(target), "--", "touch", "new")
    assert done.returncode == 0, done.stderr
    assert target.stat().st_mode & 0o777 == 0o640
    assert b"new file mode" in target.read_bytes()


def test_private_files_stay_private_whatever_the_umask(env, make_repo) -> None:
    repo = make_repo()
    done = _run_with_umask(0o000, repo, env, "--porcelain", "--", "touch", "new")
    assert done.returncode == 0, done.stderr
    fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines())
    for key in ("patch", "stdout", "stderr"):
        assert Path(fields[key]).stat().st_mode & 0o777 == 0o600, key
    assert Path(fields["patch"]).parent.stat().st_mode & 0o777 == 0o700


def test_dash_output_is_standard_output(env, make_repo) -> None:
    """``-o -`` is ``--stdout``: the patch on stdout, no file named ``-``."""
    repo = make_repo()
    run = isopatch("-o", "-", "--", "sh", "-c", "echo hi; echo new > new", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert run.out.startswith("diff --git a/new b/new\n")
    assert "hi" in run.err  # the command's stdout goes to stderr, as with --stdout
    assert not (repo / "-").exists()
    same = isopatch("--stdout", "--", "sh", "-c", "echo new > new", cwd=repo, env=env)
    assert same.out == run.out
    assert git("status", "--porcelain", cwd=repo, env=env) == b""


@pytest.mark.parametrize("other", ["--porcelain", "--json", "--stdout"])
def test_dash_output_with_another_output_is_a_usage_error(env, make_repo, other: str) -> None:
    repo = make_repo()
    run = isopatch("-o", "-", other, "--", "true", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.err.splitlines()[0] == f"error: options '-o -' and '{other}' cannot be used together"


def test_list_quotes_newlines_and_control_bytes_of_a_command(env, make_repo) -> None:
    """One worktree, one line; an escape sequence never reaches the
    terminal raw; the same quoting as ``list --porcelain``."""
    repo = make_repo()
    script = "echo 'two\nlines' >/dev/null; : '\x1b[31mred'"
    kept = isopatch("--porcelain", "--keep", "--", "sh", "-c", script, cwd=repo, env=env)
    assert kept.returncode == 0, kept.err
    listed = isopatch("list", cwd=repo, env=env)
    assert listed.returncode == 0, listed.err
    (line,) = listed.out.splitlines()
    assert "\x1b" not in line and "\\033[31mred" in line and "two\\nlines" in line
    porcelain = isopatch("list", "--porcelain", cwd=repo, env=env).fields()
    assert line.endswith(porcelain["command"])
    git("worktree", "remove", "--force", kept.fields()["worktree"], cwd=repo, env=env)


def _applying_lines(text: str, rst: bool) -> list[str]:
    """Lines of a document's examples (a README code block, an indented
    man page block) that run ``git apply`` to change files (not ``--stat``
    or ``--check``), and every hint that shows one."""
    lines, in_block = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        example = in_block or (rst and line.startswith("    ")) or "hint: " in line
        if (
            example
            and re.search(r"git (-C \S+ )?apply ", line)
            and "--stat" not in line
            and "--check" not in line
        ):
            lines.append(line)
    return lines


def test_documented_pipelines_do_not_depend_on_apply_whitespace() -> None:
    for name in ("README.md", "man/git-isopatch.rst"):
        lines = _applying_lines((ROOT / name).read_text(), name.endswith(".rst"))
        assert lines, name
        for line in lines:
            assert "--whitespace=nowarn" in line, (name, line)


@pytest.mark.parametrize("setting", ["error", "fix"])
def test_the_documented_pipeline_reproduces_trailing_blanks(env, make_repo, setting) -> None:
    """``apply.whitespace=error`` would refuse the patch, ``fix`` would
    strip the blanks; the README's pipeline does neither."""
    repo = make_repo()
    git("config", "apply.whitespace", setting, cwd=repo, env=env)
    script = "printf 'blank  \\ntab\\t\\n' > README"
    made = isopatch("--stdout", "--", "sh", "-c", script, cwd=repo, env=env)
    assert made.returncode == 0, made.err
    readme = [
        line for line in (ROOT / "README.md").read_text().splitlines() if "| git apply" in line
    ]
    apply_args = readme[0].split("| git ", 1)[1].split("#")[0].split()
    git(*apply_args, cwd=repo, env=env, input=made.stdout)
    assert (repo / "README").read_bytes() == b"blank  \ntab\t\n"
