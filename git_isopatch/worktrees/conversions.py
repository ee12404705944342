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

from ..git.admin_files import read_admin_file
from ..git.conversion_key import DIGEST_SIZE, EntryInputs
from ..git.record import Record
from ..git.types import GitDirPath

#: The file of the private folder that holds the answer (kept across a
#: claim: :data:`..git.refresh.RECORD_FILES`).
ANSWER_FILE = "isopatch-conversions"

_HEADER = b"git-isopatch conversions 3\n"


class KeptAnswer(Record):
    """An answer kept with the worktree.

    Attributes:
        whole: the key of the inputs it was found for, the index file
            included (:attr:`..git.conversion_key.ConversionInputs.key`).
        key: their key entry by entry
            (:attr:`..git.conversion_key.EntryInputs.key`).
        paths: the paths the reading look found.
        entries: the digests of the index entries it was found for.
        data: the file's bytes.
    """

    whole: str
    key: str
    paths: list[bytes]
    entries: frozenset[bytes]
    data: bytes


def encode(whole: str, inputs: EntryInputs, paths: Iterable[bytes]) -> bytes:
    """The answer ``paths`` for ``inputs`` (``whole``: their key with the
    index file), as :data:`ANSWER_FILE` holds it: the keys, the paths,
    then every entry's digest."""
    listed = [path + b"\0" for path in paths]
    head = _HEADER + f"{whole}\n{inputs.key}\n{len(listed)}\n".encode()
    return head + b"".join(listed) + b"".join(inputs.entries.values())


def kept_answer(admin_dir: GitDirPath) -> KeptAnswer | None:
    """The answer kept in ``admin_dir``; ``None`` when there is none, or
    one that is not ours."""
    try:
        data = read_admin_file(os.path.join(admin_dir, ANSWER_FILE), limit=1 << 32)
    except OSError:
        return None
    if not data.startswith(_HEADER):
        return None
    fields = data[len(_HEADER) :].split(b"\n", 3)
    if len(fields) != 4 or not fields[2].isdigit():
        return None
    whole, key, count, rest = fields
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
    return KeptAnswer(
        whole.decode("ascii", "replace"), key.decode("ascii", "replace"), paths, entries, data
    )
