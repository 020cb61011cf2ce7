#!/usr/bin/env python3
"""Verifies an Agon decision receipt offline, following RECEIPT.md alone.

    verify_receipt.py RECEIPT.json PUBLIC_KEY_HEX

Checks, in order, and prints each: canonical_form, structure, event_hashes,
seal_signature, inclusion, content_digest (the bindings this script can
check without folding the events: ids, times, the ODR digest and its links
to our part), odr_signature. Needs the `cryptography` package. Exit 0 when
every check passes, 1 naming the first that fails, 2 on bad arguments.
"""
import base64, decimal, hashlib, json, sys

def es_number(x):
    if x == 0: return "0"
    sign, (_, digits, exp) = "-" if x < 0 else "", decimal.Decimal(repr(abs(x))).as_tuple()
    d = "".join(map(str, digits)).rstrip("0")
    k, n = len(d), len(digits) + exp
    if k <= n <= 21: s = d + "0" * (n - k)
    elif 0 < n <= 21: s = d[:n] + "." + d[n:]
    elif -6 < n <= 0: s = "0." + "0" * -n + d
    else: s = d[0] + ("." + d[1:] if k > 1 else "") + "e" + ("+" if n > 0 else "-") + str(abs(n - 1))
    return sign + s

def jcs(v):
    """RFC 8785 canonical text."""
    if isinstance(v, dict):
        return "{" + ",".join(jcs(k) + ":" + jcs(v[k]) for k in sorted(v, key=lambda k: k.encode("utf-16-be"))) + "}"
    if isinstance(v, list): return "[" + ",".join(map(jcs, v)) + "]"
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)): return json.dumps(v, ensure_ascii=False)
    return es_number(v)

def strict(text):
    def members(pairs):
        if len({k for k, _ in pairs}) != len(pairs): raise ValueError("duplicate member name")
        return dict(pairs)
    def constant(name): raise ValueError("not JSON: " + name)
    return json.loads(text, object_pairs_hook=members, parse_constant=constant)

def sha(b): return hashlib.sha256(b).digest()

def verify_key(key, sig, msg):
    from cryptography.exceptions import InvalidSignature
    try: key.verify(sig, msg); return True
    except InvalidSignature: return False

def inclusion(leaf, index, size, path, root):
    """RFC 9162 section 2.1.3.2."""
    if index >= size: return False
    fn, sn, r = index, size - 1, sha(b"\x00" + leaf)
    for p in path:
        if sn == 0: return False
        if fn & 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            while not fn & 1 and fn != 0: fn >>= 1; sn >>= 1
        else: r = sha(b"\x01" + r + p)
        fn >>= 1; sn >>= 1
    return sn == 0 and r == root

def hexhash(s):
    if not isinstance(s, str) or len(s) != 64 or s != s.lower(): raise ValueError("bad hash " + repr(s))
    return bytes.fromhex(s)

