"""Browser tests of the web UI: the agon binary (AGON_BIN, default the debug
build) on a random loopback port with the embedded store in a temporary
data directory, driven by the system's Chromium through Playwright."""

import base64
import glob
import hashlib
import hmac
import json
import os
import pathlib
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHOTS = ROOT / "target" / "ui-screenshots"
ADMIN_TOKEN = "agon-ui-suite-static-api-token-0123456789"
ADMIN_EMAIL = "ui-admin@example.com"
PASSWORD = "correct horse battery"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agon:
    """The running service: its address, data directory and API calls."""

    def __init__(self, base, data_dir):
        self.base = base
        self.data_dir = pathlib.Path(data_dir)

    def api(self, method, path, token=ADMIN_TOKEN, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if token:
            request.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, json.loads(text) if text else None

    def mails(self):
        return [pathlib.Path(p).read_text() for p in sorted(glob.glob(str(self.data_dir / "outbox" / "*.eml")))]

    def mail_to(self, address):
        for _ in range(100):
            for mail in self.mails():
                if f"To: {address}\r\n" in mail or f"To: {address}\n" in mail:
                    return mail
            time.sleep(0.05)
        raise AssertionError(f"no mail to {address}")


def serve_agon(delta_delay_ms="0", **extra):
    """Starts the binary (`extra`: more variables); yields the running
    service, then stops it."""
    binary = os.environ.get("AGON_BIN", str(ROOT / "target" / "debug" / "agon"))
    data_dir = tempfile.mkdtemp(prefix="agon-ui-")
    port, ws_port = free_port(), free_port()
    env = dict(
        os.environ,
        SERVICE_DATA_DIR=data_dir,
        SERVICE_API_TOKEN=ADMIN_TOKEN,
        SERVICE_LOG_LEVEL="ERROR",
        SERVICE_DEMO_DELTA_DELAY_MS=delta_delay_ms,
        SERVICE_ADMIN_EMAILS=ADMIN_EMAIL,
        # A provider whose calls fail at once (nothing listens there): its
        # circuit breaker opens when debates call it.
        MISTRAL_API_KEY="ui-suite-no-such-key",
        SERVICE_MISTRAL_BASE_URL=f"http://127.0.0.1:{free_port()}",
        # Every test signs up and in from the one loopback address.
        SERVICE_RATE_LIMIT_REGISTER="1000",
        SERVICE_RATE_LIMIT_AUTH="1000",
        SERVICE_RATE_LIMIT_DEBATE_CREATE="1000",
        SERVICE_IP_RATE_LIMIT="100000",
        # Webhook tests deliver to a receiver of their own on loopback.
        SERVICE_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        **extra,
    )
    for key in ("DATABASE_URL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)
    process = subprocess.Popen(
        [binary, "serve", "--api-port", str(port), "--ws-port", str(ws_port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(base + "/api/health"):
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise AssertionError("agon did not start")
    yield Agon(base, data_dir)
    process.terminate()
    process.wait(timeout=30)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def agon():
    yield from serve_agon()


@pytest.fixture(scope="session")
def slow_agon():
    """A second service whose demo agents write slowly: debates last
    long enough to watch, reload and cut mid-way."""
    # A reload's new socket may open before the old one is gone.
    delay = os.environ.get("AGON_UI_DELTA_DELAY_MS", "250")
    yield from serve_agon(delay, SERVICE_WS_MAX_CONNECTIONS_FREE="5")


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watched:
    """A page whose console is watched for Content-Security-Policy reports."""

    def __init__(self, context):
        self.context = context
        self.page = context.new_page()
        self.violations = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.violations.append(f"page error: {e}"))

    def _console(self, message):
        text = message.text
        if "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.violations.append(text)

    def assert_no_csp_violations(self):
        assert self.violations == [], self.violations


@pytest.fixture()
def watched(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    watched = Watched(context)
    yield watched
    watched.assert_no_csp_violations()
    context.close()


AXE = Axe()


def assert_accessible(page, state):
    """axe with WCAG 2.0 A and AA and 2.1 AA, nothing disabled."""
    results = AXE.run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21aa"]}})
    assert results.violations_count == 0, f"{state}: {results.generate_report()}"


NEXT_FRAME = "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
# Two frames, or false after a while: a frame that never comes must not hang.
FRAMES_OR_FALSE = (
    "new Promise(done => { setTimeout(() => done(false), 2000);"
    " requestAnimationFrame(() => requestAnimationFrame(() => done(true))); })"
)


def back_to_desktop(page):
    """The desktop window again, drawing frames. Headless Chromium has (once,
    on a loaded CI machine) stopped issuing animation frames after a full-page
    screenshot and a resize back, so the next click waited forever for the
    link to be "stable"; another resize restarts the frames."""
    for height in (800, 801, 800, 801, 800):
        page.set_viewport_size({"width": 1280, "height": height})
        if page.evaluate(FRAMES_OR_FALSE):
            return
    raise AssertionError("the browser drew no frame after the screenshots")


def show_whole_page(page, width):
    """A window as tall as the page, so that sections the style sheet lets
    the browser skip while off screen (a long debate's rounds) are painted
    into the screenshot; their real height replaces the estimate, so grow
    until the height holds."""
    for _ in range(6):
        tall = page.evaluate("document.documentElement.scrollHeight")
        page.set_viewport_size({"width": width, "height": tall})
        page.evaluate(NEXT_FRAME)
        if page.evaluate("document.documentElement.scrollHeight") == tall:
            return


def check_page(page, name):
    """axe on the page, then screenshots at desktop and phone widths: not
    blank, nothing wider than the window."""
    assert_accessible(page, name)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        path = SHOTS / f"{name}-{width}x{height}.png"
        show_whole_page(page, width)
        png = page.screenshot(path=str(path), full_page=True)
        page.set_viewport_size({"width": width, "height": height})
        assert len(png) > 2000, f"{path} looks blank"
        assert page.evaluate("document.body.innerText.trim().length") > 0, f"{name}: no text"
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} at {width}px overflows by {overflow}px"
    assert_accessible(page, f"{name} at 390px")
    back_to_desktop(page)


def assert_no_token_readable(page):
    """Nothing a script could steal: no token in cookies or web storage."""
    assert "agon" not in page.evaluate("document.cookie"), page.evaluate("document.cookie")
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("sessionStorage.length") == 0


def totp(secret, at=None):
    """RFC 6238 (SHA-1, 6 digits, 30 s) code for `secret` at `at`."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    counter = int((time.time() if at is None else at) // 30)
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    value = struct.unpack(">I", digest[offset : offset + 4])[0] & 0x7FFFFFFF
    return f"{value % 1_000_000:06d}"


def link_token(mail, path):
    """The token of the first link in `mail` to `path`."""
    found = re.search(re.escape(path) + r"\?token=([A-Za-z0-9._~%-]+)", mail)
    assert found, mail
    return found.group(1)
