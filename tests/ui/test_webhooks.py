"""Webhooks on the developer portal, by keyboard and pointer: one added
to a receiver of the test's own shows its secret once; "Send a test"
reaches the receiver and its delivery is listed; "Redeliver" sends it
again with the same message id."""

import http.server
import threading
import time

from conftest import check_page, free_port
from test_ui import new_email, register_via_api, sign_in


def start_receiver():
    """A webhook receiver on loopback that records each message's id."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.headers.get("webhook-id"))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def wait_for(condition, what):
    for _ in range(100):
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"never: {what}")


def test_a_webhook_is_added_tested_and_redelivered(agon, watched):
    page, email = watched.page, new_email()
    server, seen = start_receiver()
    try:
        register_via_api(agon, email)
        sign_in(page, agon.base, email)
        page.get_by_role("link", name="Developer").click()
        page.get_by_role("link", name="Webhooks").click()
        page.get_by_role("heading", name="Webhooks").wait_for()
        check_page(page, "developer-webhooks")
        page.get_by_role("link", name="Add a webhook").click()
        page.get_by_role("heading", name="Add a webhook").wait_for()
        check_page(page, "developer-webhook-new")
        page.get_by_label("Address (http or https)").fill(f"http://127.0.0.1:{server.server_address[1]}/hook")
        page.get_by_role("button", name="Add webhook").click()
        secret = page.locator("#new-secret code.secret").inner_text()
        assert secret.startswith("whsec_")
        check_page(page, "developer-webhook-secret")

        page.get_by_role("button", name="Send a test").first.click()
        page.get_by_role("heading", name="Deliveries").wait_for()
        wait_for(lambda: len(seen) == 1, "the test message arrived")
        assert page.locator("#deliveries tbody tr").count() == 1
        assert "204" in page.locator("#deliveries tbody tr").inner_text()
        check_page(page, "webhook-deliveries")

        page.get_by_role("button", name="Redeliver").first.click()
        wait_for(lambda: len(seen) == 2, "the redelivery arrived")
        assert seen[1] == seen[0]

        page.goto(f"{agon.base}/developer/webhooks")
        assert secret not in page.content()
    finally:
        server.shutdown()
