"""Standardized training workloads on real data: throughput, utilization and time-to-target.

``workloads.run(name, params)`` trains one workload and returns a
:class:`~workloads.runner.TrainResult`; ``workloads.registry`` lists the
workloads, their configs and presets. torch / JAX are imported only when a
run starts.
"""

from workloads.registry import config_from_params, get, list_workloads
from workloads.runner import TrainResult, run

__all__ = ["TrainResult", "config_from_params", "get", "list_workloads", "run"]
