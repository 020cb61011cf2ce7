"""The live debate page in a real browser: text streams in before its
message is recorded, then the consensus; a reload or a cut socket mid-way
shows each contribution exactly once; a WebSocket from a page on another
loopback port is refused even with the session cookie; hostile agent text
stays text; axe and screenshots while running and once finished."""

import http.server
import threading

from conftest import assert_no_token_readable, check_page, free_port
from test_ui import new_email, register_via_api, sign_in

# The demo agents quote the topic back: agent text that would run script
# if it were not escaped.
HOSTILE = "<img src=x onerror=alert(1)> [x](javascript:alert(1))"


def slug(name):
    return "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}" for c in name)


def slot_id(message):
    return f"c-{message['round']}-{slug(message['phase'])}-{slug(message['agent'])}"


def start_debate(agon, page, rounds="2"):
    email = new_email()
    register_via_api(agon, email)
    sign_in(page, agon.base, email)
    page.get_by_role("heading", name="Start a debate").wait_for()
    page.get_by_label("Topic").fill(HOSTILE)
    for agent in ("demo-a", "demo-b", "demo-c"):
        page.get_by_label(agent).check()
    page.get_by_label("Rounds").fill(rounds)
    page.get_by_role("button", name="Start debate").click()
    page.wait_for_url("**/debates/*")
    return page.url.rsplit("/", 1)[1]


def wait_finished(page):
    page.locator("#after:not([hidden])").wait_for(timeout=60_000)
    page.get_by_text("Connection: the debate has ended").wait_for()


def assert_each_contribution_once(agon, page, debate_id):
    status, detail = agon.api("GET", f"/api/debates/{debate_id}")
    assert status == 200, detail
    for message in detail["messages"]:
        slot = page.locator(f"#{slot_id(message)}")
        assert slot.count() == 1, slot_id(message)
        assert "draft" not in (slot.get_attribute("class") or "")
    shown = page.locator("article.slot:not([hidden])")
    assert shown.count() == len(detail["messages"]) + len(detail["failures"] or [])
    ids = shown.evaluate_all("els => els.map(e => e.id)")
    assert len(ids) == len(set(ids)), ids
    return detail


def assert_inert(page):
    assert page.locator("main img").count() == 0
    assert page.locator("main a[href^='javascript']").count() == 0
    assert page.evaluate("window.__agonXss === undefined")


def test_text_streams_before_its_message_then_the_consensus(slow_agon, watched):
    page = watched.page
    debate_id = start_debate(slow_agon, page)
    page.get_by_text("Connection: live").wait_for()
    draft = page.locator("article.slot.draft").first
    draft.wait_for(timeout=30_000)
    draft_id = draft.get_attribute("id")
    # A draft is only ever drawn for text whose message is not recorded;
    # the recorded message then takes its place.
    page.locator(f"#{draft_id}:not(.draft)").wait_for(timeout=30_000)
    assert page.locator("#announcer").inner_text() != ""
    check_page(page, "debate-live-running")
    wait_finished(page)
    page.get_by_role("heading", name="Consensus").first.wait_for()
    assert page.locator("meter#confidence").count() == 1
    # The end often arrives in one message with the last votes, each
    # replacing the elements the first vote's fragments replaced.
    assert page.locator("#facts .tag").inner_text() == "completed"
    assert page.locator("#votes tbody tr").count() == 3
    assert_each_contribution_once(slow_agon, page, debate_id)
    assert_inert(page)
    assert_no_token_readable(page)
    check_page(page, "debate-live-finished")


def test_a_reload_and_a_cut_socket_show_each_contribution_once(slow_agon, watched):
    page = watched.page
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    debate_id = start_debate(slow_agon, page)
    page.locator("article.slot:not([hidden]):not(.draft)").first.wait_for(timeout=30_000)
    page.reload()
    page.get_by_text("Connection: live").wait_for()
    shown = page.locator("article.slot:not([hidden]):not(.draft)").count()
    page.locator("article.slot:not([hidden]):not(.draft)").nth(shown).wait_for(timeout=30_000)
    # Cut the socket mid-debate; the extension reconnects from the page's
    # position and every fragment replaces its element again.
    opened = len(sockets)
    assert page.locator("#after[hidden]").count() == 1, "the debate ended before the cut"
    # A close without a code (1005) is one the extension reconnects after.
    page.evaluate("document.getElementById('live')._htmx.ws.connection.socket.close()")
    for _ in range(100):
        if len(sockets) > opened:
            break
        page.wait_for_timeout(100)
    assert len(sockets) > opened, "no reconnect"
    wait_finished(page)
    assert_each_contribution_once(slow_agon, page, debate_id)


class Foreign(http.server.BaseHTTPRequestHandler):
    """A page on another loopback port that opens our `/ws`."""

    target = ""

    def do_GET(self):
        body = b"<!DOCTYPE html><html><body><p>elsewhere</p></body></html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


OPEN_SOCKET = """url => new Promise(done => {
  const ws = new WebSocket(url);
  ws.onopen = () => { ws.close(); done("open"); };
  ws.onclose = e => done("closed " + e.code);
})"""


def test_a_websocket_from_another_port_is_refused(slow_agon, watched):
    page = watched.page
    debate_id = start_debate(slow_agon, page, rounds="1")
    ws_url = slow_agon.base.replace("http://", "ws://") + f"/ws?debate_id={debate_id}&since=1&format=html"
    assert page.evaluate(OPEN_SOCKET, ws_url) == "open"
    server = http.server.HTTPServer(("127.0.0.1", free_port()), Foreign)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{server.server_port}/")
        assert page.evaluate(OPEN_SOCKET, ws_url) == "closed 1006"
    finally:
        server.shutdown()
