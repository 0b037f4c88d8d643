"""kernels package (see README)."""
