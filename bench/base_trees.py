"""Base trees (issue 32): a sandboxed capture costs what the command
changed, not the size of the repository.  Measured by ``bench/run.py
--base-trees`` on the 1k, 10k and 50k repositories, in interleaved rounds
(:mod:`timing`), against running in place and the bare git sequence:

- ``warm``: ``git isopatch --sandbox -- sh -c 'echo x >> README.txt'`` with
  the base tree of HEAD kept (the default, ``isopatch.baseTrees``);
- ``cold``: the same after ``git isopatch prune`` (untimed): the run makes
  the base tree, as a first run at a new commit does;
- ``next``: the same after a commit that changes one file (untimed): the
  run moves the kept base tree by that commit's difference;
- ``inplace`` and ``bare``: ``bench/inplace.sh`` and ``bench/bare.sh``.

And, on 10k, eight warm captures started together: their wall time against
one capture's, and the disk they use while they run (the base trees, the
worktrees' folders beside the checkout and the runs' private folders)
against one checkout.

Standard library only.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import timing

#: The repositories of this measurement.
SIZES = ("1k", "10k", "50k")
#: The ways, and what each is compared with.
WAYS = ("warm", "cold", "next", "inplace", "bare")
#: Targets: (size or "growth"/"parallel"/"disk", what) -> largest ratio.
TARGETS: dict[tuple[str, str], float] = {
    ("50k", "warm/inplace"): 0.5,
    ("10k", "warm/inplace"): 1.5,
    ("1k..50k", "warm growth"): 1.5,
    ("10k", "8 together/one"): 4.0,
    # one checkout, and each run's own: its index, its layers, its folders
    ("10k", "8 together disk/one checkout"): 1.25,
    ("1k", "cold/bare"): 1.0,
    ("10k", "cold/bare"): 1.0,
    ("50k", "cold/bare"): 1.0,
}
#: The file the ``next`` commits change.
NEXT_FILE = "CHANGELOG.txt"
#: Captures started together in the parallel case.
TOGETHER = 8


def _git(args: list[str], repo: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _next_commit(repo: Path, env: dict[str, str], count: int) -> None:
    """A commit changing one file (untimed): the next run moves the base tree."""
    with open(repo / NEXT_FILE, "a", encoding="utf-8") as handle:
        handle.write(f"change {count}\n")
    _git(["add", NEXT_FILE], repo, env)
    _git(["commit", "-q", "-m", f"change {count}"], repo, env)


def measure_sizes(bench: Any, repos: dict[str, Path], rounds: int) -> dict:
    """The interleaved rounds on each repository of :data:`SIZES`."""
    return {size: _rounds(bench, size, repo, rounds) for size, repo in repos.items()}


def _rounds(bench: Any, size: str, repo: Path, rounds: int) -> dict:
    commits = 0

    def once(way: str) -> float | None:
        nonlocal commits
        if way == "cold":
            env = bench.tool.env(bench.env)
            subprocess.run(bench.tool.argv(["prune"]), cwd=repo, env=env, capture_output=True)
        elif way == "next":
            commits += 1
            _next_commit(repo, bench.env, commits)
        implementation = way if way in ("inplace", "bare") else "sandbox"
        return bench.capture(implementation, "edit", repo, f"{size} {way}")

    bench.capture("sandbox", "edit", repo, f"{size} making the base tree")
    samples = timing.interleaved(
        list(WAYS),
        rounds,
        once,
        warmup=0,
        after_round=lambda index, timed: _progress(size, index, rounds, timed),
    )
    found: dict = {way: _median(samples[way]) for way in WAYS}
    found["samples"] = {way: samples[way] for way in WAYS}
    return found


def _progress(size: str, index: int, rounds: int, timed: list) -> None:
    times = ", ".join(f"{way} {seconds:.3f}s" for way, seconds in timed)
    name = "warm-up" if index < 0 else f"round {index + 1}/{rounds}"
    print(f"{size} {name}: {times}", file=__import__("sys").stderr, flush=True)


def _median(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def _disk_kb(paths: list[Path]) -> int:
    """What ``paths`` hold on disk (``du -sk``, hard links counted once)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return 0
    done = subprocess.run(["du", "-skc", *existing], capture_output=True, text=True, check=False)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "0"
    return int(last.split()[0])


