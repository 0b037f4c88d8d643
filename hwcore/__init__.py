"""hwcore: the measurement core, the bottom layer beside :mod:`hwmodels`.

Errors, the boolean/parameter value vocabulary, the timing harness, GPU
telemetry, the node fingerprint and the append-only results store. It imports
nothing of ours but :mod:`hwmodels`; :mod:`kernels` and :mod:`workloads` build
on it, and the application (:mod:`hweval`: plans, runner, report, CLI) sits on
top. Arrows only point down (``tests/test_layers.py`` holds the rule).
"""
