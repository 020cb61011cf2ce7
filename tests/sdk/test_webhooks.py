"""Outgoing webhooks verify with the Standard Webhooks library
(`standardwebhooks`, an implementation independent of the service's own):
a receiver on loopback gets a debate's `debate.verdict` and
`debate.completed` and a test ping, registered through the upstream SDK,
and each verifies with the secret shown at registration, while a wrong
secret or a changed body does not. Run by `ops/test.sh` beside the SDK
suite, against the real binary, on the embedded store and on PostgreSQL.
"""

import json
import os
import threading
import time
import unittest
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from test_sdk import DEMO, Service, finished, fresh_postgres, signed_up

# Deliveries to the loopback receiver are allowed, and go out at once.
WEBHOOKS = {
    "SERVICE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    "SERVICE_WEBHOOK_POLL_MS": "50",
    "SERVICE_WEBHOOK_RETRY_BASE_MS": "100",
}
# Another secret of the right form, for the refusals.
OTHER_SECRET = "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQQ=="


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every request and answers 200."""

    def __init__(self):
        self.received = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.received.append((dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait(self, done, seconds=60):
        """The requests so far, once `done` holds for them."""
        deadline = time.time() + seconds
        while True:
            with self.lock:
                seen = list(self.received)
            if done(seen):
                return seen
            if time.time() > deadline:
                raise AssertionError(f"the receiver got only {[h.get('webhook-id') for h, _ in seen]}")
            time.sleep(0.05)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def kind(body):
    return json.loads(body)["type"]


class StandardWebhooks:
    """The cases; each back end runs them (see the classes below)."""

    database_url = None

    @classmethod
    def setUpClass(cls):
        cls.service = Service(cls.database_url, WEBHOOKS)
        cls.receiver = Receiver()

    @classmethod
    def tearDownClass(cls):
        cls.receiver.stop()
        cls.service.stop()

    def test_every_delivery_verifies_with_the_standard_webhooks_library(self):
        client, _ = signed_up(self.service, f"hook-{uuid.uuid4().hex[:8]}@example.com")
        created = client.webhooks.create(
            url=self.receiver.url,
            events=["debate.completed", "debate.verdict", "debate.failed"],
        )
        secret, webhook_id = created["secret"], created["id"]
        self.assertTrue(secret.startswith("whsec_"), created)

        debate = client.debates.create(task="Spaces or tabs?", agents=DEMO, rounds=1)
        debate_id = debate["debate_id"]
        self.assertEqual(finished(client, debate_id)["status"], "completed")
        client.webhooks.test(webhook_id)
        wanted = {"debate.verdict", "debate.completed", "webhook.ping"}
        seen = self.receiver.wait(lambda seen: wanted <= {kind(b) for _, b in seen})

        library = Webhook(secret)
        for headers, body in seen:
            payload = library.verify(body, headers)
            self.assertEqual(payload, json.loads(body))
            self.assertEqual(payload["version"], 1, payload)
            if payload["type"] != "webhook.ping":
                self.assertEqual(payload["data"]["debate_id"], debate_id, payload)
            # Another key, or a body changed by one byte, does not verify.
            with self.assertRaises(WebhookVerificationError):
                Webhook(OTHER_SECRET).verify(body, headers)
            with self.assertRaises(WebhookVerificationError):
                library.verify(body.replace(b"}", b" }", 1), headers)
        ids = [headers["webhook-id"] for headers, _ in seen]
        self.assertEqual(len(ids), len(set(ids)), ids)


class OnSqlite(StandardWebhooks, unittest.TestCase):
    pass


@unittest.skipUnless(os.environ.get("AGON_TEST_DATABASE_URL"), "no PostgreSQL server named")
class OnPostgres(StandardWebhooks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.database_url = fresh_postgres(os.environ["AGON_TEST_DATABASE_URL"])
        super().setUpClass()
