"""The patch holds the command's change and nothing else (design: The patch).

Looked at just before the command (:func:`look_before_command`): the paths
that already differ from the base (:mod:`.git.baseline`), what the
worktree's file system does with case and whether a submodule is not
populated (:mod:`.git.pinned`), and whether the repository's hooks are
there (:mod:`.hooks`).  Used by the extraction: :meth:`Fidelity.left_out`
and :func:`settle_attributes`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from ..git.admin_files import common_dir_of
from ..git.attributes import (
    attributes_changed,
    index_may_track_attributes,
    look_again_at_every_file,
    own_attributes_file,
)
from ..git.baseline import (
    Baseline,
    fingerprint,
    fingerprint_at,
    read_baseline,
    untouched_paths,
    untouched_warning,
)
from ..git.conversion_key import conversion_inputs, entry_inputs
from ..git.pinned import (
    ATTRIBUTES_FILE,
    HOOKS_PATH,
    ignore_case_configured,
    ignore_case_settings,
    read_settings,
    recurse_setting,
    with_config,
)
from ..git.pinned import (
    RECURSE as RECURSE_SETTING,
)
from ..git.process import Spawn
from ..git.record import Record
from ..git.repo import UserRepository
from ..git.result import Err, Ok
from ..git.submodule import list_gitlinks
from ..git.types import CommitId, GitDirPath, WorktreePath
from ..logger import log
from .hooks import missing_hooks_warning

Pairs = tuple[tuple[str, str], ...]


class Fidelity(Record):
    """The worktree just before the command, and the settings pinned for
    git there.

    Attributes:
        baseline: the paths that already differed from the base.
        own_config: for git-isopatch's git calls in the worktree
            (``core.ignoreCase``).
        command_config: for the command (``core.ignoreCase``, and
            ``submodule.recurse=false`` where a submodule is not
            populated).
        conversions: the reading look's answer in a claimed worktree, to
            keep with it when it returns to the pool (:mod:`.conversions`).
        folds_case: git-isopatch's git in the worktree takes names that
            differ only in case for one (``core.ignoreCase`` as pinned,
            else as configured): it then finds an entry of the index by
            another name than the path's.  True where not looked at.
        attributes_file: the worktree's own attributes file, a relative
            ``core.attributesFile`` (:func:`.git.attributes.own_attributes_file`):
            a command that writes it changes the attributes.
    """

    baseline: Baseline = Baseline()
    own_config: Pairs = ()
    command_config: Pairs = ()
    conversions: bytes | None = None
    folds_case: bool = True
    attributes_file: bytes | None = None

    def own_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for git-isopatch's git calls, with :attr:`own_config`."""
        return with_config(env, self.own_config)

    def command_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for the command, with :attr:`command_config`."""
        return with_config(env, self.command_config)

    def left_out(
        self,
        worktree: WorktreePath,
        warn: Callable[[str], None],
        locate: Callable[[bytes], str | None] | None = None,
    ) -> list[str]:
        """The paths of :attr:`baseline` the command left as they were,
        each named by ``warn``: they stay out of the patch.  ``locate``: as
        :func:`..git.baseline.untouched_paths`."""
        paths = untouched_paths(self.baseline, worktree, locate)
        for path in paths:
            warn(untouched_warning(path))
        return paths


class Proof(Record):
    """What a claim proved of a worktree from the pool: no tracked path
    differs from the base as git sees it now (its check found none, and
    nothing was checked out since).

    Attributes:
        tracks_attributes: its index holds a ``.gitattributes``.
        fresh: it was checked out at the base; ``False``: the worktree is a
            session's, as its last step left it, the base that state.
    """

    tracks_attributes: bool
    fresh: bool = True


def look_before_command(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    base: CommitId,
    *,
    repository: UserRepository,
    env: Mapping[str, str],
    exclude: Sequence[str] = (),
    warn: Callable[[str], None],
    proved: Proof | None = None,
) -> Fidelity:
    """Look at the worktree just before the command (after includes and
    submodules are in) of ``repository``'s worktree; warn when the repository's hooks are not there.
    Best effort: a look git cannot make is left out (logged at debug
    level), as the run did without it.

    ``proved``: what a claim proved (:class:`Proof`), so that the look as
    git sees the worktree is not asked.  When an attributes file may apply
    (a tracked ``.gitattributes``: known from the claim, else looked for in
    the index file, :func:`.git.attributes.index_may_track_attributes`; or
    one outside the tree, :func:`attributes_may_apply`), git reads again
    each file a conversion applies to, whatever its stat data
    (:func:`.git.baseline.read_baseline`): a command that changes the
    attributes has git read every file (:func:`settle_attributes`), and a
    path whose checkout alone changes it would then show, racy before the
    command or not.  Without attributes no conversion can change a file
    after checkout, and a proved claim asks git nothing; with them, a
    proved claim takes the answer kept with the worktree for the same
    files, commit and attributes (:func:`_reading_look`).  A proof
    that is not :attr:`Proof.fresh` (a session's later step: ``base`` is
    the state its last step left) takes no look: no checkout made a path
    differ."""
    settings = read_settings(admin_dir, env)
    own, told = map(tuple, ignore_case_settings(worktree, settings))
    mine = own_attributes_file(settings.get(ATTRIBUTES_FILE))
    paths: list[str] = []
    match list_gitlinks(worktree, git_dir=admin_dir, env=env):
        case Ok(links):
            paths = [link.path for link in links]
        case Err(error):
            log.debug("no submodule list: %s", error.message())
    command = told + tuple(recurse_setting(worktree, paths, settings))
    pinned = with_config(env, own)
    said = missing_hooks_warning(
        worktree, repository.top, settings.get(HOOKS_PATH), repository.prefix
    )
    if said is not None:
        warn(said)
    baseline = Baseline()
    if proved is not None and not proved.fresh:
        return Fidelity(baseline, own, command, attributes_file=mine)
    if proved is not None:
        tracks_attributes = proved.tracks_attributes
    else:
        tracks_attributes = index_may_track_attributes(admin_dir)
    conversions = tracks_attributes or attributes_may_apply(admin_dir, settings, env)
    if proved is not None and not conversions:
        return Fidelity(baseline, own, command, attributes_file=mine)
    if proved is not None:
        baseline, answer = _reading_look(worktree, admin_dir, base, settings, pinned, exclude, own)
        return Fidelity(baseline, own, command, answer, attributes_file=mine)
    match read_baseline(
        worktree,
        base,
        git_dir=admin_dir,
        env=pinned,
        exclude=exclude,
        conversions=conversions,
    ):
        case Ok(baseline):
            pass
        case Err(error):
            log.debug("no look before the command: %s", error.message())
    return Fidelity(baseline, own, command, attributes_file=mine)


#: Paths of changed entries above which the reading look reads every file
#: a conversion may change instead of naming them (the command line's
#: length; each named path costs git a pathspec match per entry).
NAMED_AT_MOST = 256


def _reading_look(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    base: CommitId,
    settings: Mapping[str, str | None],
    env: Mapping[str, str],
    exclude: Sequence[str],
    own: Pairs,
) -> tuple[Baseline, bytes | None]:
    """The look of a proved claim where attributes apply: the paths a
    conversion changes, with their fingerprints, and the answer to keep
    (:mod:`.conversions`).  An answer kept in ``admin_dir`` for the same
    inputs (:mod:`.git.conversion_key`: the attributes, the configuration,
    the look's ``exclude`` paths and ``own`` pinned settings) and the same
    index file stands as it is; for the same inputs and another index, it
    stands for every path whose index entry is the one it was found for,
    and git reads only the files of the other entries (all of them when
    more than :data:`NAMED_AT_MOST`); without one, every file a conversion
    may change.  ``env``: for git, with ``own``."""
    from .conversions import encode, kept_answer  # a claimed worktree's: not over a base tree

    extra = [*exclude, "\0", *(f"{key}={value}" for key, value in own)]
    inputs = conversion_inputs(worktree, admin_dir, settings=settings, env=env, extra=extra)
    kept = None if inputs is None else kept_answer(admin_dir)
    if inputs is not None and kept is not None and kept.whole == inputs.key:
        return Baseline({path: fingerprint(worktree, path) for path in kept.paths}), kept.data
    per_entry = None if inputs is None else entry_inputs(inputs, worktree, len(base) // 2)
    same: list[bytes] = []
    read: bool | list[bytes] = True
    if per_entry is not None and kept is not None and kept.key == per_entry.key:
        entries = per_entry.entries
        same = [path for path in kept.paths if entries.get(path) in kept.entries]
        changed = [path for path, digest in entries.items() if digest not in kept.entries]
        if len(changed) <= NAMED_AT_MOST:
            read = changed
    found = {path: fingerprint(worktree, path) for path in same}
    if read:
        match read_baseline(
            worktree,
            base,
            git_dir=admin_dir,
            env=env,
            exclude=exclude,
            whole=False,
            conversions=read,
        ):
            case Ok(baseline):
                found.update(baseline.paths)
            case Err(error):
                log.debug("no look before the command: %s", error.message())
                return Baseline(), None
    if inputs is None or per_entry is None:
        return Baseline(found), None
    return Baseline(found), encode(inputs.key, per_entry, found)


def attributes_may_apply(
    admin_dir: GitDirPath, settings: Mapping[str, str | None], env: Mapping[str, str]
) -> bool:
    """Whether an attributes file outside the tree may apply to the
    worktree (gitattributes(5)): ``core.attributesFile`` set, the default
    global one (``$XDG_CONFIG_HOME/git/attributes``, else
    ``$HOME/.config/git/attributes``) or ``info/attributes`` present."""
    if ATTRIBUTES_FILE in settings:
        return True
    candidates = [os.path.join(admin_dir, "info", "attributes")]
    xdg = env.get("XDG_CONFIG_HOME") or (env.get("HOME") and os.path.join(env["HOME"], ".config"))
    if xdg:
        candidates.append(os.path.join(xdg, "git", "attributes"))
    candidates += [os.path.join(common_dir_of(admin_dir), "info", "attributes")]
    return any(os.path.lexists(path) for path in candidates)


def look_over_base_tree(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    *,
    repository: UserRepository,
    env: Mapping[str, str],
    settings: Mapping[str, str | None] | None,
    warn: Callable[[str], None],
    baseline: Sequence[bytes],
    locate: Callable[[bytes], str | None],
) -> Fidelity:
    """:func:`look_before_command` for a run over a base tree, where the
    worktree's folder holds only its start layer and ``locate`` says where
    a path lies before the command: what the base tree's look found once
    (``baseline``, :mod:`.base_trees`) with each path's fingerprint now;
    the settings as in a worktree of its own (``settings``, when read
    already; the submodules listed only where ``submodule.recurse`` needs
    them)."""
    settings = read_settings(admin_dir, env) if settings is None else settings
    own, command = map(tuple, ignore_case_settings(worktree, settings))
    if settings.get(RECURSE_SETTING, "false") not in ("false", "no", "off", "0"):
        modules = locate(b".gitmodules")
        paths: list[str] = []
        if modules is not None:
            match list_gitlinks(os.path.dirname(modules), git_dir=admin_dir, env=env):
                case Ok(links):
                    paths = [link.path for link in links]
                case Err(error):
                    log.debug("no submodule list: %s", error.message())
        unpopulated = [p for p in paths if locate(os.fsencode(p) + b"/.git") is None]
        command += tuple(recurse_setting(worktree, unpopulated, settings))
    hooks = settings.get(HOOKS_PATH)
    if hooks and locate(os.fsencode(hooks)) is None:
        said = missing_hooks_warning(worktree, repository.top, hooks, repository.prefix)
        if said is not None:
            warn(said)
    found = {path: fingerprint_at(locate(path)) for path in baseline}
    folds = dict(own).get("core.ignoreCase", "true" if ignore_case_configured(settings) else "")
    mine = own_attributes_file(settings.get(ATTRIBUTES_FILE))
    return Fidelity(Baseline(found), own, command, folds_case=folds == "true", attributes_file=mine)


def settle_attributes(
    worktree: WorktreePath,
    admin_dir: GitDirPath,
    base: CommitId,
    attributes: Sequence[bytes],
    *,
    env: Mapping[str, str],
    info_changed: bool = False,
    spawn: Spawn | None = None,
) -> bool:
    """When the command changed the attributes (a ``.gitattributes`` of
    ``attributes`` differs from the base, or ``info/attributes`` changed:
    ``info_changed``), make git compare every tracked file's content before
    the diff (:func:`.git.attributes.look_again_at_every_file`), so that the
    patch does not depend on git's stat cache.  Best effort.

    Returns:
        whether they changed (then every path may differ)."""
    changed = info_changed
    if not changed:
        match attributes_changed(
            worktree, base, attributes, git_dir=admin_dir, env=env, spawn=spawn
        ):
            case Ok(changed):
                pass
            case Err(error):
                log.debug("attributes not compared: %s", error.message())
                changed = True  # looking again costs time, never the patch
    if changed:
        try:
            look_again_at_every_file(admin_dir)
        except OSError as exc:
            log.debug("index not touched: %s", exc)
    return changed
