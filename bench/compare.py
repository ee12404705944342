#!/usr/bin/env python3
"""Time git-isopatch at several commits against each other, interleaved.

Measures what one change buys: each commit's sources are exported
(``git archive``) and run by the same interpreter, and every round runs a warm
``git -c isopatch.pool=1 isopatch -q -o <patch> -- true`` of each commit, the
bare git sequence (``bench/bare.sh``) and running in place
(``bench/inplace.sh``), in an order that rotates from round to round, so that
the load of a shared machine hits every way alike.  It prints each way's
median and its ratio to bare and to in place, and how many git processes one
run of each commit starts (counted with ``GIT_TRACE2_EVENT``).  CPU time
(user and system of the whole process tree, from ``wait4``) swings less with
the load than wall time.

    python bench/compare.py 2366a8c HEAD --size small --rounds 30 \\
        --workdir /dev/shm/isopatch-compare

``--sandbox`` adds ``--sandbox`` to every tool run (else ``--no-sandbox``),
``--cold`` drops the pool; ``<commit>+sandbox``, ``<commit>+cold`` (or both)
do it for one way, so that ``HEAD HEAD+sandbox`` times what the sandbox costs.
``--attributes LINE`` (repeatable) times a clone of the repository whose
last commit adds a ``.gitattributes`` holding those lines (``'* text
eol=lf'``: git converts every file); each commit's way then runs in a
clone of its own, so that its pool holds only the worktrees it put back.
Standard library only; the repositories are bench/run.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: repositories, environment)
import timing  # noqa: E402  (bench/timing.py: the timing loop run.py shares)


def export(commit: str, into: Path) -> tuple[str, Path]:
    """The sources of ``commit`` of this checkout under ``into``; its full id."""
    full = subprocess.run(
        ["git", "-C", str(bench.PROJECT_DIR), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    folder = into / full[:12]
    if not (folder / "git_isopatch").is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(bench.PROJECT_DIR), "archive", "--format=tar", full, "git_isopatch"],
            check=True,
            capture_output=True,
        ).stdout
        with tempfile.TemporaryFile() as tar:
            tar.write(archive)
            tar.seek(0)
            tarfile.open(fileobj=tar).extractall(folder)
    return full, folder


def launcher(folder: Path, python: str) -> Path:
    """A ``git-isopatch`` in ``folder/bin`` that runs ``folder``'s sources."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "git-isopatch"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{folder}" exec "{python}" -m git_isopatch "$@"\n')
    script.chmod(0o755)
    return bin_dir


