"""hwmodels package (see README)."""
