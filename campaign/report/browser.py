"""Load a report in headless Chromium (through Playwright, driving the system's Chromium: no
browser download) and say what a person would see: how many plots were drawn, what the console
said, which requests the page made, how long it took. Used by the tests, bench/report.py and
for the screenshot in docs/.

Chromium: `$DYNSMITH_CHROMIUM`, else `chromium` (Debian's package, what `.ci/run` installs),
`chromium-browser`, `google-chrome` or `google-chrome-stable` on PATH.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# as root there is no sandbox; the rest keeps Chromium off the (closed) network
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
#: console messages that mean something went wrong (plotly.js logs its warnings as console.trace
#: lines starting "WARN:", e.g. an invalid colour it replaced with black)
BAD_TYPES = ("error", "warning", "assert")


def find_chromium() -> str | None:
    env = os.environ.get("DYNSMITH_CHROMIUM")
    if env:
        return env if Path(env).exists() or shutil.which(env) else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def why_unavailable() -> str | None:
    """None if a headless-browser check can run here, else the reason it cannot."""
    if find_chromium() is None:
        return ("no Chromium found (install Debian's `chromium`, as .ci/run does, or set "
                "DYNSMITH_CHROMIUM)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@dataclass
class PageCheck:
    load_s: float  # navigation start until every plot has drawn its SVG
    n_plots: int  # plotly graph divs that rendered (.js-plotly-plot)
    n_plot_svgs: int  # <svg class="main-svg"> inside them
    n_traces: int  # drawn traces (g.trace) inside them
    plot_ids: list[str]
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    screenshot: Path | None = None

    @property
    def problems(self) -> list[str]:
        """Console errors and warnings (plotly's included) and uncaught exceptions."""
        bad = [f"console.{t}: {m}" for t, m in self.console
               if t in BAD_TYPES or m.startswith(("WARN", "ERROR"))]
        return bad + [f"page error: {e}" for e in self.page_errors]

    @property
    def external_requests(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("file:", "data:", "blob:",
                                                             "about:"))]


def check_page(html: Path, n_plots: int, *, timeout_s: float = 60.0,
               screenshot: Path | None = None, width: int = 1400) -> PageCheck:
    """Open `html` in headless Chromium, wait until `n_plots` plots have drawn (or time out) and
    report what happened; optionally save a full-page screenshot."""
    from playwright.sync_api import TimeoutError as PwTimeout
    from playwright.sync_api import sync_playwright

    exe = find_chromium()
    if exe is None:
        raise RuntimeError(why_unavailable())
    console: list[tuple[str, str]] = []
    errors: list[str] = []
    requests: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dynsmith-chromium-") as profile, \
            sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=exe, headless=True, args=ARGS,
            viewport={"width": width, "height": 900})
        try:
            page = ctx.new_page()
            page.on("console", lambda m: console.append((m.type, m.text)))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            t0 = time.perf_counter()
            page.goto(Path(html).resolve().as_uri(), wait_until="load",
                      timeout=timeout_s * 1000)
            try:
                page.wait_for_function(
                    "n => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0 &&"
                    " Array.from(document.querySelectorAll('.js-plotly-plot')).filter("
                    "  d => d.querySelector('.main-svg')).length >= n",
                    arg=n_plots, timeout=timeout_s * 1000)
            except PwTimeout:
                pass  # counted below
            load_s = time.perf_counter() - t0
            stats = page.evaluate("""() => {
                const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
                return {
                  n: plots.filter(d => d.querySelector('.main-svg')).length,
                  svgs: document.querySelectorAll('.js-plotly-plot svg.main-svg').length,
                  traces: document.querySelectorAll('.js-plotly-plot g.trace').length,
                  ids: plots.map(d => d.id)};
            }""")
            if screenshot is not None:
                Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            ctx.close()
    return PageCheck(load_s=load_s, n_plots=stats["n"], n_plot_svgs=stats["svgs"],
                     n_traces=stats["traces"], plot_ids=stats["ids"], console=console,
                     page_errors=errors, requests=requests,
                     screenshot=Path(screenshot) if screenshot else None)


def main(argv: list[str] | None = None) -> int:
    """`python -m campaign.report.browser report.html [--plots 6] [--screenshot out.png]`"""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m campaign.report.browser",
                                 description="Check a report in headless Chromium.")
    ap.add_argument("html", type=Path)
    ap.add_argument("--plots", type=int, default=6, help="plots to wait for")
    ap.add_argument("--screenshot", type=Path, default=None, help="full-page PNG")
    ap.add_argument("--width", type=int, default=1400)
    a = ap.parse_args(argv)
    reason = why_unavailable()
    if reason:
        print(f"error: {reason}")
        return 2
    chk = check_page(a.html, a.plots, screenshot=a.screenshot, width=a.width)
    print(f"{chk.n_plots}/{a.plots} plots drawn ({chk.n_plot_svgs} svg, {chk.n_traces} traces) "
          f"in {chk.load_s:.2f} s; {len(chk.problems)} console problems; "
          f"{len(chk.external_requests)} external requests")
    for p in chk.problems[:20]:
        print("  " + p)
    return 0 if chk.n_plots >= a.plots and not chk.problems and not chk.external_requests else 1


if __name__ == "__main__":
    raise SystemExit(main())
