#!/usr/bin/env python3
"""What a session's later steps cost against a fresh capture, interleaved.

Each round runs, in an order that rotates from round to round (bench/timing.py),
a fresh capture (``git isopatch -q -o <patch> -- <edit>``) and a later step of
a session made before the rounds (``git isopatch --session <name> -q -o
<patch> -- <edit>``), unconfined and sandboxed; the edit appends a line to one
file, so that every step has a patch and the session grows by a line.  It
prints each way's median wall time, quartiles and median CPU time, the ratio of
a step to a fresh capture, and the 1-minute load average over the rounds.
With ``--before <git-isopatch>`` (another installation, say of the commit
before a change) its ways run in the same rounds too, with sessions of
their own, and each way's row says which tool ran it, with the ratio of
this tool's median (wall and CPU) to the other's.

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
    parser.add_argument("--before", type=Path, default=None, help="another git-isopatch")
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
    tools = {"": tool, **({"before ": args.before} if args.before is not None else {})}
    ways = [(label, *way) for label in tools for way in WAYS]

    def session_of(label: str, confinement: str) -> str:
        return f"bench{label.strip()}{confinement.replace('-', '_')}"

    def argv_of(label: str, what: str, confinement: str) -> list[str]:
        session = ["--session", session_of(label, confinement)] if what == "step" else []
        return [str(tools[label]), *session, confinement, "-q", "-o", str(patch), "--", *edit]

    for label in tools:  # each session's first step
        for confinement in ("--no-sandbox", "--sandbox"):
            made = timing.measure(argv_of(label, "step", confinement), cwd=repo, env=env)
            if made.exit_code != 0:
                sys.stderr.write(made.stderr)
                return 1

    def once(way: tuple[str, str, str]) -> timing.Measurement | None:
        measured = timing.measure(argv_of(*way), cwd=repo, env=env)
        if measured.exit_code != 0:
            sys.stderr.write(f"{way}: exit {measured.exit_code}\n{measured.stderr}")
            return None
        return measured

    loads: list[float] = []
    try:
        samples = timing.interleaved(ways, args.rounds, once, warmup=args.warmup, loads=loads)
    finally:
        for label, path in tools.items():
            for confinement in ("--no-sandbox", "--sandbox"):
                ending = [str(path), "--session", session_of(label, confinement), "--end"]
                subprocess.run(ending, cwd=repo, env=env, check=False)
    report(samples, loads, args)
    return 0 if all(len(s) == args.rounds for s in samples.values()) else 1


def report(
    samples: dict[tuple[str, str, str], list[timing.Measurement]],
    loads: list[float],
    args: argparse.Namespace,
) -> None:
    """The table: each way's median, quartiles, CPU time, a step's ratio
    to a fresh capture, and with ``--before`` this tool's to the other's."""
    print(f"size {args.size}, {args.rounds} rounds, load average (1 min) ", end="")
    print(f"{min(loads):.2f}-{max(loads):.2f}, median {statistics.median(loads):.2f}")
    print("| way | median | quartiles | CPU median | step / fresh | wall, CPU / before |")
    print("|---|---|---|---|---|---|")
    for label, what, confinement in samples:
        walls = [m.seconds for m in samples[(label, what, confinement)]]
        cpus = [m.cpu_seconds for m in samples[(label, what, confinement)]]
        if len(walls) < 2:
            continue
        low, _, high = statistics.quantiles(walls, n=4)
        ratio = against = ""
        if what == "step":
            fresh = statistics.median(m.seconds for m in samples[(label, "fresh", confinement)])
            ratio = f"{statistics.median(walls) / fresh:.2f}x"
        before = samples.get(("before ", what, confinement), [])
        if not label and len(before) >= 2:
            wall = statistics.median(walls) / statistics.median(m.seconds for m in before)
            cpu = statistics.median(cpus) / statistics.median(m.cpu_seconds for m in before)
            against = f"{wall:.2f}x, {cpu:.2f}x"
        print(
            f"| {label}{what} {confinement} | {statistics.median(walls) * 1000:.0f} ms "
            f"| {low * 1000:.0f}-{high * 1000:.0f} ms | {statistics.median(cpus) * 1000:.0f} ms "
            f"| {ratio} | {against} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