def measure_together(bench: Any, repo: Path, rounds: int) -> dict[str, float | None]:
    """:data:`TOGETHER` warm captures started at once, against one, in
    interleaved rounds; then the disk they use while they run."""
    env = bench.tool.env(bench.env)
    bench.capture("sandbox", "edit", repo, "10k making the base tree")

    def together() -> float | None:
        argvs = [_capture(bench, n, "echo x >> README.txt") for n in range(TOGETHER)]
        started = time.perf_counter()
        processes = [
            subprocess.Popen(
                a, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            for a in argvs
        ]
        codes = [p.wait() for p in processes]
        seconds = time.perf_counter() - started
        bench.clean_up(repo, "10k together")
        if any(codes):
            bench.fail("10k together: a capture failed", processes[0].stderr.read().decode())
            return None
        return seconds

    def once(way: str) -> float | None:
        return (
            together() if way == "together" else bench.capture("sandbox", "edit", repo, "10k one")
        )

    samples = timing.interleaved(["together", "one"], rounds, once, warmup=0)
    return {
        "together": _median(samples["together"]),
        "one": _median(samples["one"]),
        **_disk_together(bench, repo, env),
    }


def _capture(bench: Any, number: int, script: str) -> list[str]:
    """The argument list of one of the captures started together: its own patch."""
    patch = bench.run_tmp / f"together-{number}.patch"
    return bench.tool.argv(["-q", "-o", str(patch), "--sandbox", "--", "sh", "-c", script])


def _disk_together(bench: Any, repo: Path, env: dict[str, str]) -> dict[str, float | None]:
    """The disk :data:`TOGETHER` captures use while their commands run
    (each appends a line and sleeps), against one checkout (the base tree)."""
    common = repo / ".git"
    base = common / "isopatch"
    processes = [
        subprocess.Popen(
            _capture(bench, n, "echo x >> README.txt; sleep 3"),
            cwd=repo,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in range(TOGETHER)
    ]
    time.sleep(2)
    beside = [p for p in repo.parent.iterdir() if p.name.startswith(repo.name + ".isopatch-")]
    used = _disk_kb([base, common / "worktrees", *beside, bench.run_tmp])
    checkout = _disk_kb([base])
    for process in processes:
        process.wait()
    bench.clean_up(repo, "10k disk")
    return {"disk_kb": float(used), "checkout_kb": float(checkout), "runs_seen": float(len(beside))}


def report(results: dict, together: dict | None) -> list[str]:
    """The table and the targets, as lines."""
    lines = [
        "",
        "base trees (issue 32): medians in ms, a command that changes one file, --sandbox",
        f"{'files':>6} {'warm':>8} {'cold':>8} {'next':>8} {'in place':>9} {'bare':>8}"
        f" {'warm/in place':>14} {'warm/bare':>10} {'cold/bare':>10} {'next/warm':>10}",
    ]
    ratios: dict[tuple[str, str], float | None] = {}
    for size, found in results.items():

        def ratio(a: str, b: str, found: dict = found) -> float | None:
            return found[a] / found[b] if found.get(a) and found.get(b) else None

        row = {k: ratio(*k.split("/")) for k in ("warm/inplace", "warm/bare", "cold/bare")}
        row["next/warm"] = ratio("next", "warm")
        ratios |= {(size, k): v for k, v in row.items()}
        cells = [_fmt(found[w] and found[w] * 1000, ".0f", 8) for w in WAYS[:4]]
        cells.append(_fmt(found["bare"] and found["bare"] * 1000, ".0f", 8))
        lines.append(
            f"{size:>6} " + " ".join(cells) + f" {_fmt(row['warm/inplace'], '.2f', 14)}"
            f" {_fmt(row['warm/bare'], '.2f', 10)} {_fmt(row['cold/bare'], '.2f', 10)}"
            f" {_fmt(row['next/warm'], '.2f', 10)}"
        )
    if "1k" in results and "50k" in results and results["1k"]["warm"]:
        ratios["1k..50k", "warm growth"] = results["50k"]["warm"] / results["1k"]["warm"]
        lines.append(f"warm growth from 1k to 50k files: {ratios['1k..50k', 'warm growth']:.2f}x")
    if together:
        one, many = together.get("one"), together.get("together")
        if one and many:
            ratios["10k", "8 together/one"] = many / one
            lines.append(
                f"{TOGETHER} captures started together on 10k: {many * 1000:.0f} ms, "
                f"one: {one * 1000:.0f} ms, ratio {many / one:.2f}"
            )
        if together.get("checkout_kb"):
            share = together["disk_kb"] / together["checkout_kb"]
            # their changes are a line each: what is above one checkout is their runs' own
            ratios["10k", "8 together disk/one checkout"] = share
            lines.append(
                f"disk while {TOGETHER} run together on 10k: {together['disk_kb'] / 1024:.1f} MB "
                f"(one checkout {together['checkout_kb'] / 1024:.1f} MB, "
                f"{together['runs_seen']:.0f} worktrees seen), ratio {share:.2f}"
            )
    for key, limit in TARGETS.items():
        value = ratios.get(key)
        verdict = "not measured" if value is None else ("met" if value <= limit else "missed")
        shown = "-" if value is None else f"{value:.2f}"
        lines.append(f"target {key[0]} {key[1]}: {shown} <= {limit:.2f}: {verdict}")
    return lines


def _fmt(value: float | None, spec: str, width: int) -> str:
    return ("-" if value is None else format(value, spec)).rjust(width)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
