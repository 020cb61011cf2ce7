"""History and gallery in a browser: the caller's debates searched and
paged, one published from its page, read in the public gallery by a
visitor who is not signed in, its embed card framed by another site and
the full page not, then taken out again."""

import http.server
import threading
import time

from conftest import PASSWORD, check_page, free_port
from test_ui import new_email, register_via_api, sign_in


def finished_debate(agon, token, topic):
    status, created = agon.api("POST", "/api/debates", token=token, body={"topic": topic, "agents": ["demo-a", "demo-b"], "rounds": 1})
    assert status == 201, created
    for _ in range(300):
        _, detail = agon.api("GET", f"/api/debates/{created['id']}")
        if detail["status"] in ("completed", "failed"):
            return created["id"]
        time.sleep(0.1)
    raise AssertionError("the debate did not finish")


def serve_framing_page(html):
    """Another site (another loopback port) whose page frames ours."""
    body = html.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_history_search_publish_and_the_public_gallery(agon, watched, browser):
    page, email = watched.page, new_email()
    register_via_api(agon, email)
    _, session = agon.api("POST", "/api/auth/login", token=None, body={"email": email, "password": PASSWORD})
    token = session["access_token"]
    finished_debate(agon, token, "Tea or coffee in the morning?")
    debate_id = finished_debate(agon, token, "Should every city have trams?")
    sign_in(page, agon.base, email)

    page.get_by_role("link", name="Debates", exact=True).click()
    page.get_by_role("heading", name="Your debates").wait_for()
    assert page.locator("#debates tbody tr").count() == 2
    check_page(page, "history")
    page.get_by_label("Topic contains").fill("TRAMS")
    page.get_by_role("button", name="Search").click()
    page.get_by_text("1 debate whose topic contains").wait_for()
    assert page.locator("#debates tbody tr").count() == 1
    # The status filter is links that keep the search.
    filters = page.get_by_role("navigation", name="Status")
    filters.get_by_role("link", name="running").click()
    page.get_by_text("0 debates whose topic contains “TRAMS”, running.").wait_for()
    filters.get_by_role("link", name="completed").click()
    page.get_by_text("1 debate whose topic contains “TRAMS”, completed.").wait_for()
    assert filters.get_by_role("link", name="completed").get_attribute("aria-current") == "page"

    page.get_by_role("link", name="Should every city have trams?", exact=True).click()
    page.get_by_role("button", name="Publish to the public gallery").click()
    page.get_by_role("button", name="Take it out of the gallery").wait_for()

    visitor = browser.new_context()
    try:
        public = visitor.new_page()
        public.goto(f"{agon.base}/gallery")
        public.get_by_role("heading", name="Public gallery").wait_for()
        check_page(public, "gallery")
        public.get_by_role("link", name="Should every city have trams?", exact=True).click()
        public.get_by_role("heading", name="Should every city have trams?").wait_for()
        public.get_by_text("Consensus:").first.wait_for()
        check_page(public, "gallery-debate")
        public.goto(f"{agon.base}/gallery/{debate_id}/embed")
        check_page(public, "gallery-embed")

        frames = f'<!doctype html><title>Another site</title><iframe id="card" src="{agon.base}/gallery/{debate_id}/embed"></iframe><iframe id="page" src="{agon.base}/gallery/{debate_id}"></iframe>'
        other = serve_framing_page(frames)
        try:
            public.goto(f"http://127.0.0.1:{other.server_address[1]}/")
            card = public.frame_locator("#card")
            card.get_by_role("link", name="Read the debate on Agon").wait_for()
            # The card loaded; the full page, loaded beside it, was refused.
            time.sleep(0.5)
            assert public.frame_locator("#page").get_by_role("heading", name="Contributions").count() == 0, "the full page was framed"
        finally:
            other.shutdown()
    finally:
        visitor.close()

    page.get_by_role("button", name="Take it out of the gallery").click()
    page.get_by_role("button", name="Publish to the public gallery").wait_for()
    status, _ = agon.api("GET", f"/api/gallery/{debate_id}", token=None)
    assert status == 404
