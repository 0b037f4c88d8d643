"""hweval: hardware evaluation and cost modelling for ML training infrastructure.

Core package: timing harness, records and store, node fingerprint, plans,
runner, report and the CLI. Dependency direction:
``notebooks -> hweval -> {kernels, workloads} -> hwmodels``.
"""

__version__ = "0.1.0"
