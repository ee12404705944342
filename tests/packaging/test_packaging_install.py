"""What is installed: the Python the package claims, and a wheel installed
into a fresh virtual environment brings the manual page and the completion
script along: with the environment's bin on PATH, `git isopatch --help`,
`git-isopatch --help` and `man git-isopatch` show the page, and
bash-completion finds the completion."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


PAGE = ROOT / "man" / "git-isopatch.1"


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from this checkout without build isolation (the
    test extra has hatchling), installed with pip into a fresh virtual
    environment whose packages come from the test environment through a
    ``.pth`` file, so that nothing is downloaded.  Returns its prefix."""
    work = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    dist = work / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "--no-index", "-w", str(dist), str(ROOT)], env, work)  # fmt: skip
    (wheel,) = dist.glob("git_isopatch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = wheel.name.split("-py")[0] + ".data/data/share"
    assert f"{data}/man/man1/git-isopatch.1" in names
    assert f"{data}/bash-completion/completions/git-isopatch" in names
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env, work)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                   env, work).stdout.strip()  # fmt: skip
    Path(purelib, "test-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], env, work)  # fmt: skip
    return venv


@pytest.fixture
def venv_env(installed: Path, env: dict[str, str]) -> dict[str, str]:
    """The hermetic environment with the fresh venv's bin first on PATH and
    the test environment's bin off it; no MANPATH (man derives it from PATH)."""
    test_bin = str(Path(sys.executable).parent)
    path = [p for p in env["PATH"].split(os.pathsep) if p != test_bin]
    return {**env, "PATH": os.pathsep.join([str(installed / "bin"), *path]), "MANPAGER": "cat"}


def _assert_is_the_page(text: str) -> None:
    assert "NAME" in text and "OPTIONS" in text and "CONFIGURATION" in text
    assert "git-isopatch - run a command in an ephemeral worktree" in " ".join(text.split())
    assert "--no-keep" in text


def test_the_python_claimed_is_the_python_needed() -> None:
    """``requires-python``, ruff's target and the README name one oldest
    Python: 3.11 (``subprocess``'s ``process_group``, ``tomllib``,
    ``str.removeprefix`` in match statements...)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["requires-python"] == ">=3.11"
    assert project["tool"]["ruff"]["target-version"] == "py311"
    assert "Requires Python 3.11+" in (ROOT / "README.md").read_text()
    uses = re.findall(r"process_group=", (ROOT / "git_isopatch/sandbox/command.py").read_text())
    assert uses, "the reason for 3.11 moved: update this test and the claim"


@pytest.mark.needs("man-db")
def test_man_finds_the_installed_page(installed: Path, venv_env, make_repo) -> None:
    repo = make_repo()
    where = _run(["man", "-w", "git-isopatch"], venv_env, repo).stdout.strip()
    assert Path(where) == installed / "share" / "man" / "man1" / "git-isopatch.1"
    assert Path(where).read_bytes() == PAGE.read_bytes()
    _assert_is_the_page(_run(["man", "git-isopatch"], venv_env, repo).stdout)


@pytest.mark.needs("man-db")
def test_git_isopatch_help_opens_the_page(installed: Path, venv_env, make_repo) -> None:
    repo = make_repo()
    assert _run(["git", "isopatch", "--version"], venv_env, repo).stdout.startswith("git-isopatch ")
    which = _run(["sh", "-c", "command -v git-isopatch"], venv_env, repo).stdout.strip()
    assert Path(which) == installed / "bin" / "git-isopatch"
    # git turns this into `git help isopatch`, which runs `man git-isopatch`
    _assert_is_the_page(_run(["git", "isopatch", "--help"], venv_env, repo).stdout)
    # without git in between, git-isopatch runs man itself
    _assert_is_the_page(_run(["git-isopatch", "--help"], venv_env, repo).stdout)
    _assert_is_the_page(_run(["git", "isopatch", "--porcelain", "--help"], venv_env, repo).stdout)


@pytest.mark.needs("man-db")
def test_help_works_off_path_too(installed: Path, venv_env, make_repo) -> None:
    """`/path/to/venv/bin/git-isopatch --help` with the venv's bin not on
    PATH: the page of its own installation is still found."""
    off_path = {**venv_env, "PATH": venv_env["PATH"].split(os.pathsep, 1)[1]}
    done = _run([str(installed / "bin" / "git-isopatch"), "--help"], off_path, make_repo())
    _assert_is_the_page(done.stdout)


@pytest.mark.needs("bash-completion", "git")
def test_bash_completion_finds_the_installed_script(installed: Path, venv_env, make_repo) -> None:
    repo = make_repo()
    script = f"""
export XDG_DATA_DIRS={shlex.quote(str(installed / "share"))}:/usr/share
. /usr/share/bash-completion/bash_completion
__load_completion git
COMP_WORDS=(git isopatch --po); COMP_CWORD=2; COMP_LINE='git isopatch --po'; COMP_POINT=17
__git_wrap__git_main
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    assert _run(["bash", "-c", script], venv_env, repo).stdout == "--porcelain \n"
