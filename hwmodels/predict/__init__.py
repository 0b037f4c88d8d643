"""hwmodels.predict: a calibrated step-time and memory model of LLM training (issue 11).

One concept per module:

* :mod:`.spec`         what is trained (``ModelSpec``, presets, ``parse_spec``, the suite's workloads)
* :mod:`.ops`          one training step as GEMMs, attention, memory-bound ops and collectives
* :mod:`.memory`       bytes per accelerator (ZeRO state, Korthikanti activations, buffers)
* :mod:`.calibration`  achievable rates per node type, each with its source
* :mod:`.collectives`  time of one collective (kind, bytes, ranks, link level)
* :mod:`.layout`       a parallel layout and its placement on the machine
* :mod:`.predictor`    the step model and the ``Prediction`` it returns
* :mod:`.search`       the layout search; ``predict_job`` / ``search`` are the entry points

Library use (the report and ``hweval cost`` call these, not the CLI)::

    from hwmodels.predict import predict_job
    res = predict_job(hardware="h100-sxm", accelerators=1024, model="llama3-70b", global_batch=1024,
                      tokens=2e12, pricing="on_demand")          # -> SearchResult (layout searched)
    res.best.tokens_per_s, res.best.cost_usd, res.best.interval["cost_usd"]
"""

from hwmodels.predict.calibration import Calibration, KernelPoint, Rate, calibrate
from hwmodels.predict.layout import Layout
from hwmodels.predict.memory import MemoryEstimate
from hwmodels.predict.predictor import Prediction, cost_usd, make_prediction, step_times
from hwmodels.predict.search import SearchResult, predict_job, search, search_all
from hwmodels.predict.spec import PRESETS, GenericSpec, ModelSpec, from_workload, parse_spec, preset

__all__ = ["Calibration", "KernelPoint", "Rate", "calibrate", "Layout", "MemoryEstimate", "Prediction", "cost_usd",
           "make_prediction", "step_times", "SearchResult", "predict_job", "search", "search_all", "PRESETS",
           "GenericSpec", "ModelSpec", "from_workload", "parse_spec", "preset"]
