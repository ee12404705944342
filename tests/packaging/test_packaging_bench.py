"""The benchmark harness runs: ``bench/run.py --quick --pool`` on a tiny
repository prints the table, warm runs from the pool beside the cold ones,
the alternatives a user would pick (in place with stash/reset/pop, a
``git clone --shared``) with every way's ratio to each, and the targets,
against the installed tool.  No timing is asserted; the harness exits 1 when
a run leaves the checkout or the stash changed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_helpers import BIN_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_on_a_tiny_repository(env, tmp_path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            ROOT / "bench" / "run.py",
            "--quick",
            "--workdir",
            tmp_path / "bench",
            "--tool",
            BIN_DIR / "git-isopatch",
            "--startup-rounds",
            "1",
            "--pool",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ratio tool/bare" in done.stdout
    assert "ratio sandbox/bare" in done.stdout
    assert "ratio warm/bare" in done.stdout
    assert "left behind" not in done.stdout + done.stderr
    assert "patch under $TMPDIR" not in done.stdout + done.stderr
    for column in ("in place s", "clone s", "warm+sandbox s"):
        assert column in done.stdout
    for way in ("cold", "sandbox", "warm", "warm+sandbox"):
        for alternative in ("bare", "in place", "clone"):
            assert f"ratio {way}/{alternative}" in done.stdout
    assert "target peak RSS of the tool process" in done.stdout
    assert "target peak RSS of the tool with its git children" in done.stdout
    assert "startup: git isopatch -h" in done.stdout


def test_the_session_bench_runs_on_a_tiny_repository(env, tmp_path) -> None:
    """``bench/session.py`` times fresh captures and later steps of a
    session, prints their ratio, and ends its sessions."""
    done = subprocess.run(
        [
            sys.executable,
            ROOT / "bench" / "session.py",
            "--size",
            "tiny",
            "--rounds",
            "2",
            "--warmup",
            "0",
            "--workdir",
            tmp_path / "bench",
            "--tool",
            BIN_DIR / "git-isopatch",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| step --sandbox |" in done.stdout and "step / fresh" in done.stdout
    repo = tmp_path / "bench" / "repos" / "tiny" / "repo"
    listed = subprocess.run(
        [BIN_DIR / "git-isopatch", "list", "--porcelain"], cwd=repo, env=env, capture_output=True
    )
    assert listed.returncode == 0 and b"state session" not in listed.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="bench/first_git.py needs valgrind")
def test_the_first_git_bench_counts_instructions(env, tmp_path) -> None:
    """``bench/first_git.py`` counts the instructions of a run up to its
    first git, unconfined and sandboxed, beside the floor's whole run."""
    done = subprocess.run(
        [sys.executable, ROOT / "bench" / "first_git.py", "HEAD"]
        + ["--size", "tiny", "--workdir", tmp_path / "bench", "--python", sys.executable],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {"floor", "HEAD", "HEAD+sandbox"}
    floor = float(rows["floor"][0])
    assert floor > 0 and all(float(rows[way][0]) > floor for way in ("HEAD", "HEAD+sandbox"))
