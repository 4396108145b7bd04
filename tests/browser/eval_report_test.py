"""Browser test of `baton eval compare`'s HTML report: headless Chromium
(Debian's package) driven by Playwright for Python opens the report file the
CLI wrote (set up by `functions/baton/tests/eval_report_browser.rs`, which
runs this file and fails when it fails), checks that the aggregates table,
every example row and both score histograms render with the right counts,
then follows a run link into the viewer of a `baton serve` reading the same
store and sees that run completed.

Environment: BATON_REPORT (the report file), BATON_EXAMPLES (comma-separated
example ids), BATON_CHROMIUM, BATON_BROWSER_ARTIFACTS.
"""

import os
import sys
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

REPORT = Path(os.environ["BATON_REPORT"])
EXAMPLES = os.environ["BATON_EXAMPLES"].split(",")
ARTIFACTS = Path(os.environ["BATON_BROWSER_ARTIFACTS"])
TIMEOUT_MS = 30_000


def check_histogram(page, side):
    figure = page.locator(f"#histogram-{side}")
    expect(figure).to_be_visible()
    bars = figure.locator("rect.bar")
    expect(bars).to_have_count(10)
    counts = [int(bars.nth(index).get_attribute("data-count")) for index in range(10)]
    assert sum(counts) == len(EXAMPLES), f"{side}: {counts}"
    # The bars that count something are drawn: a box with a height.
    for index, count in enumerate(counts):
        box = bars.nth(index).bounding_box()
        if count:
            assert box is not None and box["height"] > 1, f"{side} bin {index}: {box}"
    return counts


def main():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ["BATON_CHROMIUM"], headless=True,
                                             args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(REPORT.resolve().as_uri())
        expect(page.locator("h1")).to_contain_text("Evaluation")
        expect(page.locator("#verdict")).to_have_text("No regression.")
        aggregates = page.locator("#aggregates tr")
        expect(aggregates).to_have_count(5)
        expect(page.locator("#aggregates")).to_contain_text("judge score, mean (95% CI)")
        for example in EXAMPLES:
            expect(page.locator(f'#examples tr[data-example="{example}"]')).to_be_visible()
        before = check_histogram(page, "baseline")
        after = check_histogram(page, "candidate")
        page.screenshot(path=str(ARTIFACTS / "20-eval-report.png"), full_page=True)
        print(f"ok: the report's table holds {len(EXAMPLES)} examples; histograms {before} and {after}")
        # A run link opens that run in the viewer.
        link = page.locator(f'#examples tr[data-example="{EXAMPLES[0]}"] td:last-child a')
        run_id = link.inner_text()
        link.click()
        page.wait_for_url(f"**/#run/{run_id}", timeout=TIMEOUT_MS)
        expect(page.locator("#view h2 .badge")).to_have_text("completed", timeout=TIMEOUT_MS)
        page.screenshot(path=str(ARTIFACTS / "21-eval-report-run-in-viewer.png"), full_page=True)
        print(f"ok: the candidate's run {run_id} opened from the report in the viewer, completed")
        assert not errors, errors
        browser.close()


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 - reported to the Rust test
        print(f"failed: {error}", file=sys.stderr)
        raise
