"""The benchmark harness runs: ``bench/run.py --quick --pool`` on a tiny
repository prints the table, warm runs from the pool beside the cold ones,
and the targets, against the installed tool.  No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from repo_helpers import BIN_DIR

ROOT = Path(__file__).resolve().parent.parent


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
    assert "target peak RSS of the tool process" in done.stdout
    assert "startup: git isopatch -h" in done.stdout
