"""Web UI benchmarks in Chromium against the release binary, all within
one run so that the figures are ratios against a baseline of the same
minutes (these machines are noisy):

- each page's median first contentful paint (FCP) against a one-line
  static page, their loads taking turns (goal: at most 1.5x);
- a debate's live page at 200 contributions against the same baseline
  (goal: at most 2x);
- a streamed delta: frame received by the page -> its text painted, p99
  over 10 viewers watching one debate together (goal: at most 50 ms;
  AGON_BENCH_UI_VIEWERS, AGON_BENCH_UI_DELTA_MS). The goal is the delta
  frames' (a draft's first text or a piece appended to it); every frame's
  figure, recorded messages and the closing consensus among them, is
  reported beside it;
- the live page's element count and script heap while one page watches
  one debate for AGON_BENCH_UI_MINUTES (30 by default, 0 to skip; goal:
  bounded). The debate's demo agents pause a second before each piece
  and it has enough rounds to outlast the minutes (the deployment's
  SERVICE_MAX_ROUNDS raised for it).

AGON_BENCH_UI_PAINT=0 and AGON_BENCH_UI_DELTA=0 skip the first two parts.

Chromium's own omnibox pop-up, which it loads with every new tab, is off
(AGON_BENCH_UI_BROWSER_POPUP=1 keeps it): see QUIET.

The baseline page is served by a one-line static server in this process:
the binary serves no page without its layout. The same layout's 404 page
is reported beside it.

Run: ops/bench/run.sh ui (needs /usr/bin/chromium and a Python with
playwright 1.65; see tests/ui)."""

import http.server
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "ui"))
from conftest import ADMIN_EMAIL, ADMIN_TOKEN, CHROMIUM_ARGS, PASSWORD, Agon, free_port  # noqa: E402

SAMPLES = int(os.environ.get("AGON_BENCH_UI_SAMPLES", "15"))
MINUTES = float(os.environ.get("AGON_BENCH_UI_MINUTES", "30"))
# The demo agents' pause before each piece of text: at 150 ms a 12-round
# debate of three agents streams for about 17 s, past the 8 s ten pages take
# to load together on two cores, so that all ten watch most of it (three
# agents, about 20 frames a second to each page).
DELTA_MS = int(os.environ.get("AGON_BENCH_UI_DELTA_MS", "150"))
# Chromium loads its own omnibox pop-up (a WebUI page of some 150 modules)
# in every new tab, while the tab's first page loads on the same two cores:
# the browser's work, not the page's, which added up to 50 ms to a first
# paint here. Off unless AGON_BENCH_UI_BROWSER_POPUP=1.
QUIET = [] if os.environ.get("AGON_BENCH_UI_BROWSER_POPUP") == "1" else [
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxFullPopup,WebUIOmniboxAimPopup",
]
FCP = """new Promise(done => {
  const seen = performance.getEntriesByName('first-contentful-paint');
  if (seen.length) return done(seen[0].startTime);
  new PerformanceObserver(list => done(list.getEntries()[0].startTime)).observe({type: 'paint', buffered: true});
})"""
# Before the page's own scripts: each message a socket receives is time-
# stamped, and the next paint after the DOM changes closes the interval.
# A delta frame's fragments open with a draft (`aria-busy`) or a piece
# appended to one (`beforeend:`); fragments queued together go as one
# message, so a delta may share its frame with others, and then counts as
# one with all of that frame's work.
WATCH_DELTAS = """
window.__latencies = [];
const Native = window.WebSocket;
const DELTA = /^(<div hx-swap-oob="beforeend:|<article [^>]*aria-busy="true")/;
window.WebSocket = function (...args) {
  const socket = new Native(...args);
  socket.addEventListener('message', (message) => {
    const received = performance.now();
    const delta = typeof message.data === 'string' && DELTA.test(message.data);
    const observer = new MutationObserver(() => {
      observer.disconnect();
      requestAnimationFrame(() => setTimeout(() => window.__latencies.push([performance.now() - received, delta]), 0));
    });
    observer.observe(document.body, {childList: true, subtree: true, characterData: true});
    setTimeout(() => observer.disconnect(), 1000);
  });
  return socket;
};
window.WebSocket.prototype = Native.prototype;
Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
"""


