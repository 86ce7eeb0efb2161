#!/usr/bin/env python3
"""Deterministic benchmark data: a service-discovery shaped zone and query
files for dnsperf and kxdpgun (both read `name type` lines).

Per service (six owner names):
  svcN.svc.uK             A x3, AAAA x3   (the service: its three instances)
  iM.inst.uK (x3)         A, AAAA         (one instance each)
  _http._tcp.svcN.svc.uK  SRV x3          (port and target per instance)
  www.svcN.svc.uK         CNAME svcN.svc.uK
Per tenant uK: MX and TXT (SPF) at uK, mail.uK A/AAAA, a secure
delegation sub.uK (NS, glue, DS) and an insecure one ins.uK (NS, glue).

Query files:
  hits.txt  A/AAAA queries for names that exist, each in random 0x20 case;
  mix.txt   70 % A/AAAA hits, 10 % NXDOMAIN, 10 % NODATA (TXT on a name
            that exists), 10 % other types that exist (SRV);
  front.txt the front line as resolvers send it (FRONT_LINE below);
  srv.txt   SRV queries for the services.
The TCP share of the mix is the harness's business (a concurrent TCP
client on the same file).

Usage: gen.py DIR [--names N] [--queries N] [--seed S]
"""
import argparse
import os
import random

ORIGIN = "bench.test"
SERVER_IP = "10.77.0.1"
NAMES_PER_SERVICE = 6

# The front-line mix: query types in the shares authoritative servers see
# from resolvers (A and AAAA most; HTTPS for about a tenth, since browsers
# ask it of every name they connect to, nearly all NODATA; a tenth of
# names that do not exist), and the rest of what a zone holds: SRV, TXT,
# MX, NS, SOA, DS at delegations (secure and not), names that are CNAMEs,
# and names below a delegation (a referral).
FRONT_LINE = (
    (0.37, "A"), (0.18, "AAAA"), (0.10, "HTTPS"), (0.05, "SRV"), (0.04, "TXT"), (0.03, "MX"),
    (0.02, "NS"), (0.01, "SOA"), (0.02, "DS"), (0.05, "CNAME"), (0.03, "REF"), (0.10, "NX"),
)


def casefold(rng, name):
    """Random 0x20 case, as resolvers send it to defeat spoofing."""
    return "".join(c.upper() if rng.random() < 0.5 else c for c in name)