def git_processes(argv: list[str], repo: Path, env: dict[str, str]) -> list[str]:
    """The git subcommands one run of ``argv`` starts, in order."""
    with tempfile.NamedTemporaryFile(suffix=".trace2") as trace:
        subprocess.run(
            argv,
            cwd=repo,
            env={**env, "GIT_TRACE2_EVENT": trace.name},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        names = []
        for line in Path(trace.name).read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "cmd_name" and event.get("name") != "_run_dashed_":
                names.append(event["name"])
    return names  # the `git isopatch` that started the tool is _run_dashed_


def with_attributes(
    repo: Path, lines: list[str], clone: Path, workdir: Path, env: dict[str, str]
) -> Path:
    """A fresh clone of ``repo`` (objects hard-linked) at ``clone`` whose
    last commit adds a ``.gitattributes`` holding ``lines``, its index
    stat-clean."""
    shutil.rmtree(clone, ignore_errors=True)
    bench.git(["clone", "-q", "--no-checkout", str(repo), str(clone)], cwd=workdir, env=env)
    bench.git(["config", "gc.auto", "0"], cwd=clone, env=env)
    bench.git(["-c", "checkout.workers=0", "reset", "-q", "--hard", "HEAD"], cwd=clone, env=env)
    (clone / ".gitattributes").write_text("".join(line + "\n" for line in lines))
    bench.git(["add", ".gitattributes"], cwd=clone, env=env)
    bench.git(["commit", "-q", "-m", "attributes"], cwd=clone, env=env)
    time.sleep(1.1)  # as bench/run.py: the index older than the files, then stat-clean
    bench.git(["update-index", "-q", "--really-refresh"], cwd=clone, env=env)
    return clone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/compare.py", description=__doc__)
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--size", default="small", choices=sorted(bench.SPECS))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "isopatch-compare"
    )
    parser.add_argument("--python", default=str(bench.PROJECT_DIR / ".venv" / "bin" / "python"))
    parser.add_argument("--sandbox", action="store_true", help="every tool run with --sandbox")
    parser.add_argument(
        "--cold", action="store_true", help="no pool: every tool run makes its worktree"
    )
    parser.add_argument(
        "--attributes",
        metavar="LINE",
        action="append",
        help="time a clone whose .gitattributes holds LINE (repeatable)",
    )
    args = parser.parse_args(argv)

    workdir = args.workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    home, run_tmp, pool_tmp = workdir / "home", workdir / "tmp", workdir / "pool-tmp"
    for folder in (home, run_tmp, pool_tmp):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    env = bench.hermetic_env(home, run_tmp)
    repo = bench.prepare_repository(bench.SPECS[args.size], workdir, env)
    generated = repo
    if args.attributes is not None:
        clone = workdir / "repos" / "with-attributes"
        repo = with_attributes(generated, args.attributes, clone, workdir, env)
    patch = run_tmp / "isopatch.patch"
    warm = ["-c", "isopatch.pool=1", "-c", f"isopatch.tmpdir={pool_tmp}"]

    ways: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare": (["sh", str(bench.BARE_SCRIPT), "--", "true"], env),
        "inplace": (["sh", str(bench.INPLACE_SCRIPT), "--", "true"], env),
    }
    labels = {}
    cwd: dict[str, Path] = {"bare": repo, "inplace": repo}
    for number, way in enumerate(args.commits):
        commit, *modes = way.split("+")
        sandbox = ("--sandbox" if "sandbox" in modes or args.sandbox else "--no-sandbox",)
        cold = "cold" in modes or args.cold
        full, folder = export(commit, workdir / "sources")
        bin_dir = launcher(folder, args.python)
        tool_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
        options = ["-q", "-o", str(patch), *sandbox, "--", "true"]
        name = "+".join([full[:12], *modes])
        ways[name] = (["git", *([] if cold else warm), "isopatch", *options], tool_env)
        labels[name] = way
        cwd[name] = repo
        if args.attributes is not None:  # a pool of its own: what one version keeps stays
            clone = workdir / "repos" / f"with-attributes-{number}"
            cwd[name] = with_attributes(generated, args.attributes, clone, workdir, env)

    def once(name: str) -> tuple[float, float]:
        argv_, env_ = ways[name]
        run = timing.measure(argv_, cwd=cwd[name], env=env_)
        if run.exit_code != 0:
            raise SystemExit(f"{name} failed ({run.exit_code}): {run.stderr.strip()[-500:]}")
        for child in run_tmp.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        return run.seconds, run.cpu_seconds

    names = list(ways)
    loads: list[float] = []
    # two untimed rounds: bytecode written, the pool filled
    timed = timing.interleaved(names, args.rounds, once, warmup=2, loads=loads)
    samples = {name: [wall for wall, _ in values] for name, values in timed.items()}
    cpu = {name: [used for _, used in values] for name, values in timed.items()}
    counts = {name: git_processes(*ways[name][:1], cwd[name], ways[name][1]) for name in labels}
    # the warm ways' pool goes: the repository is left as found
    for folder in dict.fromkeys(cwd.values()):
        subprocess.run(
            ["git", "isopatch", "prune"], cwd=folder, env=ways[names[-1]][1], check=False
        )

    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(
        f"size {args.size}, {args.rounds} rounds, {'cold' if args.cold else 'warm'}"
        f"{', --sandbox' if args.sandbox else ''}; load average (1 min) during the rounds "
        f"{min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}"
    )
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    print(
        f"{'way':14s} {'median ms':>9s} {'q1-q3 ms':>13s} {'/bare':>6s} {'/in place':>9s}"
        f" {'CPU ms':>7s} {'CPU/bare':>8s}  git processes"
    )
    for name in names:
        q = statistics.quantiles(samples[name], n=4) if len(samples[name]) > 1 else [0, 0, 0]
        count = f"{len(counts[name])}: {' '.join(counts[name])}" if name in counts else ""
        print(
            f"{labels.get(name, name):14s} {medians[name] * 1000:9.1f} "
            f"{q[0] * 1000:6.1f}-{q[2] * 1000:6.1f} {medians[name] / medians['bare']:6.2f} "
            f"{medians[name] / medians['inplace']:9.2f} {cpu_medians[name] * 1000:7.1f} "
            f"{cpu_medians[name] / cpu_medians['bare']:8.2f}  {count}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