def serve(binary, data_dir, delay_ms, *extra):
    port = free_port()
    env = dict(
        os.environ,
        SERVICE_DATA_DIR=data_dir,
        SERVICE_API_TOKEN=ADMIN_TOKEN,
        SERVICE_LOG_LEVEL="ERROR",
        SERVICE_DEMO_DELTA_DELAY_MS=str(delay_ms),
        SERVICE_ADMIN_EMAILS=ADMIN_EMAIL,
        SERVICE_RATE_LIMIT_REGISTER="100000",
        SERVICE_RATE_LIMIT_AUTH="100000",
        SERVICE_RATE_LIMIT_DEBATE_CREATE="100000",
        SERVICE_RATE_LIMIT_DEFAULT="100000",
        SERVICE_IP_RATE_LIMIT="1000000",
        # The viewers are one user: each needs a socket of its own.
        SERVICE_WS_MAX_CONNECTIONS_FREE="100",
    )
    env.update(extra)
    process = subprocess.Popen([binary, "serve", "--api-port", str(port), "--ws-port", str(free_port())], env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/api/health").close()
            return process, Agon(base, data_dir)
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("agon did not start")


def one_line_server():
    body = b"<!doctype html><html lang=en><title>Baseline</title><p>One line of text.</p>"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def debate(agon, agents, rounds, token=ADMIN_TOKEN, wait=True):
    status, created = agon.api("POST", "/api/debates", token=token, body={"topic": f"Bench with {len(agents)} agents", "agents": agents, "rounds": rounds})
    assert status == 201, created
    while wait:
        _, detail = agon.api("GET", f"/api/debates/{created['id']}")
        if detail["status"] in ("completed", "failed"):
            return created["id"], len(detail["messages"])
        time.sleep(0.2)
    return created["id"], 0


def fcp(context, url):
    page = context.new_page()
    page.goto(url)
    painted = page.evaluate(FCP)
    page.close()
    return painted


def paired_fcp(anonymous, baseline_url, context, url):
    """Median first paints of a page and of the baseline, their loads taking
    turns: the machine's speed drifts over a run of minutes (pages measured
    late in a run painted a third slower than the same pages early on), so
    each page is compared with the baseline of its own minute."""
    page, baseline = [], []
    for _ in range(SAMPLES):
        baseline.append(fcp(anonymous, baseline_url))
        page.append(fcp(context, url))
    return statistics.median(page), statistics.median(baseline)


def sign_in(context, base, email):
    page = context.new_page()
    page.goto(f"{base}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Start a debate").wait_for()
    page.close()


def first_paint(browser, agon, baseline_url):
    email = "bench-user@example.com"
    agon.api("POST", "/api/auth/register", token=None, body={"email": email, "password": PASSWORD, "name": "Bench"})
    agon.api("POST", "/api/auth/register", token=None, body={"email": ADMIN_EMAIL, "password": PASSWORD, "name": "Bench admin"})
    _, session = agon.api("POST", "/api/auth/login", token=None, body={"email": email, "password": PASSWORD})
    small, _ = debate(agon, ["demo-a", "demo-b"], 1, token=session["access_token"])
    agon.api("POST", f"/api/debates/{small}/publish", token=session["access_token"])
    agents = [f"demo-{c}" for c in "abcdefghij"]
    big, contributions = None, 0
    for rounds in range(5, 13):
        big, contributions = debate(agon, agents, rounds)
        if contributions >= 200:
            break
    user, admin, anonymous = (browser.new_context() for _ in range(3))
    sign_in(user, agon.base, email)
    sign_in(admin, agon.base, ADMIN_EMAIL)
    pages = [
        (anonymous, "/login"), (anonymous, "/register"), (anonymous, "/gallery"),
        (anonymous, f"/gallery/{small}"), (anonymous, f"/gallery/{small}/embed"),
        (user, "/"), (user, "/debates"), (user, f"/debates/{small}"), (user, "/leaderboard"),
        (user, "/account"), (user, "/account/password"), (user, "/account/sessions"), (user, "/account/keys"),
        (user, "/account/organization"), (user, "/account/limits"),
        (user, "/developer"), (user, "/developer/webhooks"), (user, "/developer/webhooks/new"), (user, "/developer/events"),
        (admin, "/admin"), (admin, "/admin/users"), (admin, "/admin/health"), (admin, "/admin/errors"),
        (admin, "/admin/limits"), (admin, "/admin/metrics"),
    ]
    print(f"first contentful paint, median of {SAMPLES}, each against the one-line page's loads taking turns with its own:")
    rows = [("the UI's 404 page", anonymous, f"{agon.base}/no-such-page", None)]
    rows += [(path, context, agon.base + path, 1.5) for context, path in pages]
    rows.append((f"live page at {contributions} contributions", admin, f"{agon.base}/debates/{big}", 2))
    for name, context, url, goal in rows:
        painted, baseline = paired_fcp(anonymous, baseline_url, context, url)
        target = f"(goal <= {goal})" if goal else ""
        print(f"  {name:<48} {painted:6.1f} ms, one-line {baseline:5.1f} ms  ratio {painted / baseline:.2f} {target}", flush=True)
    for context in (user, admin, anonymous):
        context.close()


def delta_latency(browser, agon, viewers=int(os.environ.get("AGON_BENCH_UI_VIEWERS", "10"))):
    agents = ["demo-a", "demo-b", "demo-c"]
    contexts = []
    for _ in range(viewers):
        context = browser.new_context(bypass_csp=True)
        context.add_init_script(WATCH_DELTAS)
        sign_in(context, agon.base, ADMIN_EMAIL)
        contexts.append(context)
    # Signed in before the debate starts, so that its text streams to all
    # ten pages at once for most of its length.
    debate_id, _ = debate(agon, agents, 12, wait=False)
    pages = []
    for context in contexts:
        page = context.new_page()
        page.goto(f"{agon.base}/debates/{debate_id}", wait_until="commit")
        pages.append(page)
    for page in pages:
        page.wait_for_function("document.getElementById('conn')?.textContent.endsWith(': live')")
    # Frames seen while later pages were still loading shared the cores
    # with that work: only the ten watching together count.
    for page in pages:
        page.evaluate("window.__latencies = []")
    while agon.api("GET", f"/api/debates/{debate_id}")[1]["status"] not in ("completed", "failed"):
        time.sleep(0.5)
    time.sleep(1)
    seen = [x for page in pages for x in page.evaluate("window.__latencies")]
    for context in contexts:
        context.close()
    deltas = sorted(ms for ms, delta in seen if delta)
    every = sorted(ms for ms, _ in seen)
    if not deltas:
        print("delta -> screen: no delta frame was seen")
        return
    print(f"delta frame received -> painted, {viewers} viewers, {len(deltas)} frames: p50 {percentile(deltas, 50):.1f} ms, p99 {percentile(deltas, 99):.1f} ms (goal <= 50)")
    print(f"  every frame, recorded ones too, {len(every)} frames: p50 {percentile(every, 50):.1f} ms, p99 {percentile(every, 99):.1f} ms")


def percentile(ordered, p):
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def bounded_dom(browser, binary):
    """One page watching one debate for MINUTES: elements and JS heap,
    sampled every 10 s, must level off rather than grow with the time."""
    if MINUTES <= 0:
        return
    # Three agents write four pieces a second apart in each phase, and after
    # the first round a round is a critique and a revision: about 8 s a
    # round (a 150-round debate ended after 22 of 30 minutes).
    rounds = max(1, round(MINUTES * 60 / 8))
    with tempfile.TemporaryDirectory() as data_dir:
        process, agon = serve(binary, data_dir, 1000, ("SERVICE_MAX_ROUNDS", str(max(12, rounds))))
        try:
            agon.api("POST", "/api/auth/register", token=None, body={"email": ADMIN_EMAIL, "password": PASSWORD, "name": "Bench admin"})
            context = browser.new_context()
            sign_in(context, agon.base, ADMIN_EMAIL)
            debate_id, _ = debate(agon, ["demo-a", "demo-b", "demo-c"], rounds, wait=False)
            page = context.new_page()
            page.goto(f"{agon.base}/debates/{debate_id}")
            started, samples = time.time(), []
            while time.time() - started < MINUTES * 60:
                elements = page.evaluate("document.getElementsByTagName('*').length")
                heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
                recorded = len(agon.api("GET", f"/api/debates/{debate_id}")[1]["messages"])
                samples.append((time.time() - started, elements, heap, recorded))
                time.sleep(10)
            context.close()
        finally:
            process.terminate()
            process.wait()
    quarter = max(1, len(samples) // 4)
    for label, part in (("first quarter", samples[:quarter]), ("last quarter", samples[-quarter:])):
        print(f"  {label}: elements {min(p[1] for p in part)} to {max(p[1] for p in part)}, "
              f"JS heap {min(p[2] for p in part) / 1e6:.1f} to {max(p[2] for p in part) / 1e6:.1f} MB, "
              f"contributions recorded {part[0][3]} to {part[-1][3]}")
    print(f"one page watching one {rounds}-round debate for {MINUTES:g} min ({len(samples)} samples): "
          f"elements first {samples[0][1]}, most {max(p[1] for p in samples)}, last {samples[-1][1]}; "
          f"JS heap first {samples[0][2] / 1e6:.1f} MB, most {max(p[2] for p in samples) / 1e6:.1f}, last {samples[-1][2] / 1e6:.1f}")


def main():
    binary = os.environ.get("AGON_BIN", str(ROOT / "target" / "release" / "agon"))
    server, baseline_url = one_line_server()
    with tempfile.TemporaryDirectory() as fast_dir, tempfile.TemporaryDirectory() as slow_dir, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS + QUIET)
        fast, agon = serve(binary, fast_dir, 0)
        try:
            if os.environ.get("AGON_BENCH_UI_PAINT", "1") == "1":
                first_paint(browser, agon, baseline_url)
        finally:
            fast.terminate()
            fast.wait()
        if os.environ.get("AGON_BENCH_UI_DELTA", "1") == "1":
            slow, agon = serve(binary, slow_dir, DELTA_MS)
            try:
                agon.api("POST", "/api/auth/register", token=None, body={"email": ADMIN_EMAIL, "password": PASSWORD, "name": "Bench admin"})
                delta_latency(browser, agon)
            finally:
                slow.terminate()
                slow.wait()
        bounded_dom(browser, binary)
        browser.close()
    server.shutdown()


if __name__ == "__main__":
    main()
