"""``git isopatch --sandbox`` end to end: a hostile command cannot write
outside its worktree or reach the network, while the work it is there for
(edits, ``git commit`` inside the worktree) still comes back as the right
patch; where the kernel cannot enforce it, nothing runs.

Real kernel, real git; the network tests use 127.0.0.1 only.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from repo_helpers import ISOPATCH, Run, apply_to_clean_checkout, git, isopatch, repo_state
from sandbox_helpers import NO_NAMESPACES, loopback_server, refuse_syscall

HOSTILE = textwrap.dedent(
    """\
    # every way out the containment issue lists; each prints ESCAPED if it works
    try() { if sh -c "$1" 2>/dev/null; then echo "ESCAPED: $1"; else echo "denied: $1"; fi; }
    try 'echo pwned > "$CHECKOUT/README"'
    try 'echo pwned > "$CHECKOUT/dropped"'
    try 'git tag evil'
    try 'git branch evil'
    try 'git config user.name evil'
    try 'echo x >> README && git stash'
    git checkout -q -- README
    try 'echo x > "$HOME/.profile"'
    try 'echo x > deps/lib.js'
    try 'ln -s "$CHECKOUT/README" planted && echo x > planted'
    rm -f planted
    try 'setsid sh -c "echo x > \\"$CHECKOUT/from-setsid\\""'
    try 'echo x > "$CHECKOUT/.git/hooks/pre-commit"'
    try 'rm -rf "$CHECKOUT/.git/refs/heads"'
    # and the work it is there for
    echo edited >> README
    git add README && git commit -q -m "inside" && echo committed
    echo new > new.txt
    echo "$TMPDIR" > tmpdir-seen.txt && echo scratch > "$TMPDIR/scratch" && echo tmp-ok
    """
)


def _repo_with_deps(make_repo) -> Path:
    repo = make_repo({"README": "hello\n", ".gitignore": "deps/\n"})
    (repo / "deps").mkdir()
    (repo / "deps" / "lib.js").write_text("module.exports = 1\n")
    return repo


def _output(run: Run, stream: str = "stdout") -> str:
    return Path(run.fields()[stream]).read_text()


def test_hostile_command_leaves_the_repository_bit_identical(
    env, make_repo, tmp_path: Path, no_leftovers
) -> None:
    repo = _repo_with_deps(make_repo)
    script = tmp_path / "hostile.sh"
    script.write_text(HOSTILE)
    home = Path(env["HOME"])
    home_before = sorted(home.rglob("*"))
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain",
        "--sandbox",
        "--link",
        "deps",
        "--",
        "sh",
        script,
        cwd=repo,
        env={**env, "CHECKOUT": str(repo)},
    )
    assert run.returncode == 0, run.err
    out = _output(run)
    # each write lands in a copy-on-write layer, discarded: none reaches
    assert "committed" in out and "tmp-ok" in out, out + _output(run, "stderr")
    assert repo_state(repo, env) == before
    assert sorted(home.rglob("*")) == home_before
    shared = [line for line in run.out.splitlines() if line.startswith("shared-write ")]
    assert shared and all(line.endswith(" discarded") for line in shared), run.out
    for name in ("refs/tags/evil", "refs/heads/main", "refs/stash", "config", "hooks/pre-commit"):
        assert any(line.startswith(f"shared-write {name} ") for line in shared), (name, shared)
    assert any(line.startswith("outside-write ") for line in run.out.splitlines()), run.out
    assert "outside its worktree" not in run.err, "the porcelain lists them, stderr need not"
    git("fsck", "--strict", cwd=repo, env=env)
    checkout = apply_to_clean_checkout(
        repo, run.fields()["base"], Path(run.fields()["patch"]), tmp_path / "checkout", env
    )
    assert (checkout / "README").read_text() == "hello\nedited\n"
    assert (checkout / "new.txt").read_text() == "new\n"
    private = Path((checkout / "tmpdir-seen.txt").read_text().strip())
    assert private.parent == Path(run.fields()["patch"]).parent, "TMPDIR in the private folder"
    assert not private.exists(), "the command's TMPDIR is removed after the run"


def test_without_sandbox_the_same_command_escapes(env, make_repo, tmp_path: Path) -> None:
    """The hostile script does reach the repository when not confined:
    the test above shows the sandbox, not a broken script."""
    repo = _repo_with_deps(make_repo)
    script = tmp_path / "hostile.sh"
    script.write_text(HOSTILE)
    run = isopatch(
        "--porcelain", "--link", "deps", "--", "sh", script,
        cwd=repo, env={**env, "CHECKOUT": str(repo)},
    )  # fmt: skip
    assert _output(run).count("ESCAPED") >= 10, _output(run)


def test_writes_through_a_link_are_named_by_the_folder_holding_them(env, make_repo) -> None:
    """A tool's cache written through ``--link`` (``node_modules/.cache``,
    as eslint and xo write it) is named, not the checkout's top."""
    repo = make_repo({".gitignore": "node_modules/\n"})
    (repo / "node_modules" / "pkg").mkdir(parents=True)
    (repo / "node_modules" / "pkg" / "index.js").write_text("a\n")
    write = "mkdir -p node_modules/.cache/eslint && echo c > node_modules/.cache/eslint/cache"
    run = isopatch("--sandbox", "--link", "node_modules", "--", "sh", "-c", write,
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 0, run.err
    warned = [line for line in run.err.splitlines() if line.startswith("warning:")]
    cache = repo / "node_modules" / ".cache"
    said = f"warning: the command wrote 3 paths outside its worktree, discarded: {cache}"
    assert warned == [said], run.err
    assert not cache.exists()


def test_sandbox_from_configuration_and_no_sandbox(env, make_repo) -> None:
    repo = make_repo()
    write_outside = ["sh", "-c", f"echo x > {repo}/outside"]
    configured = ("-c", "isopatch.sandbox=true")
    run = isopatch("--", *write_outside, cwd=repo, env=env, git_options=configured)
    assert run.returncode == 0, run.err  # written in a copy-on-write layer, discarded
    assert not (repo / "outside").exists()
    # into the checkout: a warning naming it, in one line; with -q, nothing
    warned = [line for line in run.err.splitlines() if line.startswith("warning:")]
    assert warned == [f"warning: the command wrote 1 path outside its worktree, discarded: {repo}"]
    run = isopatch("-q", "--", *write_outside, cwd=repo, env=env, git_options=configured)
    assert run.returncode == 0 and run.err == "", run.err
    assert not (repo / "outside").exists()
    run = isopatch(
        "-q", "--no-sandbox", "--", *write_outside, cwd=repo, env=env, git_options=configured
    )
    assert run.returncode == 0, run.err
    assert (repo / "outside").exists()


def test_allow_write_from_flag_and_configuration(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    cache = tmp_path / "cache"
    other = tmp_path / "other"
    cache.mkdir()
    other.mkdir()
    run = isopatch(
        "-q", "--sandbox", "--allow-write", cache, "--",
        "sh", "-c", f"echo x > {cache}/f && echo y > {other}/f",
        cwd=repo, env=env,
    )  # fmt: skip
    assert (cache / "f").exists() and not (other / "f").exists()
    assert run.returncode == 0, run.err  # other/f was written copy-on-write, discarded
    run = isopatch(
        "-q", "--sandbox", "--", "sh", "-c", f"echo y > {other}/f",
        cwd=repo, env=env, git_options=("-c", f"isopatch.allowWrite={other}"),
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert (other / "f").exists()


def test_allow_flags_without_sandbox_warn_that_they_do_nothing(
    env, make_repo, tmp_path: Path
) -> None:
    """--allow-write and --allow-network only loosen the sandbox: without it
    (isopatch.sandbox=false, or overridden by --no-sandbox) they change
    nothing, and the user is told so once, whatever the output mode."""
    repo = make_repo()
    cache = tmp_path / "cache"
    cache.mkdir()
    write = "warning: --allow-write has no effect without --sandbox"
    network = "warning: --allow-network has no effect without --sandbox"
    off = ("-c", "isopatch.sandbox=false")
    cases = [
        (("--allow-write", cache), off, [write]),
        (("--allow-network",), off, [network]),
        (("--allow-write", cache, "--allow-network", "--porcelain"), off, [write, network]),
        (("--no-sandbox", "--allow-network"), ("-c", "isopatch.sandbox=true"), [network]),
        (("--allow-network",), ("-c", "isopatch.sandbox=false"), [network]),
        # the configuration's keys are there for sandboxed runs: no noise
        ((), ("-c", f"isopatch.allowWrite={cache}", "-c", "isopatch.allowNetwork=true"), []),
        (("--sandbox", "--allow-write", cache, "--allow-network"), (), []),
        (("--allow-write", cache, "--allow-network"), ("-c", "isopatch.sandbox=true"), []),
    ]
    for args, config, expected in cases:
        run = isopatch(*args, "--", "true", cwd=repo, env=env, git_options=config)
        assert run.returncode == 0, (args, config, run.err)
        warnings = [line for line in run.err.splitlines() if line.startswith("warning: ")]
        assert warnings == expected, (args, config, run.err)


def test_allow_write_of_a_missing_path_is_refused_before_anything_runs(
    env, make_repo, tmp_path: Path
) -> None:
    repo = make_repo()
    before = repo_state(repo, env)
    run = isopatch(
        "--porcelain", "--sandbox", "--allow-write", "nowhere", "--", "touch", tmp_path / "ran",
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 128
    assert run.err.startswith("fatal: cannot allow writes to ")
    assert "No such file or directory" in run.err
    assert run.fields()["error-code"] == "no-such-file"
    assert not (tmp_path / "ran").exists()
    assert repo_state(repo, env) == before
    assert not list(Path(env["TMPDIR"]).iterdir())


def test_output_files_stay_writable_through_dev_stderr(env, make_repo) -> None:
    """``echo ... > /dev/stderr`` reopens the captured output file by path."""
    repo = make_repo()
    run = isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c", "echo to-stderr > /dev/stderr",
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.fields()["exit"] == "0", _output(run, "stderr")
    assert _output(run, "stderr") == "to-stderr\n"


PROBE = textwrap.dedent(
    """\
    import socket, sys
    try:
        with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as s:
            print("reached", s.recv(100).decode().strip())
    except OSError as e:
        print("unreachable", type(e).__name__)
    print(sorted(l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:]))
    """
)


def test_network_outside_is_unreachable_unless_allowed(env, make_repo, tmp_path: Path) -> None:
    repo = make_repo()
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    with loopback_server() as port:
        command = ["--", sys.executable, probe, str(port)]
        confined = isopatch("--porcelain", "--sandbox", *command, cwd=repo, env=env)
        allowed = isopatch(
            "--porcelain", "--sandbox", "--allow-network", *command, cwd=repo, env=env
        )
        configured = isopatch(
            "--porcelain", "--sandbox", *command, cwd=repo, env=env,
            git_options=("-c", "isopatch.allowNetwork=true"),
        )  # fmt: skip
    assert _output(confined) == "unreachable ConnectionRefusedError\n['lo']\n"
    assert _output(allowed).startswith("reached hello from outside\n")
    assert _output(configured).startswith("reached hello from outside\n")


def test_udp_to_a_loopback_server_outside_never_arrives(env, make_repo) -> None:
    """UDP has no connection to refuse: the datagram goes to the command's
    own loopback, where nobody listens; the server outside gets nothing,
    unless the network is kept."""
    import socket

    repo = make_repo()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(1.0)
        port = server.getsockname()[1]
        send = (
            "import socket; "
            f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))"
        )
        confined = isopatch("-q", "--sandbox", "--", sys.executable, "-c", send, cwd=repo, env=env)
        assert confined.returncode == 0, confined.err
        try:
            server.recvfrom(10)
            arrived = True
        except TimeoutError:
            arrived = False
        assert not arrived
        allowed = isopatch(
            "-q", "--sandbox", "--allow-network", "--", sys.executable, "-c", send,
            cwd=repo, env=env,
        )  # fmt: skip
        assert allowed.returncode == 0, allowed.err
        assert server.recvfrom(10)[0] == b"x"


def _isopatch_refused(preexec, *args: str, cwd: Path, env: dict[str, str]) -> Run:
    done = subprocess.run(
        [str(ISOPATCH), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=preexec,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def test_no_namespaces_stops_with_or_without_the_network(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    marker = tmp_path / "ran"
    refused = _isopatch_refused(
        refuse_syscall(*NO_NAMESPACES), "--sandbox", "--", "touch", str(marker),
        cwd=repo, env=env,
    )  # fmt: skip
    assert refused.returncode == 128
    assert refused.err.startswith("fatal: --sandbox is not available: bubblewrap cannot make")
    assert not marker.exists()
    # the namespaces are the sandbox itself, network or not
    allowed = _isopatch_refused(
        refuse_syscall(*NO_NAMESPACES), "-q", "--sandbox", "--allow-network", "--",
        "sh", "-c", f"touch inside; touch {marker}",
        cwd=repo, env=env,
    )  # fmt: skip
    assert allowed.returncode == 128, allowed.err
    assert allowed.err.startswith("fatal: --sandbox is not available: bubblewrap cannot make")
    assert not marker.exists()


def _filter_trap(folder: str) -> str:
    """A script that makes ``folder`` of the worktree a repository whose own
    configuration names a program (a clean filter that touches
    ``$MARKER``), with a changed file, for the git that later looks at it."""
    return textwrap.dedent(
        f"""\
        mkdir -p {folder} && cd {folder} && git init -q -b main
        git config filter.evil.clean "sh -c 'touch \\"$MARKER\\"; cat'"
        echo '* filter=evil' > .gitattributes
        echo data > f
        git add . 2>/dev/null; git commit -q -m x
        echo datb > f  # the same size: git compares the content, through the filter
        """
    )


def _planted(
    script_text: str,
    marker: Path,
    mode: str,
    *,
    cwd: Path,
    env: dict[str, str],
    git_options: tuple[str, ...] = (),
) -> Run:
    """``sh <script>`` run by ``git isopatch --porcelain <mode>``, with
    ``$MARKER`` naming ``marker`` (what the planted program touches)."""
    script = marker.parent / f"{marker.name}.sh"
    script.write_text(script_text)
    return isopatch(
        "--porcelain", mode, "--", "sh", script,
        cwd=cwd, env={**env, "MARKER": str(marker)}, git_options=git_options,
    )  # fmt: skip


#: A repository inside the worktree whose own configuration names a
#: program, for the git that later inspects it (git-isopatch's diff).
NESTED_FILTER = _filter_trap("nested")


def test_programs_the_command_plants_for_the_extraction_stay_confined(
    env, make_repo, tmp_path: Path
) -> None:
    """The extraction's git runs what the worktree's contents name (a
    nested repository's filter); it runs under the same sandbox, so that
    the command cannot write through git-isopatch."""
    repo = make_repo()
    marker = tmp_path / "written-through-the-extraction"
    run = _planted(NESTED_FILTER, marker, "--sandbox", cwd=repo, env=env)
    assert "exit" in run.fields(), run.err
    assert not marker.exists(), Path(run.fields()["stderr"]).read_text() + run.out
    unconfined = _planted(NESTED_FILTER, marker, "--no-sandbox", cwd=repo, env=env)
    assert "exit" in unconfined.fields(), unconfined.err
    assert marker.exists(), "the planted filter does run, unconfined"


#: A trap in the worktree for the git that looks at it after the command:
#: the empty folder of the submodule ``sub`` becomes a repository whose own
#: configuration names a program, run by any ``git status`` that recurses
#: into submodules (git-isopatch's look for changed submodules, the pool's
#: check of a used worktree).
SUBMODULE_TRAP = _filter_trap("sub")


def _superproject(make_repo, tmp_path: Path, env: dict[str, str]) -> Path:
    """``repo`` with the submodule ``sub``, not checked out in the worktree."""
    make_repo({"s": "s\n"}, name="sub-up")
    repo = make_repo({"top": "t\n"})
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q",
        tmp_path / "sub-up", "sub", cwd=repo, env=env)  # fmt: skip
    git("commit", "-q", "-m", "submodule", cwd=repo, env=env)
    return repo


def test_a_submodule_the_command_plants_stays_confined_after_the_command(
    env, make_repo, tmp_path: Path
) -> None:
    """git-isopatch's look for changed submodules runs ``git status`` in
    them, which runs what their configuration names: under the sandbox."""
    repo = _superproject(make_repo, tmp_path, env)
    marker = tmp_path / "written-through-the-submodule-look"
    run = _planted(SUBMODULE_TRAP, marker, "--sandbox", cwd=repo, env=env)
    assert run.fields()["exit"] == "0", run.err + _output(run, "stderr")
    assert "warning: submodule 'sub' has changes that are not in the patch" in run.err
    assert not marker.exists()
    unconfined = _planted(SUBMODULE_TRAP, marker, "--no-sandbox", cwd=repo, env=env)
    assert unconfined.fields()["exit"] == "0", unconfined.err
    assert marker.exists(), "the planted filter does run, unconfined"


def test_a_trap_left_in_a_pooled_worktree_is_not_sprung_by_the_next_claim(
    env, make_repo, tmp_path: Path
) -> None:
    """A sandboxed command's worktree goes back to the pool; the next run,
    sandboxed or not, must not run what that command planted in it."""
    repo = _superproject(make_repo, tmp_path, env)
    marker = tmp_path / "written-through-the-pool"
    pool = ("-c", "isopatch.pool=1")
    planted = _planted(SUBMODULE_TRAP, marker, "--sandbox", cwd=repo, env=env, git_options=pool)
    assert planted.fields()["exit"] == "0", planted.err
    assert not marker.exists()
    for args in (("--sandbox",), ()):
        later = isopatch(
            "--porcelain", *args, "--", "sh", "-c", "ls -A sub",
            cwd=repo, env={**env, "MARKER": str(marker)}, git_options=pool,
        )  # fmt: skip
        assert later.fields()["exit"] == "0", later.err
        assert _output(later) == ""  # a worktree as fresh: the folder is empty
        assert not marker.exists()


FORGED_COMMONDIR = textwrap.dedent(
    """\
    # point the worktree's private folder at a copy of the repository whose
    # configuration and attributes name a program, for whoever runs git
    # on this worktree next
    admin=$(git rev-parse --absolute-git-dir)
    common=$(git rev-parse --path-format=absolute --git-common-dir)
    cp -r "$common" "$PWD/.evil"
    rm -rf "$PWD/.evil/worktrees"
    echo "$common/objects" > "$PWD/.evil/objects/info/alternates"
    git config -f "$PWD/.evil/config" filter.evil.smudge "sh -c 'touch \\"$MARKER\\"; cat'"
    git config -f "$PWD/.evil/config" filter.evil.clean "sh -c 'touch \\"$MARKER\\"; cat'"
    mkdir -p "$PWD/.evil/info" && echo '* filter=evil' > "$PWD/.evil/info/attributes"
    echo .evil > .gitignore  # so that no index entry of the capture holds it
    echo changed >> top
    printf '%s\\n' "$PWD/.evil" > "$admin/commondir"
    """
)


def test_a_forged_commondir_in_a_pooled_worktree_is_not_followed(
    env, make_repo, tmp_path: Path
) -> None:
    """The worktree's private folder is writable under the sandbox; its
    ``commondir`` says where git finds the configuration.  A claim must not
    run git through a ``commondir`` the command rewrote."""
    repo = make_repo({"top": "t\n"})
    marker = tmp_path / "written-through-commondir"
    pool = ("-c", "isopatch.pool=1")
    forged = _planted(FORGED_COMMONDIR, marker, "--sandbox", cwd=repo, env=env, git_options=pool)
    assert forged.fields()["exit"] == "0", forged.err + _output(forged, "stderr")
    marker.unlink(missing_ok=True)  # what the extraction ran is confined, see above
    later = isopatch(
        "--porcelain", "--", "sh", "-c", "cat top; ls -A",
        cwd=repo, env={**env, "MARKER": str(marker)}, git_options=pool,
    )  # fmt: skip
    assert later.fields()["exit"] == "0", later.err
    assert _output(later) == "t\n.git\ntop\n"
    assert not marker.exists()
