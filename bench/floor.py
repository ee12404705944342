"""The floor of a run: what every ``git isopatch`` run pays for the
libraries the design card names before its first git process can start.

A typer app parses ``-q -o <file> -- <command>``, pygit2 (loaded without
reading a certificate, as the tool loads it) opens the repository of the
current folder and resolves ``HEAD``; then the process ends.  It does
what a short-lived tool may do to start fast (the garbage collector off
while the modules load, no interpreter teardown once stdout and stderr are
flushed), so that the floor is the tuned one.
``bench/compare.py`` starts it as ``git isopatch-floor -q -o x -- true``,
through git as the tool is started, and compares it with the time from the
tool's exec to its first git process.  Standard library, typer and pygit2.
"""

import gc
import os
import sys
import types

gc.disable()

# pygit2 without the TLS set-up of a network transport, as the tool loads it
# (git_isopatch/git/library.py): OpenSSL finds no certificate file, and the
# ``ssl`` pygit2.settings imports names none (the real one is not loaded).
os.environ["SSL_CERT_FILE"] = os.path.join(os.path.dirname(__file__), "no-certificates.pem")
_no_paths = types.SimpleNamespace(cafile=None, capath=os.path.dirname(__file__))
_ssl = types.ModuleType("ssl")
_ssl.DefaultVerifyPaths = types.SimpleNamespace
_ssl.get_default_verify_paths = lambda: _no_paths
sys.modules["ssl"] = _ssl
import pygit2  # noqa: E402

del sys.modules["ssl"], os.environ["SSL_CERT_FILE"]
import typer  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def floor(
    command: list[str] = typer.Argument(None),  # noqa: B008 (typer's own idiom)
    quiet: bool = typer.Option(False, "-q", "--quiet"),
    output: str = typer.Option(None, "-o", "--output"),
) -> None:
    """Parse the options, open the repository, resolve HEAD."""
    repo = pygit2.Repository(pygit2.discover_repository(os.getcwd()))
    repo.revparse_single("HEAD").peel(pygit2.Commit)


if __name__ == "__main__":
    try:
        app(sys.argv[1:], standalone_mode=False)
        status = 0
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
