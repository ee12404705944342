"""The worktree's life cycle: getting one for a run (claimed from the pool
or made), placing, recording, locking, keeping and removing it, the run's
private folder and what outlives it, and the paths brought in (includes,
submodules).  Knows nothing of the command line."""
