"""The declared training job: validation with one-line dotted-field errors, tokens from a target loss."""

from __future__ import annotations

import pytest

from hwcore.errors import InputError
from hweval.job import COUNT_LADDER, LADDER_REFERENCE, Job, job_tokens, ladder_counts, parse_job

GOOD = {"model": "llama2-7b", "tokens": 1e12, "global_batch": 1024, "accelerators": [256, 512],
        "pricing": ["on_demand", "spot"]}


def test_parse_good_job_round_trips():
    j = parse_job(GOOD)
    assert isinstance(j, Job) and j.accelerators == (256, 512) and j.tokens == 1e12
    assert parse_job(j.to_dict()) == j
    assert j.describe() == "llama2-7b on 1T tokens"
    assert j.spec().n_params() > 6e9
    assert parse_job({**GOOD, "tokens": "1e12"}).tokens == 1e12  # YAML reads 1e12 as a string


@pytest.mark.parametrize("patch, field", [
    ({"model": "llama9-1t"}, "job.model"),
    ({"tokens": -1}, "job.tokens"),
    ({"tokens": "lots"}, "job.tokens"),
    ({"target_loss": 2.0}, "job: give exactly one"),
    ({"precision": "fp6"}, "job.precision"),
    ({"accelerators": [8, 0]}, "job.accelerators[1]"),
    ({"pricing": ["on_demand", "cheap"]}, "job.pricing[1]"),
    ({"global_batch": 10.5}, "job.global_batch"),
    ({"level": 1.5}, "job.level"),
    ({"bogus": 1}, "job.bogus"),
    ({"framework": "pytorch"}, "job.framework"),
    ({"framework": 3}, "job.framework"),
])
def test_bad_job_one_line_naming_the_field(patch, field):
    with pytest.raises(InputError) as e:
        parse_job({**GOOD, **patch})
    msg = str(e.value)
    assert msg.startswith(field) and "\n" not in msg


def test_valid_choices_listed():
    with pytest.raises(InputError, match="valid choices: on_demand, reserved, reserved_3y, spot, on_prem"):
        parse_job({**GOOD, "pricing": ["cheap"]})
    with pytest.raises(InputError, match="give 'accelerators'"):
        parse_job({k: v for k, v in GOOD.items() if k != "accelerators"})


def test_deadline_without_counts_uses_ladder():
    j = parse_job({"model": "llama2-7b", "tokens": 1e12, "deadline_days": 30})
    assert j.counts == COUNT_LADDER


def _node(bf16_tflops, per_node):
    from types import SimpleNamespace

    peaks = {"bf16": SimpleNamespace(dense_flops_per_s=bf16_tflops * 1e12)} if bf16_tflops else {}
    return SimpleNamespace(peaks=peaks, accelerators_per_node=per_node)


def test_ladder_counts_hold_the_aggregate_peak_in_whole_nodes():
    ref = 989e12  # the reference's dense bf16 peak per accelerator
    assert ladder_counts(_node(989, 8), ref) == COUNT_LADDER  # the reference itself: the ladder as it is
    small = ladder_counts(_node(95, 32), ref)  # a tenth of the peak, 32 per node (a trn1 NeuronCore)
    assert len(small) == len(COUNT_LADDER) and all(c % 32 == 0 for c in small)
    for c, k in zip(COUNT_LADDER, small, strict=True):  # within sqrt 2 of the same aggregate peak
        assert 2 ** -0.5 <= k * 95 / (c * 989) <= 2 ** 0.5
    big = ladder_counts(_node(2500, 4), ref)  # 2.5 times the peak, 4 per node (a GB200 tray)
    assert big[0] == 4 and max(big) < max(COUNT_LADDER) and all(c % 4 == 0 for c in big)
    assert ladder_counts(_node(None, 8), ref) == COUNT_LADDER  # no bf16 peak: unchanged
    assert ladder_counts(_node(95, 32), None) == COUNT_LADDER  # no reference in the catalog: unchanged
    j = parse_job({"model": "llama2-7b", "tokens": 1e12, "deadline_days": 30})
    assert j.counts_for(_node(95, 32), ref) == small
    asked = parse_job({**GOOD})
    assert asked.counts_for(_node(95, 32), ref) == (256, 512)  # counts asked for are priced as asked
    assert LADDER_REFERENCE == "h100-sxm"


