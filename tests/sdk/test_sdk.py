"""The upstream Python SDK (`aragora-sdk` 2.11.0), unchanged, against the
real `agon` binary: the calls its README shows, each answer checked, on the
embedded store and, when `AGON_TEST_DATABASE_URL` names a PostgreSQL server,
on a fresh PostgreSQL database too.

Run by `ops/test.sh` from a virtual environment holding the SDK:
`python -m unittest discover -s tests/sdk`. `AGON_BINARY` names the binary
(default `target/debug/agon`).
"""

import asyncio
import os
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request
import uuid
from urllib.parse import urlsplit, urlunsplit

from aragora_sdk import AragoraAsyncClient, AragoraClient
from aragora_sdk.exceptions import (
    AragoraError,
    AuthenticationError,
    AuthorizationError,
    NotFoundError,
    RateLimitError,
    ValidationError,
)
from aragora_sdk.generated_types import ConsensusResult, Debate, DebateCreateResponse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("AGON_BINARY", os.path.join(ROOT, "target", "debug", "agon"))
ADMIN_TOKEN = "sdk-suite-admin-token-" + uuid.uuid4().hex
DEMO = ["demo-a", "demo-b", "demo-c"]
PASSWORD = "sdk-suite-password-1"
ROOMY = {
    name: "1000000"
    for name in (
        "SERVICE_RATE_LIMIT",
        "SERVICE_RATE_LIMIT_DEFAULT",
        "SERVICE_RATE_LIMIT_AUTH",
        "SERVICE_RATE_LIMIT_REGISTER",
        "SERVICE_RATE_LIMIT_DEBATE_CREATE",
        "SERVICE_RATE_LIMIT_DEBATE_LIST",
        "SERVICE_RATE_LIMIT_EXPORT",
        "SERVICE_IP_RATE_LIMIT",
    )
}
# A user's stream and its `debates.stream()` may overlap while one closes.
ROOMY["SERVICE_WS_MAX_CONNECTIONS_FREE"] = "5"



def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_postgres(url):
    """A new database on the server of `url`; its URL."""
    name = "agon_sdk_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", url, "-qc", f"CREATE DATABASE {name}"], check=True)
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


