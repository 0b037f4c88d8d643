"""torch implementations of the workloads (models in :mod:`.models`, training step in :mod:`.backend`)."""
