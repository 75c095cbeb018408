"""The report in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Checks that every section renders with its figures, that the page makes no
request at all (its CSP forbids them; any attempt would show as a request or
a console error), that the console is clean, and saves a screenshot in the
test's tmp directory. Playwright never downloads a browser here: it is
pointed at /usr/bin/chromium. Skipped, saying why, when Chromium or the
playwright package is absent (CI installs both).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_report import SECTIONS

from privleak.report.html import write_report

CHROMIUM = os.environ.get("PRIVLEAK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-extensions", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Chromium not installed (apt-get install -y chromium); CI installs it")


def test_report_in_headless_chromium(audited, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")
    report = write_report(audited.out, out=tmp_path / "report.html")
    url = report.resolve().as_uri()
    requests: list[str] = []
    failed: list[str] = []
    console: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, wait_until="load")
            page.wait_for_timeout(300)  # late console messages (CSP reports arrive asynchronously)

            ids = page.eval_on_selector_all("section[data-section]", "els => els.map(e => e.id)")
            for s in SECTIONS:
                assert s in ids, f"section {s} not rendered: {ids}"
            for sid in ids:
                sec = page.locator(f"section#{sid}")
                assert sec.is_visible(), sid
                box = sec.bounding_box()
                assert box and box["height"] > 40, f"section {sid} is empty"
                assert sec.locator("h2").inner_text().strip()
            svgs = page.locator("figure svg")
            assert svgs.count() >= 5
            for i in range(svgs.count()):
                b = svgs.nth(i).bounding_box()
                assert b and b["width"] > 150 and b["height"] > 100, f"figure {i} not drawn: {b}"
            assert page.locator("#arms-table tbody tr").count() == 1 + len(audited.results.arms)  # control + arms
            assert "ecommended" in page.locator("#summary").inner_text()
            assert page.locator("#pii-warning").count() == 0
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
            assert shot.stat().st_size > 10_000
            pdf_ok = True
            try:
                page.emulate_media(media="print")
            except Exception:  # pragma: no cover - older playwright
                pdf_ok = False
            if pdf_ok:
                assert page.locator("nav.toc").is_hidden()  # print CSS applies
        finally:
            browser.close()
    outside = [u for u in requests if u != url and not u.startswith("data:")]
    assert not outside, f"the report made requests: {outside}"
    assert not failed, f"failed requests: {failed}"
    bad = [c for c in console if c.startswith(("error", "warning"))]
    assert not bad, f"console: {bad}"
    assert not errors, f"page errors: {errors}"


OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const page = document.scrollingElement.scrollWidth;
  const wide = [...document.querySelectorAll('body > *, section > *, .wrap, figure, pre, details')]
    .filter(e => e.getBoundingClientRect().right > vw + 1)
    .map(e => (e.id || e.className || e.tagName) + ':' + Math.round(e.getBoundingClientRect().right));
  return {vw, page, wide};
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_no_table_overflows_the_page(audited, tmp_path: Path, width: int) -> None:
    """At a desktop and a phone width the page never scrolls sideways: a wide table scrolls inside its own box.
    PRIVLEAK_SCREENSHOTS=DIR keeps a screenshot of the summary at each width."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")
    report = write_report(audited.out, out=tmp_path / "report.html")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(report.resolve().as_uri(), wait_until="load")
            got = page.evaluate(OVERFLOW_JS)
            assert got["page"] <= got["vw"] + 1, f"the page scrolls sideways at {width} px: {got}"
            assert not got["wide"], f"blocks wider than the page at {width} px: {got['wide']}"
            # The scorecard is there, one row per arm and the control, each with its verdict badge.
            assert page.locator("#scorecard tbody tr").count() == 1 + len(audited.results.arms)
            assert page.locator("#scorecard .badge").count() == 1 + len(audited.results.arms)
            shots = os.environ.get("PRIVLEAK_SCREENSHOTS")
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                page.locator("#summary").screenshot(path=str(Path(shots) / f"summary-{width}.png"))
        finally:
            browser.close()