def checks(raw, key, pub_hex):
    try:
        text = raw.decode("utf-8"); r = strict(text)
        if jcs(r) != text: raise ValueError("not in RFC 8785 canonical form")
    except ValueError as e: yield "canonical_form", str(e); return
    yield "canonical_form", None
    top = {"receipt_version", "receipt_id", "issued_at", "debate", "events", "seals", "odr_digest", "odr"}
    if not isinstance(r, dict) or set(r) != top or r["receipt_version"] != 1:
        yield "structure", "not a version 1 receipt"; return
    yield "structure", None
    prev, hashes = bytes(32), []
    for i, e in enumerate(r["events"]):
        fields = {k: e[k] for k in ("aggregate_id", "aggregate_type", "event_type", "event_version", "metadata", "payload", "sequence")}
        h = sha(prev + jcs(fields).encode())
        try: linked = hexhash(e["prev_hash"]) == prev and hexhash(e["hash"]) == h
        except ValueError: linked = False
        if e["sequence"] != i + 1 or e["aggregate_id"] != r["events"][0]["aggregate_id"] or not linked:
            yield "event_hashes", "event %d does not hash onto the chain" % (i + 1); return
        hashes.append(h); prev = h
    if not hashes: yield "event_hashes", "no events"; return
    yield "event_hashes", None
    seals = {}
    for s in r["seals"]:
        b = s["body"]
        try: signed = b["public_key"] == pub_hex and verify_key(key, bytes.fromhex(s["signature"]), jcs(b).encode())
        except ValueError: signed = False
        if not signed:
            yield "seal_signature", "seal %s is not signed by the key" % b["seal_number"]; return
        seals[b["seal_number"]] = b
    if not seals: yield "seal_signature", "no seal"; return
    yield "seal_signature", None
    for e, h in zip(r["events"], hashes):
        p = e["proof"]; b = seals.get(p["seal_number"])
        try: proved = b is not None and p["tree_size"] == b["event_count"] and inclusion(
                h, p["leaf_index"], p["tree_size"], [hexhash(x) for x in p["audit_path"]], hexhash(b["merkle_root"]))
        except ValueError: proved = False
        if not proved:
            yield "inclusion", "event %d is not proved into its seal" % e["sequence"]; return
    yield "inclusion", None
    odr, debate_id = r["odr"], r["events"][0]["aggregate_id"]
    created = r["events"][0]["payload"].get("DebateCreated", {})
    status = {"DebateCompleted": "completed", "DebateFailed": "failed"}.get(r["events"][-1]["event_type"])
    unsigned = {k: v for k, v in odr.items() if k != "signatures"}
    digest = hashlib.sha256(jcs(unsigned).encode()).hexdigest()
    problems = [
        (r["receipt_id"] == "rcpt_" + debate_id, "receipt_id"),
        (r["debate"].get("debate_id") == debate_id, "debate.debate_id"),
        (r["issued_at"] == max(s["body"]["sealed_at"] for s in r["seals"]), "issued_at"),
        (r["odr_digest"] == digest, "odr_digest"),
        (odr.get("receipt_id") == r["receipt_id"] and odr.get("issued_at") == r["issued_at"], "odr receipt_id/issued_at"),
        (odr.get("source", {}).get("receipt_id") == r["receipt_id"], "odr source.receipt_id"),
        (odr.get("source", {}).get("artifact_hash") == r["events"][-1]["hash"], "odr source.artifact_hash"),
        (odr.get("subject", {}).get("identifier") == debate_id, "odr subject.identifier"),
        (status is not None and r["debate"].get("status") == status, "debate.status"),
        (r["debate"].get("topic") == created.get("topic") == odr.get("subject", {}).get("summary"), "topic"),
        (r["debate"].get("created_by") == created.get("created_by"), "debate.created_by"),
        ([p.get("agent") for p in r["debate"].get("participants", [])] == created.get("agents"), "participants"),
    ]
    wrong = [what for ok, what in problems if not ok]
    if wrong: yield "content_digest", "mismatch: " + ", ".join(wrong); return
    yield "content_digest", None
    sigs = odr.get("signatures")
    if not isinstance(sigs, list) or len(sigs) != 1:
        yield "odr_signature", "expected one signature entry"; return
    protected = {k: v for k, v in sigs[0].items() if k != "signature"}
    key_id = "ed25519-" + hashlib.sha256(bytes.fromhex(pub_hex)).hexdigest()[:16]
    message = jcs({"odr_digest": digest, "odr_signature_input": "0.2", "protected": protected}).encode()
    if protected.get("key_id") != key_id or not verify_key(key, base64.b64decode(sigs[0]["signature"], validate=True), message):
        yield "odr_signature", "the ODR v0.2 signature does not verify"; return
    yield "odr_signature", None

def main():
    if len(sys.argv) != 3: print(__doc__); return 2
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    pub_hex = sys.argv[2].strip().lower()
    try: key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(pub_hex))
    except ValueError: print("the public key must be 64 hex digits"); return 2
    with open(sys.argv[1], "rb") as f: raw = f.read()
    try:
        for name, problem in checks(raw, key, pub_hex):
            print("[%s] %s%s" % ("fail" if problem else "pass", name, ": " + problem if problem else ""))
            if problem: print("first failing check: " + name); return 1
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        print("[fail] structure: %s" % e); print("first failing check: structure"); return 1
    print("VALID"); return 0

if __name__ == "__main__":
    sys.exit(main())
