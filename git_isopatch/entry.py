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
"""

from __future__ import annotations

# ``_signal``: ``signal`` builds its enums first (1-2 ms before the handler is in)
import _signal as signal
import gc
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
    Ctrl-C acted on from the first moment (the module's docstring)."""
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
