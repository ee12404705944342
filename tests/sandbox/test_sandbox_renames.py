"""A sandboxed command renames a folder of its base tree as it would in a
worktree of its own (``git_isopatch.sandbox.renames``): overlayfs in a
user namespace says ``EXDEV``, the launcher renames it for the command
(a copy, then removal, within one mount) and gives the patch of an
unconfined run; everything else the kernel answers as before.

A hostile command turns the supervision on itself: a path it changes
while the launcher reads it, paths too long or unreadable, a descriptor
that is not a folder, a rename out of the worktree to a read-only place,
flags the launcher leaves alone, a caller killed or signalled mid-rename, many
renames from many processes and threads, a sandbox of its own inside
ours; and the launcher still ends the command on ``--timeout``.

Real bubblewrap, real git; as root and as the unprivileged uid 65534.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from real_tools_helpers import sandboxed_and_unconfined
from repo_helpers import git, isopatch
from sandbox_helpers import run_as_nobody

#: The base tree: folders, an executable file, a symbolic link.
FILES = {
    "README": "r\n",
    "d/x": "x\n",
    "d/s/y": "y\n",
    "f/z": "z\n",
    "big/" + "0": "0\n",
}


def _repo(make_repo, env, count: int = 1) -> Path:
    files = dict(FILES, **{f"big/{n}": f"{n}\n" for n in range(count)})
    repo = make_repo(files)
    (repo / "d" / "s" / "y").chmod(0o755)
    (repo / "d" / "l").symlink_to("x")
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "modes", cwd=repo, env=env)
    return repo


def _inside(repo: Path, env, script: str, *args: str) -> dict:
    """``script`` run by Python in the sandbox: what it printed (JSON)."""
    run = isopatch("--sandbox", "--stdout", "-q", "--", sys.executable, "-c", script, *args,
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 0, run.err
    return json.loads(run.err.splitlines()[-1])


def test_git_mv_of_a_base_tree_folder_gives_the_unconfined_patch(
    env, make_repo, no_leftovers
) -> None:
    """``git mv d e`` of a folder with an executable, a link and a
    subfolder: the same patch, byte for byte, as unconfined."""
    repo = _repo(make_repo, env)
    patch = sandboxed_and_unconfined(repo, ["git", "mv", "d", "e"], env).same_patch()
    assert patch.count(b"rename from d/") == 3, patch


#: Renames the kernel answers: (what, errno or 0), printed as JSON on stderr.
KERNEL = r"""
import ctypes, errno, json, os, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return 0 if result == 0 else ctypes.get_errno()
def tree(top):
    seen = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files + [""]:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
            times = () if stat.S_ISLNK(st.st_mode) else (st.st_mtime_ns,)
            seen[os.path.relpath(path, top)] = (st.st_mode, link, *times)
    return seen
said = {}
before = tree("d")
os.rename("d", "e")
said["kept"] = tree("e") == before and not os.path.exists("d")
for name, call in [
    ("into itself", lambda: libc.rename(b"e", b"e/s/in")),
    ("read-only place", lambda: libc.rename(b"e", b"/usr/e")),
    ("home", lambda: libc.rename(b"e", os.path.expanduser("~/e").encode())),
    ("exchange", lambda: libc.renameat2(-100, b"e", -100, b"f", 2)),
    ("whiteout", lambda: libc.renameat2(-100, b"e", -100, b"w", 4)),
    ("huge", lambda: libc.rename(b"e/" * 50000, b"w")),
    ("unreadable", lambda: libc.syscall(82, ctypes.c_void_p(8), b"w")),
    ("not a folder", lambda: libc.renameat(os.open("README", os.O_RDONLY), b"e", -100, b"w")),
    ("onto a file", lambda: libc.renameat2(-100, b"e", -100, b"README", 1)),
]:
    said[name] = errno.errorcode.get(errno_of(call()), 0)
