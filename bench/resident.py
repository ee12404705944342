#!/usr/bin/env python3
"""What a warm capture would cost a resident process: the interpreter and
the imports paid once, then ``capture(["true"])`` with ``isopatch.pool=1``
unconfined, repeated in this process (what a server would do for each
request).  Prints the time the imports took and the median of the
captures.  Run it with the interpreter of a git-isopatch install, in the
hermetic environment of the repository to time (e.g. one of
``bench/run.py``'s):

    .venv/bin/python bench/resident.py <repository> <patch file> [rounds]

It measures a design the project does not have (every run is its own
process); bench/README.md says why it was measured.
"""

from __future__ import annotations

import os
import statistics
import sys
import time


def main(argv: list[str]) -> int:
    repo, patch = argv[0], argv[1]
    rounds = int(argv[2]) if len(argv) > 2 else 20
    started = time.perf_counter()
    from git_isopatch import cli  # noqa: F401  (what the command line adds to the imports)
    from git_isopatch.capture import capture

    imported = time.perf_counter() - started
    samples = []
    for _ in range(rounds + 2):  # two untimed: the pool filled
        begun = time.perf_counter()
        result = capture(
            ["true"], environ=dict(os.environ), repo_path=repo, pool=1, sandbox=False, output=patch
        )
        samples.append(time.perf_counter() - begun)
        if result.exit_code != 0 or result.error:
            print(f"capture failed: {result.error or result.exit_code}", file=sys.stderr)
            return 1
    timed = samples[2:]
    q1, _, q3 = statistics.quantiles(timed, n=4)
    print(
        f"imports {imported * 1000:.1f} ms; warm capture in process: median "
        f"{statistics.median(timed) * 1000:.1f} ms, q1-q3 {q1 * 1000:.1f}-{q3 * 1000:.1f} ms, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
