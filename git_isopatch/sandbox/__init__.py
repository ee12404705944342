"""The sandbox: the command's confinement as one value the procedure enters
(:mod:`.confinement`), and everything behind it: the command's process group
and what it leaves running, bubblewrap and the kernel's namespaces, the
copy-on-write layers and their reading, seccomp, and whether the machine can
give it.  Knows nothing of the worktree's life cycle."""
