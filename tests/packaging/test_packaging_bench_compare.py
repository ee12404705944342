"""``bench/compare.py`` times commits of this checkout against each other
with the timing loop it shares with ``bench/run.py`` (``bench/timing.py``):
a warm way claims its worktree from the pool, a ``+cold`` way makes one,
and both are reported beside the bare sequence, in place and the floor of
the libraries (``bench/floor.py``), with the git processes one run starts
and the time from its exec to the first of them.  No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import timing  # noqa: E402


def test_compare_times_warm_and_cold_ways(env, tmp_path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            ROOT / "bench" / "compare.py",
            "HEAD",
            "HEAD+cold",
            "--size",
            "tiny",
            "--rounds",
            "2",
            "--workdir",
            tmp_path / "compare",
            "--python",
            sys.executable,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[2:] if line.strip()}
    assert set(rows) == {"bare", "inplace", "HEAD", "HEAD+cold", "floor"}, done.stdout
    warm, cold = rows["HEAD"].split(), rows["HEAD+cold"].split()
    # the time to the first git process, in ms, beside the floor's whole run
    end = done.stdout.splitlines()[1].index("1st git") + len("1st git")  # right-aligned
    for way in ("HEAD", "HEAD+cold", "floor"):
        assert float(rows[way][end - 7 : end]) > 0, rows[way]
    assert rows["bare"][end - 7 : end].strip() == "-", rows["bare"]
    # the git processes one run starts: a claim brings the pooled worktree
    # to the commit with read-tree; a cold run adds one
    assert "read-tree" in warm and "worktree" not in warm, rows["HEAD"]
    assert "worktree" in cold and "read-tree" not in cold, rows["HEAD+cold"]
    assert not list((tmp_path / "compare" / "pool-tmp").glob("*/*/.git")), "the pool was left"


def test_rounds_rotate_and_keep_failed_runs_out() -> None:
    calls: list[str] = []

    def once(way: str) -> float | None:
        calls.append(way)
        return None if way == "b" and len(calls) > 3 else float(len(calls))

    loads: list[float] = []
    samples = timing.interleaved(["a", "b", "c"], 2, once, warmup=1, loads=loads)
    assert calls == ["c", "a", "b", "a", "b", "c", "b", "c", "a"]
    assert samples == {"a": [4.0, 9.0], "b": [], "c": [6.0, 8.0]}
    assert len(loads) == 2


def test_compare_times_each_way_in_a_clone_with_the_attributes(env, tmp_path) -> None:
    """``--attributes``: every way runs in a clone whose last commit adds
    the lines as ``.gitattributes``, each commit's way in its own (its pool
    holds only what that commit put back)."""
    work = tmp_path / "compare"
    done = subprocess.run(
        [
            sys.executable, ROOT / "bench" / "compare.py", "HEAD", "HEAD+cold",
            "--size", "tiny", "--rounds", "1", "--workdir", work, "--python", sys.executable,
            "--attributes", "* text eol=lf", "--attributes", "*.bin binary",
        ],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    clones = sorted(path.name for path in (work / "repos").glob("with-attributes*"))
    assert clones == ["with-attributes", "with-attributes-0", "with-attributes-1"]
    for clone in clones:
        attributes = (work / "repos" / clone / ".gitattributes").read_text()
        assert attributes == "* text eol=lf\n*.bin binary\n"


def test_compare_reads_a_global_configuration_the_tool_asks_git_for(env, tmp_path) -> None:
    """``--global-config``: every way runs under ``GIT_CONFIG_GLOBAL``,
    which libgit2 does not read; the tool's ``git config`` shows."""
    settings = tmp_path / "global.gitconfig"
    settings.write_text("[core]\n\tautocrlf = false\n")
    done = subprocess.run(
        [
            sys.executable, ROOT / "bench" / "compare.py", "HEAD", "--size", "tiny",
            "--rounds", "1", "--workdir", tmp_path / "compare", "--python", sys.executable,
            "--global-config", settings,
        ],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[2:] if line.strip()}
    assert "config" in rows["HEAD"].split(), rows["HEAD"]
