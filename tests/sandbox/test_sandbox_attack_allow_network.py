"""``--allow-network`` keeps the machine's network namespace, so the
command reaches the abstract unix sockets of the session (design: "What
it does"; README "Not covered").  That door is documented, and it is the
only one the option opens: a session socket under ``$XDG_RUNTIME_DIR``
(where D-Bus, the ssh and gpg agents listen) stays out of reach, and the
variables that name session sockets are still removed.

Real bubblewrap; the listeners are this test's own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from repo_helpers import isopatch

ROOT = Path(__file__).resolve().parents[2]

PROBE = """\
import os, socket, sys
for name, address in (("abstract", b"\\0" + sys.argv[1].encode()), ("runtime", sys.argv[2])):
    peer = socket.socket(socket.AF_UNIX)
    peer.settimeout(5)
    try:
        peer.connect(address)
        print(name, "reached", peer.recv(5).decode())
    except OSError as exc:
        print(name, "refused", type(exc).__name__)
print("dbus", os.environ.get("DBUS_SESSION_BUS_ADDRESS", "unset"))
"""


@contextlib.contextmanager
def _listening(address: str | bytes) -> Iterator[None]:
    """A unix socket at ``address`` that greets whoever connects."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
    server.listen(4)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                peer, _ = server.accept()
                peer.sendall(b"hello")
                peer.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield
    finally:
        server.close()


def test_allow_network_opens_only_the_documented_abstract_sockets(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = make_repo()
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    bus = runtime / "bus"
    # the abstract namespace is the machine's: unique to this run of the
    # suite too, not only to the test (tmp_path's name repeats across runs)
    name = f"isopatch-allow-network-{os.getpid()}-{tmp_path.name}"
    session = {
        **env,
        "XDG_RUNTIME_DIR": str(runtime),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={bus}",
    }
    with _listening(b"\0" + name.encode()), _listening(str(bus)):
        run = isopatch(
            "--porcelain", "--sandbox", "--allow-network", "--",
            sys.executable, "-c", PROBE, name, str(bus), cwd=repo, env=session,
        )  # fmt: skip
    assert run.returncode == 0, run.err
    said = Path(run.fields()["stdout"]).read_text().splitlines()
    assert said[1:] == ["runtime refused ConnectionRefusedError", "dbus unset"], said
    assert said[0] in ("abstract reached hello", "abstract refused ConnectionRefusedError")
    if said[0] == "abstract reached hello":  # a door the user is told of
        manual = " ".join((ROOT / "man" / "git-isopatch.rst").read_text().split())
        assert "abstract ones with **--allow-network**" in manual
