"""The command's confinement as one value the procedure enters.

:func:`plan` checks, before anything exists, what the run asks for and
that the machine can give it (a :class:`ConfinementPlan`; :data:`UNCONFINED`
without ``--sandbox``).  :func:`confine` enters the plan for one worktree and
yields a :class:`Confinement`: the null object :data:`NONE` when
unconfined, else the mechanism's own (:class:`Landlocked`, on
:mod:`.sandbox`).  Everything that runs in the worktree goes through it:
the command (:meth:`Confinement.run_command`) and git-isopatch's own git
calls (:class:`.worktree_git.WorktreeGit`, which passes :attr:`Confinement.hook`
down to the git layer as an opaque ``preexec_fn``).

A new mechanism is one more ``mechanism`` name in :func:`plan`, one
subclass of :class:`Confinement` (its ``run_command`` and ``hook``) and one
branch in :func:`confine`; nothing else changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from .command import CommandOutcome, run_command
from .errors import known_os_failure

if TYPE_CHECKING:  # loaded only by the runs that need it: a plain run starts faster
    from .sandbox import Sandbox

#: The mechanisms a plan names.
NO_MECHANISM = "none"
LANDLOCK = "landlock"


@dataclass(frozen=True)
class ConfinementPlan:
    """The confinement of one run, checked before anything is made.

    Attributes:
        mechanism: :data:`NO_MECHANISM` or :data:`LANDLOCK`.
        allow_write: absolute paths, each existing, the command may write.
        allow_network: keep the network.
        abi: the Landlock ABI :func:`.sandbox.check_available` found.
    """

    mechanism: str = NO_MECHANISM
    allow_write: tuple[str, ...] = ()
    allow_network: bool = False
    abi: int = 0

    @property
    def confined(self) -> bool:
        return self.mechanism != NO_MECHANISM


UNCONFINED = ConfinementPlan()


def plan(sandbox: bool, allow_write: Sequence[str], allow_network: bool) -> ConfinementPlan:
    """:data:`UNCONFINED` without ``sandbox``; otherwise check, before
    anything is made, that every path of ``allow_write`` exists and that
    the kernel can enforce the sandbox.

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
    from .sandbox import check_available

    abi = check_available(allow_network=allow_network)
    return ConfinementPlan(LANDLOCK, tuple(allow_write), allow_network, abi)


class Confinement:
    """The null object: the command and git run with the user's rights."""

    #: True when the command runs confined.
    confined = False

    @property
    def hook(self) -> Callable[[], None] | None:
        """What a child runs between fork and exec to be confined (an
        opaque ``preexec_fn`` for the git layer); ``None`` unconfined."""
        return None

    def run_command(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        stdout: int | IO[bytes] | None,
        stderr: IO[bytes] | None,
        timeout: float | None,
        signal_state: dict[str, Any],
    ) -> CommandOutcome:
        """:func:`.command.run_command`, confined as this value says."""
        return run_command(
            argv,
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            timeout=timeout,
            signal_state=signal_state,
            sandbox=self._sandbox(),
        )

    def _sandbox(self) -> Sandbox | None:
        return None


#: The confinement of an unconfined run.
NONE = Confinement()


class Landlocked(Confinement):
    """A Landlock ruleset, a seccomp filter and (unless allowed) a network
    namespace (:mod:`.sandbox`), entered in each child."""

    confined = True

    def __init__(self, box: Sandbox) -> None:
        self.box = box

    @property
    def hook(self) -> Callable[[], None] | None:
        return self.box.confine

    def _sandbox(self) -> Sandbox | None:
        return self.box


def _fileno(stream: int | IO[bytes] | None, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


@contextlib.contextmanager
def confine(
    plan: ConfinementPlan,
    *,
    worktree: str,
    admin_dir: str,
    common_dir: str,
    private_dir: str,
    env: dict[str, str],
    streams: tuple[int | IO[bytes] | None, IO[bytes] | None],
) -> Iterator[Confinement]:
    """Enter ``plan`` for the worktree: :data:`NONE` unconfined; else a
    private ``TMPDIR`` (set in ``env``, removed afterwards) in the run's
    ``private_dir`` and the ruleset, the files behind the command's
    ``streams`` (stdout, stderr) staying writable.

    Raises:
        IsopatchError: ``sandbox-unavailable``.
        OSError: the private ``TMPDIR`` cannot be made.
    """
    if not plan.confined:
        yield NONE
        return
    from .sandbox import SandboxPolicy, prepare

    private_tmp = tempfile.mkdtemp(prefix="tmp-", dir=private_dir)
    try:
        env["TMPDIR"] = private_tmp
        policy = SandboxPolicy(
            worktree=worktree,
            admin_dir=admin_dir,
            common_dir=common_dir,
            tmpdir=private_tmp,
            allow_write=plan.allow_write,
            allow_network=plan.allow_network,
        )
        stdout, stderr = streams
        box = prepare(policy, abi=plan.abi, streams=[_fileno(stdout, 1), _fileno(stderr, 2)])
        try:
            yield Landlocked(box)
        finally:
            box.close()
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)
