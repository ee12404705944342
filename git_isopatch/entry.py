"""The entry point of the ``git-isopatch`` executable and of ``python -m
git_isopatch``: a Ctrl-C is acted on from the first moment, and one that
comes before the run begins ends it with 130, nothing made (design: Exit
status, 128+N).  Only the interpreter's own start and the first lines of
the script pip generates (``import re``) come before this module.

The command line's imports (typer and the package's modules, then pygit2
when a run begins) take 0.1-0.6 s, and Python's own SIGINT handler raises
``KeyboardInterrupt`` wherever the main thread is.  During those imports
that is before any ``try`` of ours (a traceback); inside a callback or a
finaliser (a weakref callback of importlib's module locks, logging's
at-fork hook, a ``__del__``) CPython reports it as "Exception ignored"
and goes on, so the Ctrl-C is lost and the run goes on with it.

So :func:`main` installs :class:`Interrupts` as the SIGINT handler before
it imports anything heavy, and imports the command line inside a ``try``
of its own.  The handler records the first SIGINT and raises
``KeyboardInterrupt`` for it, once (the same Ctrl-C reaches us twice
through ``git``, which passes on what its own process group got); one a
finaliser swallowed is not lost but acted on at the next check: after the
imports; when the run's own handler takes over, before anything is made
(:func:`.sandbox.command.forward_signals`); and at exit, at the latest.

The process ends by :func:`end` (``os._exit``), not by the interpreter's
teardown: a short-lived tool need not free, one by one, the objects of
every module it loaded (10-40 ms of a run) for the kernel to take the
memory back anyway.  What the teardown did that matters is done first:
the threads that are not daemons are joined, the ``atexit`` handlers run
(logging's flush among them), stdout and stderr are flushed (a failure to
write the result is a failure: 128, not a lost result and exit 0), and
the children that ended are reaped.
"""

from __future__ import annotations

# ``_signal``: ``signal`` builds its enums first (1-2 ms before the handler is in)
import _signal as signal
import gc
import os
import sys

TYPE_CHECKING = False  # not ``typing``'s: nothing but what the handler needs comes first
if TYPE_CHECKING:
    from typing import Any, NoReturn

#: The exit status of a run a SIGINT stopped (git's: 128 + the signal).
INTERRUPTED = 128 + signal.SIGINT


class Interrupts:
    """The SIGINT handler outside a run's own: records the first SIGINT in
    :attr:`received` and raises ``KeyboardInterrupt`` for it; a later one
    finds the first already acted on (or to be) and does nothing.  As
    ``sys.unraisablehook`` it drops the ``KeyboardInterrupt`` a finaliser
    swallowed (recorded: it still stops the run) and hands anything else
    to the hook it replaced."""

    def __init__(self, unraisable: Any) -> None:
        self.received: int | None = None
        self._unraisable = unraisable

    def __call__(self, signum: int, _frame: object) -> None:
        if self.received is not None:
            return
        self.received = signum
        raise KeyboardInterrupt

    def unraisable(self, what: Any) -> None:
        if self.received is not None and issubclass(what.exc_type, KeyboardInterrupt):
            return
        self._unraisable(what)

    @classmethod
    def install(cls) -> Interrupts | None:
        """Install the handler; not where SIGINT is not Python's own (a
        background job of a script ignores it: so do we)."""
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return None
        interrupts = cls(sys.unraisablehook)
        sys.unraisablehook = interrupts.unraisable
        signal.signal(signal.SIGINT, interrupts)
        return interrupts


def main() -> NoReturn:
    """``git isopatch``: the command line (:func:`.usage.main`), with a
    Ctrl-C acted on from the first moment (the module's docstring); the
    process ends by :func:`end`."""
    try:
        _command_line()
    except SystemExit as done:
        end(done.code if isinstance(done.code, int) else 1 if done.code else 0)
    except KeyboardInterrupt:  # one the handler raised after the run's own checks
        end(INTERRUPTED)


def _command_line() -> NoReturn:
    """Run the command line, which ends by ``SystemExit``."""
    try:
        interrupts = Interrupts.install()
        gc.disable()  # while the modules load: see usage.main
        from .cli import main as command_line  # typer, the package's modules
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED) from None
    if interrupts is None:
        command_line()
    if interrupts.received is not None:  # a finaliser swallowed it during the imports
        raise SystemExit(INTERRUPTED)
    try:
        command_line()
    except KeyboardInterrupt:  # where usage.main has no try (typer building its parser)
        raise SystemExit(INTERRUPTED) from None
    except SystemExit as done:
        # one swallowed once nothing checked any more: the exit status still says it
        status = done.code if isinstance(done.code, int) else 1 if done.code else 0
        if interrupts.received is not None and status <= 128:
            raise SystemExit(INTERRUPTED) from None
        raise


def end(status: int) -> NoReturn:
    """End the process with ``status`` without the interpreter's teardown,
    once what the teardown would have finished is done: the threads that
    are not daemons joined, the ``atexit`` handlers run, stdout and stderr
    flushed, the children that ended reaped.  Output that cannot be
    written makes a successful run fail: one ``fatal:`` line (where stderr
    can take it), 128."""
    try:
        status = _finish(status)
    except KeyboardInterrupt:  # a Ctrl-C while waiting for a slow reader
        status = INTERRUPTED
    reap_children()
    os._exit(status)


def _finish(status: int) -> int:
    """What :func:`end` does before the end; the exit status."""
    import atexit
    import contextlib

    threading = sys.modules.get("threading")
    if threading is not None:  # the non-daemon threads, as the interpreter waits for them
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()  # logging's flush among them
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError) as exc:  # ValueError: closed
            if stream is sys.stdout and status == 0:
                status = 128
                reason = getattr(exc, "strerror", None) or exc
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    sys.stderr.write(f"fatal: could not write to stdout: {reason}\n")
                    sys.stderr.flush()
    return status


def reap_children() -> None:
    """Reap every child of this process that has ended (a zombie), waiting
    for none that still runs."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child at all
            return
        if pid == 0:  # children left, none ended
            return
