#!/usr/bin/env python3
"""Count the instructions a warm run executes from its start to its first
git process (a sandboxed run over a kept base tree starts none before its
command: to bubblewrap's start), at several commits, against the floor's
whole run.

On a shared machine the wall time to the first git swings by tens of
milliseconds with the load (bench/compare.py measures it, in rounds); the
number of instructions does not.  Each way runs once untimed (bytecode
written, the pool filled, the sandbox check's answer kept), then once under
``valgrind --tool=cachegrind --cache-sim=no`` with a fixed hash seed: the
``I refs`` of the interpreter from its start until the run starts its
first ``git`` or bubblewrap (the process ends there), against ``bench/floor.py``'s
whole run (typer parsing ``-q -o x -- true``, pygit2 resolving HEAD).
The tool runs as ``python -m git_isopatch`` with the commit's exported
sources, as compare.py runs it, with ``isopatch.pool=1``.

    python bench/first_git.py 81ee6d3 HEAD --workdir /dev/shm/isopatch-compare

Standard library only (and valgrind); the repository is bench/run.py's.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (bench/compare.py: exported sources)
import run as bench  # noqa: E402  (bench/run.py: repositories, environment)
import timing  # noqa: E402  (bench/timing.py: the floor's script)

#: Runs ``git_isopatch`` as ``python -m``; ends the process as it starts
#: its first git, or bubblewrap.
UNTIL_FIRST_GIT = """
import os, runpy, subprocess, sys
start = subprocess.Popen._execute_child
def execute_child(self, args, *rest, **options):
    if isinstance(args, (list, tuple)) and os.path.basename(args[0]) in ("git", "bwrap"):
        os._exit(0)
    return start(self, args, *rest, **options)
subprocess.Popen._execute_child = execute_child
sys.argv = ["git-isopatch", *sys.argv[1:]]
runpy.run_module("git_isopatch", run_name="__main__", alter_sys=True)
"""


def instructions(argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    """The instructions ``argv`` executes (valgrind's ``I refs``)."""
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
        + argv,
        cwd=cwd,
        env={**env, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{argv[1:3]} failed ({done.returncode}): {done.stderr[-500:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commits", nargs="+", help="commits of this checkout to count")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/isopatch-compare"))
    parser.add_argument("--size", default="small", choices=sorted(bench.SPECS))
    parser.add_argument("--python", default=str(bench.PROJECT_DIR / ".venv" / "bin" / "python"))
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is needed (apt-get install valgrind)", file=sys.stderr)
        return 2
    workdir = args.workdir.absolute()
    home, run_tmp, pool_tmp = workdir / "home", workdir / "tmp", workdir / "pool-tmp"
    for folder in (home, run_tmp, pool_tmp):
        folder.mkdir(parents=True, exist_ok=True)
    env = bench.hermetic_env(home, run_tmp)
    env["GIT_CONFIG_PARAMETERS"] = f"'isopatch.pool=1' 'isopatch.tmpdir={pool_tmp}'"
    repo = bench.prepare_repository(bench.SPECS[args.size], workdir, env)
    options = ["-q", "-o", str(run_tmp / "isopatch.patch")]
    floor = [args.python, str(timing.FLOOR_SCRIPT), *options, "--", "true"]
    subprocess.run(floor, cwd=repo, env=env, check=True)
    counts = {"floor": instructions(floor, repo, env)}
    for commit in args.commits:
        _, folder = compare.export(commit, workdir / "sources")
        tool_env = {**env, "PYTHONPATH": str(folder)}
        for mode in ("--no-sandbox", "--sandbox"):
            whole = [args.python, "-m", "git_isopatch", *options, mode, "--", "true"]
            subprocess.run(whole, cwd=repo, env=tool_env, check=True)
            tool = [args.python, "-c", UNTIL_FIRST_GIT, *options, mode, "--", "true"]
            name = commit + ("+sandbox" if mode == "--sandbox" else "")
            counts[name] = instructions(tool, repo, tool_env)
    print(f"size {args.size}, instructions from the start to the first git (floor: its whole run)")
    print(f"{'way':24s} {'M instr':>8s} {'- floor':>8s}")
    for name, count in counts.items():
        print(f"{name:24s} {count / 1e6:8.1f} {(count - counts['floor']) / 1e6:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
