"""The confinement a run asks for, checked before anything exists: a
:class:`ConfinementPlan` (:data:`UNCONFINED` without ``--sandbox``), which
:func:`.confinement.confine` enters once the worktree is there.  Apart
from the confinement itself, so that the checks of a run that is not
confined load nothing of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import IsopatchError, known_os_failure
from ..git.record import Record
from .limits import NONE as NO_LIMITS
from .limits import Limits

if TYPE_CHECKING:
    from .namespaces import Bwrap

#: The mechanisms a plan names.
NO_MECHANISM = "none"
#: The command, and git-isopatch's own git after it, in bubblewrap's
#: namespaces (:mod:`.namespaces`).
NAMESPACES = "namespaces"


class CacheSettings(Record):
    """The cache layer of a run (:mod:`.cache_layer`): ``kept`` (else
    cache writes are discarded like any other), cleared past ``limit``
    bytes (0: no bound)."""

    kept: bool = False
    limit: int = 0


class ConfinementPlan(Record):
    """The confinement of one run, checked before anything is made.

    Attributes:
        mechanism: :data:`NO_MECHANISM` or :data:`NAMESPACES`.
        allow_write: absolute paths, each existing, the command may write.
        allow_network: keep the network.
        bwrap: the bubblewrap of :data:`NAMESPACES`.
        limits: the bounds on the command's processes and memory (:mod:`.limits`).
        cache: its cache layer (:class:`CacheSettings`).
    """

    mechanism: str = NO_MECHANISM
    allow_write: tuple[str, ...] = ()
    allow_network: bool = False
    bwrap: "Bwrap | None" = None
    limits: Limits = NO_LIMITS
    cache: CacheSettings = CacheSettings()

    @property
    def confined(self) -> bool:
        return self.mechanism != NO_MECHANISM


UNCONFINED = ConfinementPlan()


def plan(
    sandbox: bool,
    allow_write: Sequence[str],
    allow_network: bool,
    work_tree: str | None = None,
) -> ConfinementPlan:
    """:data:`UNCONFINED` without ``sandbox``; otherwise check, before
    anything is made, that every path of ``allow_write`` exists and that
    the kernel can enforce the sandbox (the checks' answers are kept for
    later runs, never in ``work_tree``: the user's).

    Raises:
        IsopatchError: ``no-such-file`` (and the like) for a path,
            ``sandbox-unavailable``.
    """
    if not sandbox:
        return UNCONFINED
    for path in allow_write:
        try:
            os.stat(path)
        except OSError as exc:
            raise known_os_failure(f"cannot allow writes to '{path}'", exc) from exc
    from . import namespaces_check

    try:
        bwrap = namespaces_check.check_available(allow_network=allow_network, work_tree=work_tree)
    except IsopatchError as failure:
        from .bwrap import find_bwrap
        from .refusal import explained

        # what refuses the namespaces, where bubblewrap itself is there
        about = "namespace" in failure.message and not isinstance(find_bwrap(), str)
        raise (explained(failure) if about else failure) from None
    return ConfinementPlan(NAMESPACES, tuple(allow_write), allow_network, bwrap)
