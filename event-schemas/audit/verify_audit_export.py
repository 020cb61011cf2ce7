#!/usr/bin/env python3
"""Checks an Agon audit export on its own, following CHAIN.md and AUDIT.md.

A trail export (GET /api/v1/audit-trails/ID/export?format=json): every entry
links to the one before, sequences run 1, 2, 3, ... and every entry that is
not redacted is rehashed from its stored texts. A SOC 2 evidence package
(POST /api/audit/export, format soc2, a zip): the manifest's digests, every
stream's links, every seal's link, hash and Merkle root recomputed from the
listed event hashes, and the seal signatures when PUBLIC_KEY_HEX is given and
the `cryptography` package is installed. Exit 0 when intact, 1 at the first
break, 2 when the file is neither.
"""
import argparse, hashlib, io, json, os, sys, zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verify_export import canonical, canonical_event, merkle, fail  # noqa: E402

ZEROS = "00" * 32

def check_signature(body, signature_hex, public_key):
    if not public_key: return
    if body["public_key"] != public_key.lower(): fail("seal %d: signed by another key" % body["seal_number"])
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(body["public_key"])).verify(
            bytes.fromhex(signature_hex), canonical(body).encode())
    except ImportError: pass
    except Exception: fail("seal %d: signature" % body["seal_number"])

def trail(export):
    if export.get("format") != "agon.audit-trail.v1": print("not an Agon trail export", file=sys.stderr); sys.exit(2)
    prev, rehashed = ZEROS, 0
    for n, e in enumerate(export["entries"], start=1):
        name = "entry at sequence %d (position %d)" % (e["sequence"], e["position"])
        if e["sequence"] != n: fail(name + ": sequence %d is missing" % n)
        if e["prev_hash"] != prev: fail(name + ": prev_hash does not link to the entry before")
        if e["payload"] is not None:
            fields = {"aggregate_type": export["subject_type"], "aggregate_id": export["subject_id"], "sequence": e["sequence"],
                      "event_type": e["event_type"], "event_version": e["event_version"],
                      "payload": e["payload"], "metadata": e["metadata"]}
            if hashlib.sha256(bytes.fromhex(prev) + canonical_event(fields)).hexdigest() != e["hash"]:
                fail(name + ": hash does not match its contents")
            rehashed += 1
        prev = e["hash"]
    if export["verification"].get("problem"):
        fail("the service's own verification failed: %s" % export["verification"]["problem"])
    print("intact: %d entries linked, %d rehashed, %d redacted (links checked only)"
          % (len(export["entries"]), rehashed, len(export["entries"]) - rehashed))

def package(archive, public_key):
    files = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(files["manifest.json"])
    if manifest.get("format") != "agon.soc2-evidence.v1": print("not an Agon evidence package", file=sys.stderr); sys.exit(2)
    for f in manifest["files"]:
        if hashlib.sha256(files[f["file"]]).hexdigest() != f["sha256"]: fail(f["file"] + ": digest differs from the manifest")
    events = json.loads(files["events.json"])
    heads = {}
    for e in sorted(events, key=lambda e: e["position"]):
        key = (e["aggregate_type"], e["aggregate_id"])
        seq, prev = heads.get(key, (0, ZEROS))
        name = "event %s/%s sequence %d" % (key[0], key[1], e["sequence"])
        if e["sequence"] != seq + 1: fail(name + ": sequence %d is missing" % (seq + 1))
        if e["prev_hash"] != prev: fail(name + ": prev_hash does not link")
        heads[key] = (e["sequence"], e["hash"])
    feed = sorted(events, key=lambda e: (e["txid"], e["position"]))
    key_file = files["public_key.txt"].decode().strip()
    public_key = public_key or key_file
    prev_hash, prev_to = ZEROS, {"txid": 0, "position": 0}
    seals = json.loads(files["seals.json"])
    for n, seal in enumerate(seals, start=1):
        body = seal["body"]
        if body["seal_number"] != n or body["prev_seal_hash"] != prev_hash or body["from"] != prev_to: fail("seal %d: bad link" % n)
        if hashlib.sha256(canonical(body).encode()).hexdigest() != seal["seal_hash"]: fail("seal %d: seal_hash" % n)
        f, t = body["from"], body["to"]
        leaves = [bytes.fromhex(e["hash"]) for e in feed if (f["txid"], f["position"]) < (e["txid"], e["position"]) <= (t["txid"], t["position"])]
        if len(leaves) != body["event_count"] or merkle(leaves).hex() != body["merkle_root"]: fail("seal %d: Merkle root" % n)
        check_signature(body, seal["signature"], public_key)
        prev_hash, prev_to = seal["seal_hash"], t
    report = json.loads(files["verification.json"])
    if report.get("problem"): fail("the service's own verification failed: %s" % report["problem"])
    print("intact: %d events in %d streams, %d seals" % (len(events), len(heads), len(seals)))

def main():
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("file", metavar="EXPORT", help="a trail export (JSON) or a SOC 2 evidence package (zip)")
    cli.add_argument("public_key", metavar="PUBLIC_KEY_HEX", nargs="?", help="the published seal key (agon keys public)")
    args = cli.parse_args()
    try: data = open(args.file, "rb").read()
    except OSError as e: print(e, file=sys.stderr); sys.exit(2)
    if zipfile.is_zipfile(io.BytesIO(data)):
        package(zipfile.ZipFile(io.BytesIO(data)), args.public_key)
    else:
        try: export = json.loads(data)
        except ValueError: print("not JSON and not a zip: " + args.file, file=sys.stderr); sys.exit(2)
        trail(export)

if __name__ == "__main__": main()
