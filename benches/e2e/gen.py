#!/usr/bin/env python3
"""Deterministic benchmark data: a service-discovery shaped zone and query
files for dnsperf and kxdpgun (both read `name type` lines).

Per service (five owner names):
  svcN.svc.uK             A x3, AAAA x3   (the service: its three instances)
  iM.inst.uK (x3)         A, AAAA         (one instance each)
  _http._tcp.svcN.svc.uK  SRV x3          (port and target per instance)

Query files:
  hits.txt  A/AAAA queries for names that exist, each in random 0x20 case;
  mix.txt   70 % A/AAAA hits, 10 % NXDOMAIN, 10 % NODATA (TXT on a name
            that exists), 10 % other types that exist (SRV).
The TCP share of the mix is the harness's business (a concurrent TCP
client on the same file).

Usage: gen.py DIR [--names N] [--queries N] [--seed S]
"""
import argparse
import os
import random

ORIGIN = "bench.test"
SERVER_IP = "10.77.0.1"
NAMES_PER_SERVICE = 5


def casefold(rng, name):
    """Random 0x20 case, as resolvers send it to defeat spoofing."""
    return "".join(c.upper() if rng.random() < 0.5 else c for c in name)


def write_zone(path, names):
    """Writes a zone of about `names` owner names; returns (address names,
    SRV names, record count)."""
    services = max(1, names // NAMES_PER_SERVICE)
    tenants = max(1, services // 50)
    addressed, srv = [], []
    records = 4
    with open(path, "w") as z:
        z.write(f"$ORIGIN {ORIGIN}.\n$TTL 60\n")
        z.write(f"@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A {SERVER_IP}\n")
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
            z.write("".join(lines))
            addressed.append(svc)
            srv.append(f"_http._tcp.{svc}")
    return addressed, srv, records


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


def generate(workdir, names, queries, seed=1):
    """Returns (zone file, hits file, mix file, owner names, records)."""
    rng = random.Random(seed)
    zone = os.path.join(workdir, f"{ORIGIN}.zone")
    addressed, srv, records = write_zone(zone, names)
    hits, mix = write_queries(workdir, addressed, srv, queries, rng)
    return zone, hits, mix, len(addressed) + len(srv), records


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--names", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    zone, hits, mix, names, records = generate(a.dir, a.names, a.queries, a.seed)
    print(f"{zone}: {names} names, {records} records; queries in {hits}, {mix}")


if __name__ == "__main__":
    main()