class Service:
    """`agon serve` on loopback ports, stopped by `stop`."""

    def __init__(self, database_url=None, extra=None):
        self.dir = tempfile.TemporaryDirectory()
        self.port = free_port()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "SERVICE_DATA_DIR": self.dir.name,
            "SERVICE_API_TOKEN": ADMIN_TOKEN,
            "SERVICE_LOG_LEVEL": "WARNING",
            **ROOMY,
            **(extra or {}),
        }
        if database_url:
            env["DATABASE_URL"] = database_url
        self.log = open(os.path.join(self.dir.name, "agon.log"), "w")
        self.process = subprocess.Popen(
            [BINARY, "serve", "--host", "127.0.0.1", "--api-port", str(self.port),
             "--ws-port", str(free_port())],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("agon did not start: " + open(self.log.name).read())
            time.sleep(0.1)

    def client(self, token=None):
        return AragoraClient(base_url=self.base, api_key=token, max_retries=1, timeout=30)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()
        self.dir.cleanup()


def signed_up(service, email):
    """A registered user's client (signed in with the access token)."""
    anonymous = service.client()
    anonymous.auth.register(email=email, password=PASSWORD, name="SDK User")
    tokens = anonymous.auth.login(email=email, password=PASSWORD)
    return service.client(tokens["access_token"]), tokens


def finished(client, debate_id, seconds=60):
    deadline = time.time() + seconds
    while True:
        debate = client.debates.get(debate_id)
        if debate["status"] in ("completed", "failed"):
            return debate
        if time.time() > deadline:
            raise AssertionError(f"debate never finished: {debate['status']}")
        time.sleep(0.1)


class SdkAgainstAgon:
    """The cases; each back end runs them all (see the classes below)."""

    database_url = None

    @classmethod
    def setUpClass(cls):
        cls.service = Service(cls.database_url)

    @classmethod
    def tearDownClass(cls):
        cls.service.stop()

    def test_accounts_and_sessions(self):
        email = f"ada-{uuid.uuid4().hex[:8]}@example.com"
        client, tokens = signed_up(self.service, email)
        self.assertTrue(tokens["access_token"] and tokens["refresh_token"])
        me = client.auth.get_current_user()
        self.assertEqual(client_email(client), email)
        refreshed = self.service.client().auth.refresh_token(tokens["refresh_token"])
        again = self.service.client(refreshed["access_token"]).auth.get_current_user()
        self.assertEqual(again["id"], me["id"])
        sessions = client.auth.list_sessions()
        self.assertGreaterEqual(len(sessions["sessions"]), 1, sessions)

    def test_api_keys_by_name(self):
        client, _ = signed_up(self.service, f"kay-{uuid.uuid4().hex[:8]}@example.com")
        first = client.auth.create_api_key(name="laptop")
        second = client.auth.create_api_key(name="ci")
        secrets = [key["api_key"] for key in (first, second)]
        self.assertNotEqual(secrets[0], secrets[1])
        listed = client.auth.list_api_keys()
        keys = listed["keys"]
        self.assertEqual(sorted(k["name"] for k in keys), ["ci", "laptop"])
        by_name = {k["name"]: k for k in keys}
        self.assertTrue(secrets[0].startswith(by_name["laptop"]["prefix"]), listed)
        self.assertTrue(secrets[1].startswith(by_name["ci"]["prefix"]), listed)
        self.assertNotIn(secrets[0], repr(listed), "the list never shows a secret")
        for secret in secrets:
            self.assertIn("id", self.service.client(secret).auth.get_current_user())
        client.auth.revoke_api_key(by_name["laptop"]["id"])
        with self.assertRaises(AuthenticationError):
            self.service.client(secrets[0]).auth.get_current_user()
        self.assertIn("id", self.service.client(secrets[1]).auth.get_current_user())

    def test_the_stream_follows_a_debate_to_debate_end(self):
        _, tokens = signed_up(self.service, f"ws-{uuid.uuid4().hex[:8]}@example.com")

        async def follow():
            async with AragoraAsyncClient(
                base_url=self.service.base, api_key=tokens["access_token"]
            ) as client:
                ws = client.stream
                await ws.connect()
                created = await client.debates.create(task="Tabs or spaces?", agents=DEMO, rounds=1)
                debate_id = created["debate_id"]
                ws.subscribe(debate_id)
                seen = []
                async for event in ws.events():
                    seen.append(event)
                    if event.type in ("debate_end", "error"):
                        break
                await ws.close()
                again = [event async for event in client.debates.stream(debate_id)]
                return debate_id, seen, again

        debate_id, seen, again = asyncio.run(follow())
        self.assertEqual(seen[-1].type, "debate_end", [e.type for e in seen])
        self.assertEqual(seen[-1].debate_id, debate_id)
        self.assertEqual(seen[-1].data["status"], "completed")
        self.assertEqual(seen[-1].typed_data.debate_id, debate_id)
        # Subscribed after it ended: its outcome and debate_end at once.
        self.assertEqual([e.type for e in again], ["consensus", "debate_end"])
        self.assertIs(again[0].data["reached"], again[-1].typed_data.consensus_reached)

    def test_a_debate_from_create_to_consensus(self):
        client, _ = signed_up(self.service, f"deb-{uuid.uuid4().hex[:8]}@example.com")
        created = client.debates.create(task="Tabs or spaces?", agents=DEMO, rounds=2)
        DebateCreateResponse.model_validate(created)
        self.assertIs(created["success"], True)
        debate_id = created["debate_id"]
        detail = finished(client, debate_id)
        self.assertEqual(detail["status"], "completed")
        typed = Debate.model_validate(detail)
        self.assertEqual(len(detail["rounds"]), detail["rounds_completed"])
        self.assertEqual(detail["max_rounds"], 2)
        self.assertIsNotNone(typed)
        messages = client.debates.get_messages(debate_id)["messages"]
        self.assertEqual(
            sum(len(r["messages"]) for r in detail["rounds"]), len(messages), detail["rounds"]
        )
        self.assertEqual({m["agent"] for m in messages}, set(DEMO))
        consensus = client.debates.get_consensus(debate_id)
        ConsensusResult.model_validate(consensus)
        self.assertEqual(consensus["reached"], consensus["status"] == "consensus_reached")
        self.assertEqual(consensus["final_answer"], detail["final_answer"])
        voters = set(consensus["supporting_agents"]) | set(consensus["dissenting_agents"])
        self.assertEqual(voters, set(DEMO))
        for table in ("json",):
            exported = client.debates.get_export(debate_id, format=table)
            self.assertEqual(exported["id"], debate_id)

    def test_list_all_walks_every_debate(self):
        client, _ = signed_up(self.service, f"lst-{uuid.uuid4().hex[:8]}@example.com")
        ids = {client.debates.create(task=f"Topic {n}", agents=DEMO, rounds=1)["debate_id"]
               for n in range(5)}
        for debate_id in ids:
            finished(client, debate_id)
        walked = [d["id"] for d in client.debates.list_all(page_size=2)]
        self.assertEqual(sorted(walked), sorted(ids))
        completed = [d["id"] for d in client.debates.list_all(status="completed", page_size=3)]
        self.assertEqual(sorted(completed), sorted(ids))

    def test_leaderboard_and_rankings(self):
        client, _ = signed_up(self.service, f"elo-{uuid.uuid4().hex[:8]}@example.com")
        finished(client, client.debates.create(task="Cats or dogs?", agents=DEMO, rounds=1)[
            "debate_id"])
        deadline = time.time() + 30
        while True:
            board = client.leaderboard.get_rankings()
            if {a["name"] for a in board["agents"]} >= set(DEMO):
                break
            self.assertLess(time.time(), deadline, board)
            time.sleep(0.1)
        self.assertEqual(board["rankings"], board["agents"])
        rankings = client.ranking.list(limit=2, offset=1, min_debates=1)
        self.assertEqual(rankings, board["agents"][1:3])
        self.assertEqual(client.agents.get_rankings(limit=50)["rankings"], board["agents"])

    def test_every_error_prints_its_status_and_code(self):
        client, _ = signed_up(self.service, f"err-{uuid.uuid4().hex[:8]}@example.com")
        cases = [
            (AuthenticationError, 401, "UNAUTHORIZED",
             lambda: self.service.client("not-a-token").auth.get_current_user()),
            (AuthorizationError, 403, "FORBIDDEN",
             lambda: client.request("GET", "/api/admin/users")),
            (NotFoundError, 404, "NOT_FOUND", lambda: client.debates.get("no-such-debate")),
            (ValidationError, 400, "BAD_REQUEST",
             lambda: client.debates.create(task="t", agents=["demo-a", "claude"])),
            (AragoraError, 422, "VALIDATION_ERROR",
             lambda: client.debates.create(task="t", agents=DEMO, rounds=0)),
            (AragoraError, 409, "CONFLICT",
             lambda: self.service.client().auth.register(
                 email=client_email(client), password=PASSWORD, name="Again")),
        ]
        for kind, status, code, call in cases:
            with self.subTest(status=status):
                with self.assertRaises(kind) as caught:
                    call()
                text = str(caught.exception)
                self.assertIn(f"({status})", text)
                self.assertIn(f"[{code}]", text)
                self.assertEqual(caught.exception.status_code, status)
                self.assertTrue(caught.exception.trace_id, text)


def client_email(client):
    me = client.auth.get_current_user()
    return me.get("email", me.get("user", {}).get("email"))


class RateLimited(unittest.TestCase):
    """A 429 prints too: one create a minute, the second refused."""

    def test_a_refused_create_prints_429(self):
        service = Service(extra={"SERVICE_RATE_LIMIT_DEBATE_CREATE": "1",
                                 "SERVICE_BURST_MULTIPLIER": "1"})
        try:
            client, _ = signed_up(service, "rate@example.com")
            client.debates.create(task="one", agents=DEMO, rounds=1)
            with self.assertRaises(RateLimitError) as caught:
                client.debates.create(task="two", agents=DEMO, rounds=1)
            text = str(caught.exception)
            self.assertIn("(429)", text)
            self.assertIn("[RATE_LIMIT_EXCEEDED]", text)
            self.assertGreater(caught.exception.retry_after, 0)
        finally:
            service.stop()


class OnSqlite(SdkAgainstAgon, unittest.TestCase):
    pass


@unittest.skipUnless(os.environ.get("AGON_TEST_DATABASE_URL"), "no PostgreSQL server named")
class OnPostgres(SdkAgainstAgon, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.database_url = fresh_postgres(os.environ["AGON_TEST_DATABASE_URL"])
        super().setUpClass()


if __name__ == "__main__":
    unittest.main()
