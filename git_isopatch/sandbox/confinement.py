"""The command's confinement as one value the procedure enters.

:func:`plan` checks, before anything exists, what the run asks for and that the machine
can give it (a :class:`ConfinementPlan`; :data:`UNCONFINED` without ``--sandbox``).
:func:`confine` enters the plan for one worktree and yields a :class:`Confinement`: the
null object :data:`NONE` when unconfined, else the mechanism's own (:class:`Namespaced`:
the command, then git-isopatch's own git on what it left, in the same namespaces).  All
that runs in the worktree goes through it: the command (:meth:`Confinement.run_command`)
and git-isopatch's own git after it (:class:`..worktrees.worktree_git.WorktreeGit`
passes :attr:`Confinement.spawn`, where git runs, down to the git layer).

A new mechanism is one more ``mechanism`` name in :func:`plan`, one
subclass of :class:`Confinement` (its ``run_command`` and ``spawn``) and
one branch in :func:`confine`; nothing else changes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from ..git.pinned import NO_STORE_INDEXES, with_config
from ..git.process import Spawn, Spawned
from ..git.result import Err, GitResult, Ok
from ..git.run import quoted_path_entry
from ..git.shared_state import SharedState, SharedWrite, describe_changes, read_shared_state
from ..git.temporary import make_folder
from .command import CommandOutcome, run_command
from .command_outcome import SetUpFailed
from .limits import bound
from .plan import NAMESPACES, NO_MECHANISM, UNCONFINED, ConfinementPlan, plan
from .refusal import SANDBOX_VARIABLE

__all__ = ["NAMESPACES", "NO_MECHANISM", "UNCONFINED", "ConfinementPlan", "plan"]

if TYPE_CHECKING:  # loaded only by the runs that need it: a plain run starts faster
    from ..git.repo import UserRepository
    from .cache_layer import Held
    from .inside import Inside
    from .layers import WorktreeOverlay
    from .namespaces import Namespaces
    from .run_policy import RunPlaces


class Confinement:
    """The null object: the command and git run with the user's rights."""

    #: True when the command runs confined.
    confined = False
    #: The worktree may go back to the pool after the run: nothing the
    #: command started can still write in it.
    poolable = True
    #: The run's patches, once written: the Git LFS objects they name go home.
    patches: tuple[str, ...] = ()

    @property
    def spawn(self) -> Spawn | None:
        """Where git-isopatch's own git runs on what the command left (the
        git layer's :class:`..git.process.Spawn`); ``None``: here."""
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
        meanwhile: Callable[[], None] | None = None,
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
        )

    def shared_writes(
        self, before: GitResult[SharedState], repository: UserRepository, env: Mapping[str, str]
    ) -> tuple[SharedWrite, ...]:
        """What changed in the refs and configuration the worktree shares with
        the user's repository since ``before`` (empty when either look fails)."""
        match before:
            case Ok(old):
                pass
            case Err():
                return ()
        match read_shared_state(repository.git_dir, repository.common_dir, env=env):
            case Ok(new):
                return tuple(describe_changes(old, new))
            case Err():
                return ()

    def outside_writes(self, common_dir: str) -> tuple[str, ...]:
        """The paths outside the worktree (and the git directory) the
        command wrote and that were discarded: none unconfined."""
        return ()

    def objects(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """``env`` for git-isopatch's own git in the worktree (not in a
        submodule's git directory): unchanged unconfined."""
        return env

    def planted(self, admin_dir: str, env: Mapping[str, str]) -> list[str]:
        """What the command left in the git directory (and the private folder
        ``admin_dir``) that git must not meet: nothing unconfined, where git
        reads what it always read (:func:`.layer_objects.unsafe_in_git_dir`)."""
        return []

    def end(self) -> None:
        """Nothing the command started runs any more, nor anything here after
        this; what it wrote outside the worktree is removed (:func:`confine`)."""


#: The confinement of an unconfined run.
NONE = Confinement()


#: How often a command is launched again when bubblewrap could not set its namespaces
#: up while a mount came or went (:meth:`Namespaced.run_command`): a busy machine
#: stretches bubblewrap's set-up to a few hundred milliseconds, and a mount that lives
#: that long beneath a copy-on-write folder then fails several attempts in a row (5 of
#: 8 under a load of 10 here); every attempt plans on the mount table of its moment.
RELAUNCHES = 32


class Namespaced(Confinement):
    """The command in bubblewrap's namespaces (:mod:`.namespaces`): a read-only system,
    copy-on-write home, temporary folders, checkout and git directory, its own PID, IPC
    and network namespaces; then, in the same namespaces, served by their launcher
    (:mod:`.inside`), git-isopatch's own git on what it left (:attr:`spawn`); ``layers``:
    the folder of their layers, ``caches``: their cache layer."""

    confined = True

    def __init__(
        self, namespaces: Namespaces, common_dir: str, private_tmp: str, layers: str, caches: Held
    ) -> None:
        self.namespaces = namespaces
        self.common_dir = common_dir
        self.private_tmp = private_tmp
        self.layers = layers
        self.caches = caches
        self.inside: Inside | None = None
        self._objects: str | None = None
        self._ended = False
        self._removed = False

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
        meanwhile: Callable[[], None] | None = None,
    ) -> CommandOutcome:
        """The command through the launcher; its namespaces then stay, served;
        ``meanwhile`` called once bubblewrap has started, before it is waited for.

        A mount made or removed under a copy-on-write folder, or a folder
        overlaid removed, since the layers were planned (their plan moved,
        :meth:`.namespaces.Namespaces.plan_moved`) has them planned again
        before the launch; when bubblewrap could not set the namespaces up
        (the command did not run) while the plan moved meanwhile, the command
        is launched again on a new plan, at most :data:`RELAUNCHES` times;
        when it did not move and the plan holds cache layers, once more
        without them (a git directory on a file system overlayfs refuses as
        an upper layer: an overlay, FUSE), its cache writes discarded."""
        launched = 0
        while True:
            if self.namespaces.plan_moved():
                self.namespaces = self.namespaces.replanned()
            wrapped = self.namespaces.launch(argv, cwd=cwd, env=env, stderr=stderr)
            wrapped.meanwhile = meanwhile
            launched += 1
            try:
                return run_command(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdout=stdout,
                    stderr=stderr,
                    timeout=timeout,
                    signal_state=signal_state,
                    sandbox=wrapped,
                )
            except SetUpFailed:
                if launched > RELAUNCHES:
                    raise
                if not self.namespaces.plan_moved():
                    if not self.namespaces.policy.caches:
                        raise
                    self.namespaces = self.namespaces.replanned(caches=False)
            finally:
                self.inside = wrapped.serving()
                wrapped.close()

    @property
    def spawn(self) -> Spawn:  # type: ignore[override]
        return self._spawn

    def _spawn(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str | None, fds: tuple[int, int, int]
    ) -> Spawned:
        """``argv`` inside the run's namespaces: the command's, or new ones of the same
        policy and layers when those are gone; git's global configuration there the
        user's, not what the command wrote (:mod:`.global_config`).

        Raises:
            subprocess.SubprocessError: the namespaces cannot be had.
        """
        if self._ended:
            raise subprocess.SubprocessError("the sandbox's namespaces ended")
        if self.inside is None or self.inside.gone:
            self.inside = self.namespaces.serve()
        program = self.inside.program(argv[0], env) if "/" not in argv[0] else argv[0]
        own = self.namespaces.policy.global_config.environment(env)
        return self.inside.spawn([program, *argv[1:]], env=own, cwd=cwd, fds=fds)

    def end(self) -> None:
        """Every process of the namespaces gone (:meth:`.inside.Inside.end`); then, before
        their mounts go (:meth:`close`), the LFS objects :attr:`patches` name kept
        (:mod:`.lfs_objects`), their layers and ``TMPDIR`` removed, the caches settled."""
        self._ended = True
        if self.inside is not None:
            self.inside.end()
        if not self._removed:
            self._removed = True
            from .lfs_objects import bring_lfs_objects_home
            from .untrusted import remove_tree

            bring_lfs_objects_home(self.namespaces, self.common_dir, self.patches)
            remove_tree(self.private_tmp)
            remove_tree(self.layers)
            self.caches.settle()

    def close(self) -> None:
        """End the namespaces, wait for bubblewrap: nothing runs inside."""
        self._ended = True
        if self.inside is not None:
            self.inside.close()
            self.inside = None
        self.namespaces.mounts.close()

    def shared_writes(
        self, before: GitResult[SharedState], repository: UserRepository, env: Mapping[str, str]
    ) -> tuple[SharedWrite, ...]:
        """What the command changed in its copy-on-write view of the refs,
        configuration and watched files, each marked discarded."""
        match before:
            case Ok(old):
                pass
            case Err():
                return ()
        from .layer_state import shared_state_in

        after = shared_state_in(self.namespaces, repository, old, env, self.spawn)
        if after is None:
            return ()
        return tuple(w._replace(discarded=True) for w in describe_changes(old, after))

    def objects(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """``env`` with an object store of its own for what git writes (``add
        -N``'s empty blob: the repository's may not be writable inside, another
        user's through ``safe.directory``), the command's view an alternate
        (no index of it read), and the store ``env`` names (a session's) another."""
        if self._objects is None:
            self._objects = make_folder(self.private_tmp, "objects-")
        store = quoted_path_entry(os.path.join(self.common_dir, "objects"))
        if env.get("GIT_OBJECT_DIRECTORY"):
            store = f"{quoted_path_entry(env['GIT_OBJECT_DIRECTORY'])}:{store}"
        return {
            **with_config(env, NO_STORE_INDEXES),
            "GIT_OBJECT_DIRECTORY": self._objects,
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": store,
        }

    def planted(self, admin_dir: str, env: Mapping[str, str]) -> list[str]:
        from .layer_objects import unsafe_in_git_dir

        return unsafe_in_git_dir(self.namespaces, self.common_dir, admin_dir, env, self.spawn)

    def outside_writes(self, common_dir: str) -> tuple[str, ...]:
        inside = os.path.realpath(common_dir).rstrip("/") + "/"
        return tuple(
            p for p in self.namespaces.outside_writes() if not (p + "/").startswith(inside)
        )


def _fileno(stream: int | IO[bytes] | None, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


@contextlib.contextmanager
def confine(
    plan: ConfinementPlan,
    *,
    worktree: str | WorktreeOverlay,
    admin_dir: str,
    common_dir: str,
    private_dir: str,
    env: dict[str, str],
    streams: tuple[int | IO[bytes] | None, IO[bytes] | None],
    top: str | None = None,
) -> Iterator[Confinement]:
    """Enter ``plan`` for the worktree (its folder, or over a base tree its
    overlay, :class:`.layers.WorktreeOverlay`) of the checkout whose top
    folder is ``top``: :data:`NONE` unconfined; else a private ``TMPDIR`` (set in
    ``env``) in the run's ``private_dir`` and the namespaces, the files
    behind the command's ``streams`` (stdout, stderr) staying writable.
    On leaving, the namespaces end (:meth:`Namespaced.end`, maybe called
    earlier: what they wrote goes while bubblewrap ends); then it is
    waited for, and its cgroups and the cache layer's lock go.

    Raises:
        IsopatchError: ``sandbox-unavailable``.
        OSError: the private ``TMPDIR`` cannot be made.
    """
    if not plan.confined:
        yield NONE
        return
    from .cache_layer import cache_root, held
    from .run_policy import cache_folders
    from .untrusted import remove_tree

    private_tmp = make_folder(private_dir, "tmp-")
    layers = os.path.join(private_dir, "layers")
    try:
        temporary = env.get("TMPDIR")
        env["TMPDIR"] = private_tmp
        stdout, stderr = streams
        files = _stream_files([_fileno(stdout, 1), _fileno(stderr, 2)])
        places = _places(worktree, admin_dir, common_dir, top, private_tmp, env, temporary)
        kept = cache_folders(places, env, (*plan.allow_write, *files)) if plan.cache.kept else ()
        # read as the command left them where they can be: what it may really write
        places = places._replace(global_config=places.global_config.keeping(plan.allow_write))
        with (
            held(cache_root(common_dir), kept, plan.cache.limit) as caches,
            bound(plan.limits) as bounds,  # its groups go once the namespaces have
        ):
            namespaced = _namespaced(plan, places, env, files, layers, caches)
            namespaced.namespaces = namespaced.namespaces.bounded(bounds)
            try:
                yield namespaced
            finally:
                namespaced.end()  # their processes gone: the layers go before their mounts
                namespaced.close()  # bubblewrap gone: its cgroups can go, its caches be let go
    finally:
        remove_tree(private_tmp)  # a failure before the namespaces left them
        remove_tree(layers)


def _places(
    worktree: str | WorktreeOverlay,
    admin_dir: str,
    common_dir: str,
    top: str | None,
    private_tmp: str,
    env: Mapping[str, str],
    temporary: str | None,
) -> RunPlaces:
    """The places of the run (:class:`.run_policy.RunPlaces`)."""
    from . import availability
    from .global_config import GlobalConfig
    from .run_policy import RunPlaces

    top = top or os.path.dirname(common_dir)
    overlay = None if isinstance(worktree, str) else worktree
    return RunPlaces(
        worktree=worktree if overlay is None else overlay.target,
        admin_dir=admin_dir,
        common_dir=common_dir,
        top=top,
        tmpdir=private_tmp,
        home=env.get("HOME"),
        temporary=(temporary,) if temporary and os.path.isabs(temporary) else (),
        runtime_dir=env.get("XDG_RUNTIME_DIR"),
        kept_answers=availability.kept_folder(work_tree=top),
        overlay=overlay,
        global_config=GlobalConfig.of(
            env,
            kept=(
                ("the worktree", worktree if overlay is None else overlay.target),
                ("the worktree's admin folder", admin_dir),
                ("the run's temporary folder", private_tmp),
                ("the git directory", common_dir),
            ),
        ),
    )


def _namespaced(
    plan: ConfinementPlan,
    places: RunPlaces,
    env: dict[str, str],
    streams: Sequence[str],
    layers: str,
    caches: Held,
) -> Namespaced:
    """The namespaces of :func:`.run_policy.run_policy` for ``places``,
    their layers made in ``layers``, the cache layers ``caches`` above
    them; the session's socket variables leave ``env``."""
    from . import namespaces
    from .run_policy import SESSION_VARIABLES, run_policy
    from .seccomp import seccomp_filter

    for name in SESSION_VARIABLES:
        env.pop(name, None)
    env[SANDBOX_VARIABLE] = "1"  # a run inside says why it has no sandbox of its own
    assert plan.bwrap is not None
    policy = run_policy(
        places,
        allow_write=plan.allow_write,
        allow_network=plan.allow_network,
        streams=streams,
        caches=caches.layers,
    )
    spaces = namespaces.Namespaces(plan.bwrap, policy, layers, seccomp_filter())
    spaces.prepare()
    return Namespaced(spaces, places.common_dir, places.tmpdir, layers, caches)


def _stream_files(fds: Sequence[int]) -> tuple[str, ...]:
    """The regular files behind ``fds`` (the command's output), by path."""
    import stat

    found = []
    for fd in fds:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.fstat(fd).st_mode):
                path = os.readlink(f"/proc/self/fd/{fd}")
                if os.path.isabs(path) and os.path.isfile(path):
                    found.append(path)
    return tuple(found)
