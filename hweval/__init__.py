"""hweval: hardware evaluation and cost modelling for ML training infrastructure.

The application layer: plans, runner, execution backends (local, Slurm),
analysis, report and the CLI. The measurement core (timing, store,
fingerprint, telemetry, errors) is :mod:`hwcore`. Dependency direction:
``notebooks -> hweval -> {kernels, workloads} -> hwcore -> hwmodels``.
"""

__version__ = "0.1.0"
