#!/usr/bin/env python3
"""What a session's later steps cost against a fresh capture, interleaved.

Each round runs, in an order that rotates from round to round (bench/timing.py),
a fresh capture (``git isopatch -q -o <patch> -- <edit>``) and a later step of
a session made before the rounds (``git isopatch --session <name> -q -o
<patch> -- <edit>``), unconfined and sandboxed; the edit appends a line to one
file, so that every step has a patch and the session grows by a line.  It
prints each way's median wall time, quartiles and median CPU time, the ratio of
a step to a fresh capture, and the 1-minute load average over the rounds.

    python bench/session.py --size small --rounds 20 --workdir /dev/shm/isopatch-session

Standard library only; the repositories are bench/run.py's.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: repositories, environment)
import timing  # noqa: E402  (bench/timing.py: the timing loop run.py shares)

#: The ways, each (what, confinement option).
WAYS = [
    ("fresh", "--no-sandbox"),
    ("step", "--no-sandbox"),
    ("fresh", "--sandbox"),
    ("step", "--sandbox"),
]


def tool_path(given: Path | None) -> Path:
    """``--tool``, else this checkout's ``.venv``, else ``git-isopatch`` on PATH."""
    if given is not None:
        return given
    local = bench.PROJECT_DIR / ".venv" / "bin" / "git-isopatch"
    found = shutil.which("git-isopatch")
    return local if local.exists() else Path(found or "git-isopatch")


def first_file(repo: Path, env: dict[str, str]) -> str:
    """A tracked text file of ``repo`` to edit."""
    listed = bench.git(["ls-files", "-z"], cwd=repo, env=env).split("\0")
    return next(name for name in listed if name and not name.endswith(".bin"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=sorted(bench.SPECS))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--tool", type=Path, default=None)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "isopatch-session"
    )
    args = parser.parse_args(argv)
    tool = tool_path(args.tool)
    workdir = args.workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    for folder in (workdir / "home", workdir / "tmp"):
        folder.mkdir(exist_ok=True)
    env = bench.hermetic_env(workdir / "home", workdir / "tmp")
    repo = bench.prepare_repository(bench.SPECS[args.size], workdir, env)
    edit = ["sh", "-c", f"echo step >> '{first_file(repo, env)}'"]
    patch = workdir / "step.patch"

    def argv_of(what: str, confinement: str) -> list[str]:
        session = ["--session", f"bench{confinement.replace('-', '_')}"] if what == "step" else []
        return [str(tool), *session, confinement, "-q", "-o", str(patch), "--", *edit]

    for confinement in ("--no-sandbox", "--sandbox"):  # each session's first step
        made = timing.measure(argv_of("step", confinement), cwd=repo, env=env)
        if made.exit_code != 0:
            sys.stderr.write(made.stderr)
            return 1

    def once(way: tuple[str, str]) -> timing.Measurement | None:
        measured = timing.measure(argv_of(*way), cwd=repo, env=env)
        if measured.exit_code != 0:
            sys.stderr.write(f"{way}: exit {measured.exit_code}\n{measured.stderr}")
            return None
        return measured

    loads: list[float] = []
    try:
        samples = timing.interleaved(WAYS, args.rounds, once, warmup=args.warmup, loads=loads)
    finally:
        for confinement in ("--no-sandbox", "--sandbox"):
            name = f"bench{confinement.replace('-', '_')}"
            subprocess.run([str(tool), "--session", name, "--end"], cwd=repo, env=env, check=False)
    report(samples, loads, args)
    return 0 if all(len(s) == args.rounds for s in samples.values()) else 1


def report(
    samples: dict[tuple[str, str], list[timing.Measurement]],
    loads: list[float],
    args: argparse.Namespace,
) -> None:
    """The table: each way's median, quartiles, CPU time, and a step's ratio."""
    print(f"size {args.size}, {args.rounds} rounds, load average (1 min) ", end="")
    print(f"{min(loads):.2f}-{max(loads):.2f}, median {statistics.median(loads):.2f}")
    print("| way | median | quartiles | CPU median | step / fresh |")
    print("|---|---|---|---|---|")
    for what, confinement in WAYS:
        walls = [m.seconds for m in samples[(what, confinement)]]
        cpus = [m.cpu_seconds for m in samples[(what, confinement)]]
        if len(walls) < 2:
            continue
        low, _, high = statistics.quantiles(walls, n=4)
        ratio = ""
        if what == "step":
            fresh = statistics.median(m.seconds for m in samples[("fresh", confinement)])
            ratio = f"{statistics.median(walls) / fresh:.2f}x"
        print(
            f"| {what} {confinement} | {statistics.median(walls) * 1000:.0f} ms "
            f"| {low * 1000:.0f}-{high * 1000:.0f} ms | {statistics.median(cpus) * 1000:.0f} ms "
            f"| {ratio} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
