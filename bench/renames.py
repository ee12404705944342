#!/usr/bin/env python3
"""What a sandboxed command's ``rename(2)`` costs at several commits, interleaved.

Each commit's sources are exported (``bench/compare.py``'s ``export``) and
every round runs, in an order that rotates from round to round, one
sandboxed ``git isopatch -q -o <patch>`` of each commit whose command
renames a file ``--renames`` times (Python's ``os.rename``, there and back)
and prints how long its loop took.  It prints each commit's median
time per rename inside the command, and the median CPU time (user and
system, ``wait4``) of the whole run, launcher included.

    python bench/renames.py origin/main HEAD --rounds 15

Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (bench/compare.py: export, launcher)

#: The command: ``argv[1]`` renames of a file, there and back; prints seconds.
LOOP = """\
import os, sys, time
open("f", "w").close()
started = time.perf_counter()
for _ in range(int(sys.argv[1]) // 2):
    os.rename("f", "g")
    os.rename("g", "f")
print(time.perf_counter() - started)
os.unlink("f")
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--renames", type=int, default=10_000)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "isopatch-renames"
    )
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    repo = args.workdir / "repo"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(args.workdir / "home")}
    env.update(
        GIT_AUTHOR_NAME="b",
        GIT_AUTHOR_EMAIL="b@b",
        GIT_COMMITTER_NAME="b",
        GIT_COMMITTER_EMAIL="b@b",
    )
    if not repo.is_dir():
        (args.workdir / "home").mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
        (repo / "README").write_text("r\n")
        subprocess.run(["git", "-C", str(repo), "add", "README"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", "base"], check=True, env=env)
    tools = {}
    for commit in args.commits:
        full, folder = compare.export(commit, args.workdir / "src")
        tools[commit] = compare.launcher(folder, sys.executable) / "git-isopatch"
    seen: dict[str, list[tuple[float, float]]] = {c: [] for c in args.commits}
    patch = args.workdir / "patch"
    for round_ in range(args.rounds):
        order = (
            args.commits[round_ % len(args.commits) :] + args.commits[: round_ % len(args.commits)]
        )
        for commit in order:
            argv_ = [str(tools[commit]), "--sandbox", "-q", "-o", str(patch), "--"]
            argv_ += [sys.executable, "-c", LOOP, str(args.renames)]
            child = subprocess.Popen(argv_, cwd=repo, env=env, stdout=subprocess.PIPE)
            out = child.stdout.read() if child.stdout else b""
            _, status, usage = os.wait4(child.pid, 0)
            if status:
                print(f"{commit}: failed ({status})", file=sys.stderr)
                return 1
            seen[commit].append((float(out), usage.ru_utime + usage.ru_stime))
    for commit, runs in seen.items():
        loop = statistics.median(r[0] for r in runs) / args.renames
        cpu = statistics.median(r[1] for r in runs)
        print(
            f"{commit:>14}: {loop * 1e6:8.1f} us per rename, run CPU {cpu:.3f} s ({len(runs)} runs)"
        )
    shutil.rmtree(args.workdir / "src", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
