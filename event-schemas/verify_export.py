#!/usr/bin/env python3
"""Verifies an Agon event log from its SQLite file, following CHAIN.md alone.

Usage: verify_export.py AGON_DB [PUBLIC_KEY_HEX]
Checks every stream's hash chain and every seal's link, coverage and Merkle
root; checks seal signatures too when PUBLIC_KEY_HEX is given and the
`cryptography` package is installed. Exit 0 when intact, 1 at the first break.
"""
import hashlib, json, sqlite3, sys

def canonical_event(r):
    s = lambda v: json.dumps(v, ensure_ascii=False)
    return ('{"aggregate_id":%s,"aggregate_type":%s,"event_type":%s,"event_version":%s,'
            '"metadata":%s,"payload":%s,"sequence":%d}' % (s(r["aggregate_id"]), s(r["aggregate_type"]),
            s(r["event_type"]), s(r["event_version"]), r["metadata"], r["payload"], r["sequence"])).encode()

def merkle(leaves):
    if not leaves: return hashlib.sha256(b"").digest()
    if len(leaves) == 1: return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves): k *= 2
    return hashlib.sha256(b"\x01" + merkle(leaves[:k]) + merkle(leaves[k:])).digest()

def fail(msg): print("BROKEN: " + msg); sys.exit(1)

db = sqlite3.connect(sys.argv[1]); db.row_factory = sqlite3.Row
heads = {}
for r in db.execute("SELECT * FROM events ORDER BY position"):
    seq, prev = heads.get((r["aggregate_type"], r["aggregate_id"]), (0, bytes(32)))
    name = "event %s/%s sequence %d" % (r["aggregate_type"], r["aggregate_id"], r["sequence"])
    if r["sequence"] != seq + 1: fail(name + ": sequence %d is missing" % (seq + 1))
    if bytes(r["prev_hash"]) != prev: fail(name + ": prev_hash does not link")
    if hashlib.sha256(prev + canonical_event(r)).digest() != bytes(r["hash"]): fail(name + ": hash mismatch")
    heads[(r["aggregate_type"], r["aggregate_id"])] = (r["sequence"], bytes(r["hash"]))
prev_hash, prev_to = "00" * 32, {"txid": 0, "position": 0}
for n, seal in enumerate(db.execute("SELECT * FROM seals ORDER BY seal_number"), start=1):
    body = json.loads(seal["body"])
    if body["seal_number"] != n or body["prev_seal_hash"] != prev_hash or body["from"] != prev_to: fail("seal %d: bad link" % n)
    if hashlib.sha256(seal["body"].encode()).digest() != bytes(seal["seal_hash"]): fail("seal %d: seal_hash" % n)
    f, t = body["from"], body["to"]
    leaves = [bytes(h) for (h,) in db.execute("SELECT hash FROM events WHERE (txid, position) > (?, ?) AND (txid, position) <= (?, ?) "
                                             "ORDER BY txid, position", (f["txid"], f["position"], t["txid"], t["position"]))]
    if len(leaves) != body["event_count"] or merkle(leaves).hex() != body["merkle_root"]: fail("seal %d: Merkle root" % n)
    if len(sys.argv) > 2:
        if body["public_key"] != sys.argv[2]: fail("seal %d: signed by another key" % n)
        try:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(body["public_key"])).verify(bytes(seal["signature"]), seal["body"].encode())
        except ImportError: pass
        except Exception: fail("seal %d: signature" % n)
    prev_hash, prev_to = bytes(seal["seal_hash"]).hex(), t
print("intact: %d streams" % len(heads))
