"""The answer of the reading look, kept with a pooled worktree.

Where attributes apply, the look before the command in a claimed worktree
has git read every file a conversion may change
(:func:`..git.baseline.read_baseline`): on ``* text``, the whole
repository's content before every command.  The answer (the paths a
checkout alone changes) is kept in the worktree's private folder with the
digests it was found for (:func:`..git.conversion_key.conversion_inputs`):
the next claim of that worktree takes it for every path whose index entry
is the same (the same file, object and mode), as long as what applies to
every path (the attributes, the configuration) is the same too, and has
git read only the files of the other entries: a warm run reads what
changed since the last one (what its command wrote, what another commit
holds), not the repository.

The command can write that folder (even under ``--sandbox``), so what it
finds there is never what the pool trusts: the answer is written by
:func:`.pool.put_back` after the command has ended, from what this process
held since before the command started, as the index is
(:func:`.pool.index_as_made`), or removed when the run has none; a
worktree only ever waits in the pool after that write, so whatever a
command wrote there is gone before the next claim reads it.  A key that
does not match is an answer not taken.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..git.admin_files import read_admin_file
from ..git.conversion_key import DIGEST_SIZE, ConversionInputs
from ..git.types import GitDirPath

#: The file of the private folder that holds the answer (kept across a
#: claim: :data:`..git.refresh.RECORD_FILES`).
ANSWER_FILE = "isopatch-conversions"

_HEADER = b"git-isopatch conversions 2\n"


@dataclass(frozen=True)
class KeptAnswer:
    """An answer kept with the worktree.

    Attributes:
        paths: the paths the reading look found.
        entries: the digests of the index entries it was found for
            (:attr:`..git.conversion_key.ConversionInputs.entries`).
    """

    paths: list[bytes]
    entries: frozenset[bytes]


def encode(inputs: ConversionInputs, paths: Iterable[bytes]) -> bytes:
    """The answer ``paths`` for ``inputs``, as :data:`ANSWER_FILE` holds it:
    the key, the paths, then every entry's digest."""
    listed = [path + b"\0" for path in paths]
    head = _HEADER + f"{inputs.key}\n{len(listed)}\n".encode()
    return head + b"".join(listed) + b"".join(inputs.entries.values())


def kept_answer(admin_dir: GitDirPath, key: str) -> KeptAnswer | None:
    """The answer kept in ``admin_dir`` under ``key``; ``None`` when there
    is none, or one under another key, or one that is not ours."""
    try:
        data = read_admin_file(os.path.join(admin_dir, ANSWER_FILE), limit=1 << 32)
    except OSError:
        return None
    head = _HEADER + f"{key}\n".encode()
    if not data.startswith(head):
        return None
    count, newline, rest = data[len(head) :].partition(b"\n")
    if not newline or not count.isdigit():
        return None
    paths, at = [], 0
    for _ in range(int(count)):
        end = rest.find(b"\0", at)
        if end < 0:
            return None
        paths.append(rest[at:end])
        at = end + 1
    digests = rest[at:]
    if len(digests) % DIGEST_SIZE:
        return None
    entries = frozenset(digests[i : i + DIGEST_SIZE] for i in range(0, len(digests), DIGEST_SIZE))
    return KeptAnswer(paths, entries)
