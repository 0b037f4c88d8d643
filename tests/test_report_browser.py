"""The quick report opened in headless Chromium: the recommendation reads right and every chart rendered.

Needs Chromium at /usr/bin/chromium (``apt-get install -y chromium``) and the
``playwright`` Python package; skipped, saying which is missing, otherwise.
The report is built from synthetic measurements plus the quick plan's
declared job (no notebooks run), so the test does not depend on machine speed.
"""

from __future__ import annotations

import os
import re

import pytest

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page_of_report(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    from hweval import report
    from hweval.plan import load_plan
    from hwcore.store import Store
    from tests.test_report import seed

    d = tmp_path_factory.mktemp("browser")
    st = Store(d / "store")
    seed(st)
    plan = load_plan("plans/quick.yaml")
    out = report.build_report(store=st, plan="p", report_dir=d / "rep", job=plan.job,
                              candidates=["h100-sxm", "h200-sxm", "mi300x"], measured_node="cpu-epyc-zen4-2c")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(out.html.resolve().as_uri())
            page.wait_for_function(
                "() => [...document.querySelectorAll('div.chart')].every(d => d.querySelector('svg') || "
                "d.innerText.startsWith('chart failed'))", timeout=60_000)
            yield page, out, errors
        finally:
            browser.close()


def test_recommendation_names_node_time_and_dollars(page_of_report):
    page, out, _ = page_of_report
    rec = page.inner_text("#recommendation")
    assert re.search(r"\d+ x (h100-sxm|h200-sxm|mi300x) ", rec), rec
    assert re.search(r"\d[\d,.]* (days|h)\b", rec), rec
    money = re.findall(r"\$[\d,.]+[kMB]?", rec)
    assert money, rec
    assert not re.search(r"\d[eE][+-]?\d", rec), rec  # no scientific notation anywhere in the sentence
    assert "90%" in rec


def test_every_chart_rendered_with_marks(page_of_report):
    page, out, errors = page_of_report
    charts = page.query_selector_all("div.chart")
    assert len(charts) == len(out.charts) >= 5
    for div in charts:
        name = div.get_attribute("data-chart")
        assert not div.inner_text().startswith("chart failed"), (name, div.inner_text())
        marks = div.query_selector_all("svg g.mark-symbol path, svg g.mark-rect path, svg g.mark-line path, "
                                       "svg g.mark-area path, svg g.mark-rule line, svg g.mark-text text")
        assert marks, f"chart {name} has no marks"
    assert not errors, errors


def test_level_and_tables_readable(page_of_report):
    page, _, _ = page_of_report
    text = page.inner_text("body")
    assert "90% intervals throughout" in text
    assert "Time to train (days)" in text or "Time to train (h)" in text
    assert "(source, as of)" in text and "Prices used" in text and "Asked for but not available" in text