said["unchanged"] = tree("e") == before and not os.path.lexists("/usr/e")
top = os.open(".", os.O_RDONLY)
said["by descriptor"] = errno_of(libc.renameat(top, b"f", top, b"g"))
g, h = (os.path.abspath(name).encode() for name in "gh")
said["absolute"] = errno_of(libc.rename(g, h))
said["no replace"] = errno_of(libc.renameat2(-100, b"h", -100, b"i", 1))
said["ours"] = os.listdir("i") == ["z"] and not os.path.exists("f")
os.mkdir("hollow")
said["onto an empty folder"] = errno_of(libc.rename(b"big", b"hollow"))
said["replaced"] = os.listdir("hollow") == ["0"] and not os.path.exists("big")
print(json.dumps(said), file=sys.stderr)
"""


def test_a_folder_keeps_its_modes_links_and_times_and_the_kernel_answers_the_rest(
    env, make_repo
) -> None:
    """``os.rename`` of a base-tree folder keeps each entry's mode, link
    and modification time; by a descriptor, by absolute paths, with
    ``RENAME_NOREPLACE`` and onto an empty folder it renames too.  What the launcher leaves to the
    kernel gets the kernel's answer, and changes nothing: into itself
    (``EINVAL``), out of the worktree (``EXDEV``), ``RENAME_EXCHANGE``
    of two base-tree folders (``EXDEV``), ``RENAME_WHITEOUT``
    (``EINVAL``), a path longer than ``PATH_MAX`` (``ENAMETOOLONG``) or at
    an address the caller cannot read (``EFAULT``), a descriptor that is
    not a folder (``ENOTDIR``), ``RENAME_NOREPLACE`` onto a file
    (``EEXIST``)."""
    repo = _repo(make_repo, env)
    said = _inside(repo, env, KERNEL)
    assert said == {
        "kept": True,
        "into itself": "EINVAL",
        "read-only place": "EXDEV",
        "home": "EXDEV",
        "exchange": "EXDEV",
        "whiteout": "EINVAL",
        "huge": "ENAMETOOLONG",
        "unreadable": "EFAULT",
        "not a folder": "ENOTDIR",
        "onto a file": "EEXIST",
        "unchanged": True,
        "by descriptor": 0,
        "absolute": 0,
        "no replace": 0,
        "ours": True,
        "onto an empty folder": 0,
        "replaced": True,
    }


#: A thread flips the path the main thread renames between a base-tree
#: folder and a read-only folder of the system, while the main thread
#: renames it there and back; every file of ``d`` is found once at the end.
FLIP = r"""
import ctypes, json, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
path = ctypes.create_string_buffer(4096)
stop = []
def flip():
    while not stop:
        ctypes.memmove(path, b"/usr/bin\0", 9)
        ctypes.memmove(path, b"d\0\0\0\0\0\0\0\0", 9)
thread = threading.Thread(target=flip)
thread.start()
for n in range(200):
    if libc.rename(path, b"moved") == 0:
        os.rename("moved", "d")
stop.append(1)
thread.join()
files = sorted(os.path.join(f, n) for f, _, names in os.walk(".") for n in names if n != ".git")
print(json.dumps([files, os.path.isdir("/usr/bin")]), file=sys.stderr)
"""


def test_a_path_changed_while_the_launcher_reads_it_renames_only_what_it_could(
    env, make_repo
) -> None:
    repo = _repo(make_repo, env)
    files, system = _inside(repo, env, FLIP)
    assert system is True
    assert files == ["./README", "./big/0", "./d/l", "./d/s/y", "./d/x", "./f/z"], files


#: Processes are killed while they rename ``big`` there and back; then
#: 4 processes of 4 threads each rename folders and files of their own.
MANY = r"""
import json, os, signal, sys, threading, time
for n in range(6):
    pid = os.fork()
    if pid == 0:
        while True:
            for a, b in (("big", "moved"), ("moved", "big")):
                try:
                    os.rename(a, b)
                except OSError:
                    pass
    time.sleep(0.05 * n)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
time.sleep(1)
walked = [(f, names) for f, _, names in os.walk(".") if "big" in f or "moved" in f]
seen = [os.path.join(f, n) for f, names in walked for n in names]
intact = all(open(p).read() == os.path.basename(p) + "\n" for p in seen)
names = sorted(os.path.basename(p) for p in seen)
os.rename("moved" if os.path.isdir("moved") else "big", "kept")
def rename(n):
    os.makedirs(f"t{n}/in", exist_ok=True)
    open(f"t{n}/in/file", "w").close()
    for _ in range(20):
        os.rename(f"t{n}", f"u{n}")
        os.rename(f"u{n}/in/file", f"u{n}/in/other")
        os.rename(f"u{n}", f"t{n}")
        os.rename(f"t{n}/in/other", f"t{n}/in/file")