def test_tokens_from_target_loss_via_published_law_with_interval():
    j = parse_job({"model": "llama2-7b", "target_loss": 2.1, "accelerators": [512]})
    t = job_tokens(j)
    assert t.lo < t.tokens < t.hi and t.law == "besiroglu2024"
    # the law itself: loss at the returned tokens is the target
    from hwmodels.scaling_law import BESIROGLU_2024

    assert abs(float(BESIROGLU_2024.loss(t.n_params, t.tokens).ravel()[0]) - 2.1) < 1e-6
    assert any("3 are needed" in n for n in t.notes)


def test_unreachable_target_loss_is_input_error():
    j = parse_job({"model": "llama2-7b", "target_loss": 1.0, "accelerators": [512]})
    with pytest.raises(InputError, match="job.target_loss"):
        job_tokens(j)


def test_tokens_fitted_from_plans_own_runs():
    """Runs at 3+ model sizes generated from a known law: the fitted law recovers its tokens."""
    import numpy as np

    from hwmodels.scaling_law import ChinchillaLaw

    truth = ChinchillaLaw(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.36, name="truth", source="test")
    runs = [(n, d, float(truth.loss(n, d).ravel()[0])) for n in (1e8, 3e8, 1e9, 3e9) for d in (2e9, 2e10, 2e11)]
    j = parse_job({"model": "llama2-7b", "target_loss": 2.2, "accelerators": [512]})
    t = job_tokens(j, runs)
    assert t.law != "besiroglu2024" and "fitted" in t.source
    n = t.n_params
    want = (truth.B / (2.2 - truth.E - truth.A / n**truth.alpha)) ** (1 / truth.beta)
    assert abs(np.log(t.tokens / want)) < 0.1


def test_plan_job_section_is_validated(tmp_path):
    from hweval.plan import load_plan

    src = open("plans/quick.yaml").read()
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace("precision: bf16", "precision: fp6", 1).replace(
        "notebooks_dir", "notebooks_dir"))
    with pytest.raises(InputError, match=r"job.precision: unknown value 'fp6'"):
        load_plan(bad)
    plan = load_plan("plans/quick.yaml")
    assert plan.job["model"] == "llama2-7b"
    assert plan.report_cell().params["job"] == plan.job


def test_stated_framework_reaches_every_priced_row():
    """job.framework prices every candidate with the family's factors and its band (hweval predict --framework);
    "unknown" is the default; the report's validation sentence names the family."""
    from hwmodels.catalog import default_catalog
    from hweval.analysis import job_options
    from hweval.job import job_tokens

    assert parse_job({**GOOD, "framework": "unknown"}).framework is None
    j = parse_job({**GOOD, "framework": "megatron", "accelerators": [64]})
    assert j.framework == "megatron" and parse_job(j.to_dict()) == j
    cat = default_catalog()
    opts = {f: job_options(parse_job({**GOOD, "framework": f, "accelerators": [64], "pricing": ["on_demand"]}),
                           job_tokens(j), cat, candidates=["h100-sxm"])[0] for f in ("unknown", "megatron")}
    unk, meg = opts["unknown"][0], opts["megatron"][0]
    assert "framework family megatron stated" in meg.calibration
    pred = {o.name: o for o in meg.parts}["predictor validation error"]
    assert "framework_stated_band" in pred.source
    assert pred.hi_factor < {o.name: o for o in unk.parts}["predictor validation error"].hi_factor
