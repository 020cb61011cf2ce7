"""Decision receipts through the upstream SDK's receipts namespace
(`client.receipts.list` and `.get`, at /api/v2/receipts), against the real
binary: the owner lists and reads a finished debate's receipt, whose ODR
view names it, and another user is told it does not exist. Run by
`ops/test.sh` beside the SDK suite, on the embedded store and on PostgreSQL.
"""

import os
import unittest
import uuid

from aragora_sdk.exceptions import NotFoundError

from test_sdk import DEMO, Service, finished, fresh_postgres, signed_up


class Receipts:
    """The cases; each back end runs them (see the classes below)."""

    database_url = None

    @classmethod
    def setUpClass(cls):
        cls.service = Service(cls.database_url)

    @classmethod
    def tearDownClass(cls):
        cls.service.stop()

    def test_the_owner_reads_a_receipt_and_no_one_else_does(self):
        owner, _ = signed_up(self.service, f"rcpt-{uuid.uuid4().hex[:8]}@example.com")
        other, _ = signed_up(self.service, f"rcpt-{uuid.uuid4().hex[:8]}@example.com")
        debate_id = owner.debates.create(task="Keep receipts?", agents=DEMO, rounds=1)["debate_id"]
        self.assertEqual(finished(owner, debate_id)["status"], "completed")
        receipt_id = "rcpt_" + debate_id

        listed = owner.receipts.list(limit=5)
        body = listed.get("data", listed)
        self.assertIn(receipt_id, [r["receipt_id"] for r in body["receipts"]], listed)

        receipt = owner.receipts.get(receipt_id)
        self.assertEqual(receipt["receipt_id"], receipt_id)
        self.assertEqual(receipt["debate"]["debate_id"], debate_id)
        self.assertEqual(receipt["odr"]["source"]["receipt_id"], receipt_id)
        self.assertEqual(len(receipt["odr_digest"]), 64)

        with self.assertRaises(NotFoundError):
            other.receipts.get(receipt_id)


class OnSqlite(Receipts, unittest.TestCase):
    pass


@unittest.skipUnless(os.environ.get("AGON_TEST_DATABASE_URL"), "no PostgreSQL server named")
class OnPostgres(Receipts, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.database_url = fresh_postgres(os.environ["AGON_TEST_DATABASE_URL"])
        super().setUpClass()