children = []
for p in range(4):
    pid = os.fork()
    if pid == 0:
        threads = [threading.Thread(target=rename, args=(p * 4 + t,)) for t in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        os._exit(0)
    children.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in children]
print(json.dumps([intact, names, statuses]), file=sys.stderr)
"""


def test_callers_killed_mid_rename_and_many_at_once_lose_nothing(env, make_repo) -> None:
    """Whatever the killed callers left, each file of ``big`` is there with
    its content (a copy finishes when its caller is gone); the renames of
    4 processes of 4 threads all succeed, and the patch is the one an
    unconfined run gives."""
    repo = _repo(make_repo, env, count=40)
    names = sorted(["0", *(str(n) for n in range(40))])
    sandboxed = isopatch("--sandbox", "--stdout", "-q", "--", sys.executable, "-c", MANY,
                         cwd=repo, env=env)  # fmt: skip
    assert sandboxed.returncode == 0, sandboxed.err
    intact, seen, statuses = json.loads(sandboxed.err.splitlines()[-1])
    assert intact is True and statuses == [0] * 4
    assert sorted(set(seen)) == sorted(set(names)), seen
    assert sandboxed.stdout.count(b"rename from big/") == 40, sandboxed.stdout
    assert sandboxed.stdout.count(b"new file mode") == 16, sandboxed.stdout


#: Callers killed at random moments while they rename a file there and
#: back: most of the kills land while the launcher reads the path.
KILLED_WHILE_READ = r"""
import os, random, signal, sys, time
for n in range(150):
    pid = os.fork()
    if pid == 0:
        while True:
            os.rename("README", "moved")
            os.rename("moved", "README")
    time.sleep(random.random() / 500)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print("ended", n + 1, file=sys.stderr)
"""


def test_callers_killed_while_the_launcher_reads_their_paths_end_the_run(env, make_repo) -> None:
    """A caller's memory reads empty once it is gone: the launcher lets the
    kernel answer (nobody), and serves on; the run ends."""
    repo = _repo(make_repo, env)
    run = isopatch("--sandbox", "-q", "--", sys.executable, "-c", KILLED_WHILE_READ,
                   cwd=repo, env=env, timeout=90)  # fmt: skip
    assert run.returncode == 0, run.err
    assert run.err.split()[-2:] == ["ended", "150"], run.err


def test_the_launcher_still_ends_a_command_that_renames_folders_on_timeout(env, make_repo) -> None:
    """Its control socket is served while it supervises: ``--timeout``
    ends a command that renames a base-tree folder in a loop (124)."""
    repo = _repo(make_repo, env)
    loop = "import os\nwhile True:\n    os.rename('d', 'e'); os.rename('e', 'd')\n"
    run = isopatch("--sandbox", "--timeout", "2", "-q", "--", sys.executable, "-c", loop,
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 124, run.err


#: A caller that confined itself further (a seccomp filter of its own):
#: the launcher leaves its renames to the kernel.
NESTED = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
allow = (ctypes.c_uint64 * 1)(0x7FFF000000000006)
program = (ctypes.c_uint16 * 4)(1, 0, 0, 0)
fprog = ctypes.create_string_buffer(16)
ctypes.memmove(fprog, ctypes.byref(ctypes.c_uint16(1)), 2)
where = ctypes.c_void_p(ctypes.addressof(allow))
ctypes.memmove(ctypes.addressof(fprog) + 8, ctypes.byref(where), 8)
assert libc.prctl(22, 2, fprog, 0, 0) == 0, ctypes.get_errno()
try:
    os.rename("d", "e")
    said = "renamed"
except OSError as exc:
    said = exc.errno
print(json.dumps(said), file=sys.stderr)
"""


def test_a_caller_in_a_sandbox_of_its_own_gets_the_kernels_answer(env, make_repo) -> None:
    """The launcher never renames for a process that confined itself
    more than the command was: that process's own confinement decides."""
    import errno

    repo = _repo(make_repo, env)
    assert _inside(repo, env, NESTED) == errno.EXDEV


