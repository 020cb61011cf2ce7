#!/usr/bin/env python3
"""Verifies an Agon event log from its SQLite file, following CHAIN.md alone.

Checks every stream's hash chain and every seal's link, coverage and Merkle
root; checks seal signatures too when PUBLIC_KEY_HEX is given and the
`cryptography` package is installed. Exit 0 when intact, 1 at the first break,
2 when the file is not an Agon log.
"""
import argparse, decimal, hashlib, json, os, sqlite3, sys, urllib.request

def es_number(x):
    """A float in its shortest ECMAScript form (RFC 8785 section 3.2.2.3)."""
    if x == 0: return "0"
    sign, (_, digits, exp) = "-" if x < 0 else "", decimal.Decimal(repr(abs(x))).as_tuple()
    d = "".join(map(str, digits)).rstrip("0")
    k, n = len(d), len(digits) + exp  # digits d, decimal point after n of them
    if k <= n <= 21: s = d + "0" * (n - k)
    elif 0 < n <= 21: s = d[:n] + "." + d[n:]
    elif -6 < n <= 0: s = "0." + "0" * -n + d
    else: s = d[0] + ("." + d[1:] if k > 1 else "") + "e" + ("+" if n > 0 else "-") + str(abs(n - 1))
    return sign + s

def strict(text):
    """Parses JSON, refusing a member name given twice and NaN or Infinity."""
    def members(pairs):
        if len(set(k for k, _ in pairs)) != len(pairs): raise ValueError("duplicate member name")
        return dict(pairs)
    def constant(name): raise ValueError("not JSON: " + name)
    return json.loads(text, object_pairs_hook=members, parse_constant=constant)

def canonical(v):
    """RFC 8785 text: members ordered by the UTF-16 code units of their keys."""
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(canonical(k) + ":" + canonical(v[k]) for k in keys) + "}"
    if isinstance(v, list): return "[" + ",".join(map(canonical, v)) + "]"
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)): return json.dumps(v, ensure_ascii=False)
    return es_number(v)

def is_canonical(text):
    """Whether text is exactly the canonical form of what it parses to, with no member name twice."""
    try: return canonical(strict(text)) == text
    except ValueError: return False

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

def main():
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n")[1])
    cli.add_argument("db", metavar="AGON_DB", help="the SQLite file, <SERVICE_DATA_DIR>/agon.db (opened read-only)")
    cli.add_argument("public_key", metavar="PUBLIC_KEY_HEX", nargs="?", help="the published seal key (agon keys public)")
    cli.add_argument("--expect-seal", metavar="FILE", help="a seal saved earlier (agon seal --json) the log must still hold")
    args = cli.parse_args()
    if not os.path.isfile(args.db): print("no such file: " + args.db, file=sys.stderr); sys.exit(2)
    db = sqlite3.connect("file:%s?mode=ro" % urllib.request.pathname2url(os.path.abspath(args.db)), uri=True); db.row_factory = sqlite3.Row
    try: db.execute("SELECT 1 FROM events, seals LIMIT 0")
    except sqlite3.Error: print("not an Agon event log: " + args.db, file=sys.stderr); sys.exit(2)
    heads, noncanonical = {}, 0
    for r in db.execute("SELECT * FROM events ORDER BY position"):
        seq, prev = heads.get((r["aggregate_type"], r["aggregate_id"]), (0, bytes(32)))
        name = "event %s/%s sequence %d" % (r["aggregate_type"], r["aggregate_id"], r["sequence"])
        if r["sequence"] != seq + 1: fail(name + ": sequence %d is missing" % (seq + 1))
        if bytes(r["prev_hash"]) != prev: fail(name + ": prev_hash does not link")
        if hashlib.sha256(prev + canonical_event(r)).digest() != bytes(r["hash"]): fail(name + ": hash mismatch")
        noncanonical += sum(not is_canonical(r[c]) for c in ("payload", "metadata"))
        heads[(r["aggregate_type"], r["aggregate_id"])] = (r["sequence"], bytes(r["hash"]))
    prev_hash, prev_to, seals = "00" * 32, {"txid": 0, "position": 0}, {}
    for n, seal in enumerate(db.execute("SELECT * FROM seals ORDER BY seal_number"), start=1):
        if not is_canonical(seal["body"]): fail("seal %d: body is not canonical" % n)
        body = json.loads(seal["body"])
        if body["seal_number"] != n or body["prev_seal_hash"] != prev_hash or body["from"] != prev_to: fail("seal %d: bad link" % n)
        if hashlib.sha256(seal["body"].encode()).digest() != bytes(seal["seal_hash"]): fail("seal %d: seal_hash" % n)
        f, t = body["from"], body["to"]
        leaves = [bytes(h) for (h,) in db.execute("SELECT hash FROM events WHERE (txid, position) > (?, ?) AND (txid, position) <= (?, ?) "
                                                 "ORDER BY txid, position", (f["txid"], f["position"], t["txid"], t["position"]))]
        if len(leaves) != body["event_count"] or merkle(leaves).hex() != body["merkle_root"]: fail("seal %d: Merkle root" % n)
        if args.public_key:
            if body["public_key"] != args.public_key.lower(): fail("seal %d: signed by another key" % n)
            try:
                from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
                Ed25519PublicKey.from_public_bytes(bytes.fromhex(body["public_key"])).verify(bytes(seal["signature"]), seal["body"].encode())
            except ImportError: pass
            except Exception: fail("seal %d: signature" % n)
        prev_hash, prev_to = bytes(seal["seal_hash"]).hex(), t
        seals[n] = (canonical(body), prev_hash, bytes(seal["signature"]).hex())
    if args.expect_seal:
        try: saved = strict(open(args.expect_seal, encoding="utf-8").read())
        except ValueError as e: print("not a saved seal: %s" % e, file=sys.stderr); sys.exit(2)
        n = saved["body"]["seal_number"]
        if n not in seals: fail("seal %d: the saved seal is missing: the log ends at seal %d" % (n, len(seals)))
        if seals[n] != (canonical(saved["body"]), saved["seal_hash"].lower(), saved["signature"].lower()):
            fail("seal %d: differs from the saved seal" % n)
    print("intact: %d streams" % len(heads))
    if noncanonical: print("note: %d stored texts are not in canonical form (hashed as stored)" % noncanonical)

if __name__ == "__main__": main()
