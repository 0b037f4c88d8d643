"""workloads package (see README)."""