def write_zone(path, names):
    """Writes a zone of about `names` owner names; returns (address names,
    SRV names, CNAME names, tenant names, record count)."""
    services = max(1, names // NAMES_PER_SERVICE)
    tenants = max(1, services // 50)
    addressed, srv, cnames = [], [], []
    records = 4
    with open(path, "w") as z:
        z.write(f"$ORIGIN {ORIGIN}.\n$TTL 60\n")
        z.write(f"@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A {SERVER_IP}\n")
        for t in range(tenants):
            z.write(f"u{t} MX 10 mail.u{t}\nu{t} TXT \"v=spf1 mx -all\"\n"
                    f"mail.u{t} A 10.255.{t >> 8 & 255}.{t & 255}\nmail.u{t} AAAA 2001:db8:ff::{t:x}\n"
                    f"sub.u{t} NS ns.sub.u{t}\nns.sub.u{t} A 10.254.{t >> 8 & 255}.{t & 255}\n"
                    f"sub.u{t} DS 4711 13 2 {t:064x}\n"
                    f"ins.u{t} NS ns.ins.u{t}\nns.ins.u{t} A 10.253.{t >> 8 & 255}.{t & 255}\n")
            records += 9
        for s in range(services):
            tenant = f"u{s % tenants}"
            svc = f"svc{s}.svc.{tenant}"
            lines = []
            for i in range(3):
                n = s * 3 + i
                v4 = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
                v6 = f"2001:db8::{n >> 16:x}:{n & 0xFFFF:x}"
                inst = f"i{n}.inst.{tenant}"
                lines.append(f"{svc} A {v4}\n{svc} AAAA {v6}\n{inst} A {v4}\n{inst} AAAA {v6}\n")
                lines.append(f"_http._tcp.{svc} SRV 0 10 {8000 + i} {inst}\n")
                addressed.append(inst)
                records += 5
            lines.append(f"www.{svc} CNAME {svc}\n")
            records += 1
            z.write("".join(lines))
            addressed.append(svc)
            srv.append(f"_http._tcp.{svc}")
            cnames.append(f"www.{svc}")
    return addressed, srv, cnames, [f"u{t}" for t in range(tenants)], records


def front_line_query(rng, addressed, srv, cnames, tenants):
    """One line of the front-line mix, in random 0x20 case."""
    r, kind = rng.random(), "NX"
    for share, k in FRONT_LINE:
        if r < share:
            kind = k
            break
        r -= share
    pick = lambda names: f"{casefold(rng, rng.choice(names))}.{ORIGIN}"  # noqa: E731
    tenant = rng.choice(tenants)
    if kind in ("A", "AAAA", "HTTPS"):
        return f"{pick(addressed)} {kind}"
    if kind == "SRV":
        return f"{pick(srv)} SRV"
    if kind in ("TXT", "MX"):
        return f"{casefold(rng, tenant)}.{ORIGIN} {kind}"
    if kind in ("NS", "SOA"):
        return f"{ORIGIN} {kind}"
    if kind == "DS":
        return f"{rng.choice(('sub', 'ins'))}.{casefold(rng, tenant)}.{ORIGIN} DS"
    if kind == "REF":
        cut = rng.choice(("sub", "ins"))
        return f"{casefold(rng, 'www')}.{cut}.{tenant}.{ORIGIN} {rng.choice(('A', 'AAAA', 'HTTPS'))}"
    if kind == "CNAME":
        return f"{pick(cnames)} {rng.choice(('A', 'AAAA', 'HTTPS'))}"
    return f"nx{rng.randrange(1 << 30)}.svc.{tenant}.{ORIGIN} {rng.choice(('A', 'AAAA', 'HTTPS'))}"


def write_queries(workdir, addressed, srv, count, rng):
    hits = os.path.join(workdir, "hits.txt")
    with open(hits, "w") as f:
        for _ in range(count):
            f.write(f"{casefold(rng, rng.choice(addressed))}.{ORIGIN} {rng.choice(('A', 'AAAA'))}\n")
    mix = os.path.join(workdir, "mix.txt")
    with open(mix, "w") as f:
        for _ in range(count):
            r = rng.random()
            if r < 0.70:
                f.write(f"{casefold(rng, rng.choice(addressed))}.{ORIGIN} {rng.choice(('A', 'AAAA'))}\n")
            elif r < 0.80:
                f.write(f"nx{rng.randrange(1 << 30)}.svc.u0.{ORIGIN} A\n")
            elif r < 0.90:
                f.write(f"{casefold(rng, rng.choice(addressed))}.{ORIGIN} TXT\n")
            else:
                f.write(f"{casefold(rng, rng.choice(srv))}.{ORIGIN} SRV\n")
    return hits, mix


def write_front_line(workdir, addressed, srv, cnames, tenants, count, rng):
    front = os.path.join(workdir, "front.txt")
    with open(front, "w") as f:
        for _ in range(count):
            f.write(front_line_query(rng, addressed, srv, cnames, tenants) + "\n")
    srv_only = os.path.join(workdir, "srv.txt")
    with open(srv_only, "w") as f:
        for _ in range(count):
            f.write(f"{casefold(rng, rng.choice(srv))}.{ORIGIN} SRV\n")
    return front, srv_only


def generate(workdir, names, queries, seed=1):
    """Returns (zone file, query files by name, owner names, records)."""
    rng = random.Random(seed)
    zone = os.path.join(workdir, f"{ORIGIN}.zone")
    addressed, srv, cnames, tenants, records = write_zone(zone, names)
    hits, mix = write_queries(workdir, addressed, srv, queries, rng)
    front, srv_only = write_front_line(workdir, addressed, srv, cnames, tenants, queries, rng)
    files = {"hits": hits, "mix": mix, "front": front, "srv": srv_only}
    return zone, files, len(addressed) + len(srv) + len(cnames) + 4 * len(tenants), records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--names", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    zone, files, names, records = generate(a.dir, a.names, a.queries, a.seed)
    print(f"{zone}: {names} names, {records} records; queries in {', '.join(files.values())}")


if __name__ == "__main__":
    main()
