"""hwmodels.scaling_law: the published Chinchilla laws, tokens for a target loss, and fits from runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwmodels.errors import ModelInputError
from hwmodels.scaling_law import (BESIROGLU_2024, DEFAULT_LAW, HOFFMANN_2022, ChinchillaFit, ChinchillaLaw, _to_q,
                                  tokens_for_loss)

RUNS = Path(__file__).resolve().parents[1] / "data" / "reference" / "scaling" / "chinchilla_runs_epoch.csv"


def _epoch_runs():
    d = pd.read_csv(RUNS, comment="#")
    return d[d["loss"] < np.sort(d["loss"].to_numpy())[-5]]  # Besiroglu et al. drop the 5 highest-loss runs


def test_published_laws_at_chinchilla_and_round_trip():
    assert DEFAULT_LAW is BESIROGLU_2024
    # Chinchilla itself, 70B params on 1.4T tokens (Hoffmann et al. Table 1): the rounded law gives ~1.94
    assert HOFFMANN_2022.loss(70e9, 1.4e12)[0] == pytest.approx(1.94, abs=0.005)
    for law in (HOFFMANN_2022, BESIROGLU_2024):
        L = float(law.loss(7e9, 1e12)[0])
        assert law.tokens_for_loss(7e9, L).tokens == pytest.approx(1e12, rel=1e-9)
        assert law.floor(7e9) == pytest.approx(law.E + law.A / 7e9**law.alpha)


def test_tokens_for_loss_interval_and_structural_alternative():
    r = tokens_for_loss(7e9, 2.1, level=0.9)
    assert r.reachable and r.reliable and r.law == "besiroglu2024"
    assert r.lo < r.tokens < r.hi < math.inf
    # correlated draws: the interval is a factor ~2, not the decades that independent draws would give
    assert r.hi / r.lo < 4
    assert r.alternatives["hoffmann2022"] == pytest.approx(HOFFMANN_2022.tokens_for_loss(7e9, 2.1).tokens)
    assert r.alternatives["hoffmann2022"] < r.lo  # the two published laws disagree: said, not hidden
    d = r.to_dict()
    assert d["source"].startswith("Besiroglu") and d["level"] == 0.9
    h = tokens_for_loss(7e9, 2.1, law="hoffmann2022")
    assert math.isnan(h.lo) and not h.reliable and "no interval" in h.message


def test_target_below_the_floor_is_unreachable():
    r = tokens_for_loss(7e9, 1.95)  # floor of a 7B model under Besiroglu et al. is ~2.0
    assert not r.reachable and r.tokens == math.inf and "floor" in r.message
    with pytest.raises(ModelInputError, match="valid choices"):
        tokens_for_loss(7e9, 2.1, law="kaplan")
    with pytest.raises(ModelInputError, match="target_loss"):
        tokens_for_loss(7e9, -1)


def test_fit_reproduces_the_published_replication():
    d = _epoch_runs()
    law = ChinchillaFit(n_boot=40, seed=1).fit(d["n_params"], d["tokens"], d["loss"])
    # Besiroglu et al. 2024: E=1.8172 (.03), alpha=0.3478 (.02), beta=0.3658 (.02), A=482.01 (124.58)
    assert law.E == pytest.approx(1.8172, abs=0.01)
    assert law.alpha == pytest.approx(0.3478, abs=0.005)
    assert law.beta == pytest.approx(0.3658, abs=0.005)
    assert law.A == pytest.approx(482.01, rel=0.1)
    assert law.se["alpha"] == pytest.approx(0.0154, rel=0.5)  # the notebook's unrounded bootstrap se
    q = np.corrcoef(_to_q(law.boot).T)  # the correlation embedded for the published law
    assert q[0, 3] > 0.95 and q[1, 4] > 0.95
    t = law.tokens_for_loss(7e9, 2.1)
    assert t.lo < BESIROGLU_2024.tokens_for_loss(7e9, 2.1).tokens < t.hi


def test_fit_known_answer_and_identifiability_refusal():
    truth = ChinchillaLaw(E=1.8, A=500.0, B=2000.0, alpha=0.35, beta=0.36, name="truth", source="synthetic")
    rng = np.random.default_rng(0)
    n = np.repeat([1e8, 3e8, 1e9, 3e9], 6)
    dd = np.tile(np.geomspace(2e9, 1e11, 6), 4)
    y = truth.loss(n, dd) * np.exp(rng.normal(0, 0.005, n.size))
    law = ChinchillaFit(n_boot=40).fit(n, dd, y)
    t_true = truth.tokens_for_loss(3e9, 2.3).tokens
    t = law.tokens_for_loss(3e9, 2.3)
    assert t.lo <= t_true <= t.hi and t.tokens == pytest.approx(t_true, rel=0.2)
    with pytest.raises(ModelInputError, match="not identifiable.*2 distinct"):
        ChinchillaFit().fit(n[n < 5e8], dd[n < 5e8], y[n < 5e8])
    with pytest.raises(ModelInputError, match="equal lengths"):
        ChinchillaFit().fit([1e8, 2e8, 3e8], [1e9] * 2, [3.0] * 3)
