"""A patch file, read back: its ``diff --git`` headers (:mod:`.headers`)
and what it holds, path by path (:mod:`.paths`)."""
