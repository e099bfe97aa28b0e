"""The run life cycle: locks, transitions (every status change), runs, proposals, verifier and
the queue (tasks sent by name)."""