#: As uid 65534 (:func:`run_as_nobody`'s ``repo``): the folder ``d`` and
#: its subfolder ``s`` committed, a file in each.
NOBODY_FOLDERS = """\
for name in ("d/x", "d/s/y"):
    os.makedirs(os.path.join(repo, os.path.dirname(name)), exist_ok=True)
    open(os.path.join(repo, name), "w").write(name)
subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
subprocess.run(["git", "-C", repo, "commit", "-q", "-m", "d"], check=True)
"""

AS_NOBODY = (
    NOBODY_FOLDERS
    + """\
said = {}
for mode in ("--sandbox", "--no-sandbox"):
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", mode, "--stdout", "-q", "--", "git", "mv", "d", "e"],
        cwd=repo, capture_output=True,
    )
    said[mode] = [done.returncode, done.stdout.decode(), done.stderr.decode()]
flip = [sys.executable, "-m", "git_isopatch", "--sandbox", "--stdout", "-q", "--"]
done = subprocess.run([*flip, sys.executable, "-c", sys.argv[1]], cwd=repo, capture_output=True)
said["flip"] = [done.returncode, done.stderr.decode().splitlines()[-1:]]
print(json.dumps(said))
"""
)


def test_git_mv_of_a_base_tree_folder_as_an_unprivileged_user(env) -> None:
    """``git mv`` as unconfined, and the path flipped to a read-only
    folder of the system renames only what the command could."""
    with run_as_nobody(env, AS_NOBODY, FLIP) as said:
        assert said["--sandbox"][0] == 0, said
        assert said["--sandbox"] == said["--no-sandbox"], said
        assert said["--sandbox"][1].count("rename from d/") == 2, said
        assert said["flip"][0] == 0, said
        assert json.loads(said["flip"][1][0]) == [["./d/s/y", "./d/x"], True], said


#: A caller whose timer signal arrives every millisecond while it renames
#: a folder of the base tree that takes a while to copy.
SIGNALLED = r"""
import json, os, signal, sys
signal.signal(signal.SIGALRM, lambda *_: None)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
tries = 0
while True:
    tries += 1
    try:
        os.rename("big", "moved")
        said = sorted(os.listdir("moved")) == names
        break
    except InterruptedError:  # taken back before the launcher had it: nothing done
        continue
    except OSError as exc:
        said = exc.errno
        break
signal.setitimer(signal.ITIMER_REAL, 0)
print(json.dumps([said, os.path.exists("big")]), file=sys.stderr)
"""


def test_a_caller_a_signal_interrupts_mid_rename_gets_the_rename(env, make_repo) -> None:
    """A signal the caller handles while the launcher renames for it waits
    for the launcher's answer (``SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV``):
    the call never ends, nor starts again, on what the launcher half did.
    Before the launcher took the call, a handler without ``SA_RESTART``
    ends it with ``EINTR`` and nothing done, and the caller tries again."""
    repo = _repo(make_repo, env, count=300)
    names = sorted(["0", *(str(n) for n in range(300))])
    script = SIGNALLED.replace("names", repr(sorted(set(names))))
    assert _inside(repo, env, script) == [True, False]


#: The command starts a process that renames ``big`` and exits as soon as
#: the launcher's copy has begun (``moved`` is there).
LEFT_MID_COPY = r"""
import os, time
if os.fork() == 0:
    os.rename("big", "moved")
    os._exit(0)
while not os.path.exists("moved"):
    time.sleep(0.001)
"""


def test_a_command_that_ends_mid_copy_leaves_the_folder_renamed(env, make_repo) -> None:
    """The launcher lets a copy it began finish before it ends what the
    command left: the patch renames the whole folder, never half of it."""
    repo = _repo(make_repo, env, count=300)
    run = isopatch("--sandbox", "--stdout", "-q", "--", sys.executable, "-c", LEFT_MID_COPY,
                   cwd=repo, env=env)  # fmt: skip
    assert run.returncode == 0, run.err
    assert run.stdout.count(b"rename from big/") == 300, run.stdout[:2000]
    assert b"new file" not in run.stdout and b"deleted file" not in run.stdout
