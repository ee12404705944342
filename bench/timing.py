"""The timing loop bench/run.py and bench/compare.py share.

:func:`measure` runs one command to completion and reads what ``wait4``
says of it (wall time, CPU time and peak RSS of the whole process tree);
:func:`interleaved` runs every way once per round, in an order that
rotates from round to round (:func:`round_order`), so that drift in a
shared machine's load hits every way alike; :func:`floor_launcher` puts
the floor of the design card's libraries (``floor.py``) on ``PATH`` as
``git isopatch-floor``, for both to time beside the tool.  Standard
library only.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

#: The floor: a typer app and pygit2 resolving HEAD, nothing of the tool's.
FLOOR_SCRIPT = Path(__file__).resolve().parent / "floor.py"

Way = TypeVar("Way", bound=Hashable)
Sample = TypeVar("Sample")


@dataclasses.dataclass
class Measurement:
    """One run: wall time, CPU time (user + system of the process and all
    it waited for), exit status, peak RSS of the largest process of the
    tree (kB), its standard error, and when it was spawned (``time.time()``:
    the clock git's trace2 events are stamped with)."""

    seconds: float
    cpu_seconds: float
    exit_code: int
    max_rss_kb: int
    stderr: str
    spawned_at: float = 0.0


def measure(argv: Sequence[str], *, cwd: Path, env: dict[str, str]) -> Measurement:
    """Run ``argv`` to completion, stdin and stdout closed; what ``wait4``
    reports of it."""
    with tempfile.TemporaryFile() as stderr:
        spawned_at = time.time()
        started = time.perf_counter()
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        message = stderr.read().decode(errors="replace")
    return Measurement(
        seconds,
        usage.ru_utime + usage.ru_stime,
        process.returncode,
        usage.ru_maxrss,
        message,
        spawned_at,
    )


def round_order(ways: Sequence[Way], index: int) -> list[Way]:
    """The order of round ``index``: ``ways`` rotated by ``index`` (for two
    ways, alternating)."""
    shift = index % len(ways) if ways else 0
    return [*ways[shift:], *ways[:shift]]


def interleaved(
    ways: Sequence[Way],
    rounds: int,
    once: Callable[[Way], Sample | None],
    *,
    warmup: int = 0,
    loads: list[float] | None = None,
    after_round: Callable[[int, list[tuple[Way, Sample]]], None] | None = None,
) -> dict[Way, list[Sample]]:
    """Run ``once(way)`` for every way in each of ``warmup`` untimed and
    ``rounds`` timed rounds (:func:`round_order`); the timed samples of
    each way (``once`` returns ``None`` for a run that failed: no sample).
    ``loads`` gets the 1-minute load average at the start of each timed
    round; ``after_round(index, samples)`` is called after each round
    (negative ``index``: a warm-up round)."""
    samples: dict[Way, list[Sample]] = {way: [] for way in ways}
    for index in range(-warmup, rounds):
        if index >= 0 and loads is not None:
            loads.append(os.getloadavg()[0])
        this_round: list[tuple[Way, Sample]] = []
        for way in round_order(ways, index):
            value = once(way)
            if value is None:
                continue
            this_round.append((way, value))
            if index >= 0:
                samples[way].append(value)
        if after_round is not None:
            after_round(index, this_round)
    return samples


def floor_launcher(into: Path, python: str) -> Path:
    """A ``git-isopatch-floor`` in ``into/bin`` that runs :data:`FLOOR_SCRIPT`
    with ``python``; the folder to put first on ``PATH``."""
    bin_dir = into / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "git-isopatch-floor"
    script.write_text(f'#!/bin/sh\nexec "{python}" "{FLOOR_SCRIPT}" "$@"\n')
    script.chmod(0o755)
    return bin_dir
