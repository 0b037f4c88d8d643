"""hwmodels: hardware catalog and performance / cost models. Never imports torch or jax.

Modules: ``catalog`` (node types as sourced data), ``roofline``, ``scaling``
(Amdahl / USL), ``comms`` (alpha-beta, parallel step projections),
``convergence`` (loss-curve fits, x to target), ``scaling_law`` (Chinchilla
L(N, D): tokens for a target loss), ``cost`` (cost per
convergence, Pareto, break-even, sensitivity); ``results`` (the shared
immutable FitResult), ``csvio`` (CSV input with bad-row reports),
``nccl_tests`` (the one parser of raw nccl-tests stdout), ``units``,
``errors`` (``ModelInputError``, a ``ValueError``).
"""
