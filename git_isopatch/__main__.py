"""``python -m git_isopatch``: the same as the ``git-isopatch`` executable."""

from .entry import main

main()
