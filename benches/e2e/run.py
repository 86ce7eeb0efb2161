#!/usr/bin/env python3
"""End-to-end benchmark harness (run by `cargo xtask bench-e2e`).

Every target serves the same generated zone (gen.py) in a server network
namespace; dnsperf and kxdpgun load it from a client namespace over a veth
pair. Targets: the floor (`xdpdns xdp-reflect`, an XDP program that bounces
each query back with QR set and no lookup) and xdpdns with XDP, both in
generic and native mode; the socket floor (`xdpdns udp-reflect`: the
fallback's sockets and loop, answering each query with itself); xdpdns
with its fallback server only; NSD; Knot DNS; BIND 9.

Per target: a maximum-rate dnsperf run, a fixed-rate dnsperf run on hits, a
fixed-rate mixed run (UDP mix plus a concurrent TCP share), the same
resolver-shaped (EDNS, DO, a client cookie), hits over 1,000 TCP connections
with queries pipelined, the front-line mix and SRV queries resolver-shaped
(gen.py says what they hold), and a kxdpgun run; each repeated, reported as medians
with min-max.

Server CPU per answered query. The machine's CPUs are split: the load
generator and all client-side kernel work run on the last CPU, the server and
all server-side kernel work on the others (taskset for processes; RPS for
the veth receive path; threaded NAPI, pinned, for native XDP). Server CPU
time = machine CPU time over the run (every non-idle mode in /proc/stat,
softirq included, steal excluded) minus the load generator's CPU, which is
exactly the busy time of the server CPUs. The split is needed because this
kernel has no CONFIG_IRQ_TIME_ACCOUNTING: softirq work is charged to
whichever task happens to run, so subtracting the generator's rusage would
also subtract the server's XDP work done in its context.

Traffic goes only between the two namespaces this script creates and
deletes. Every wait is bounded.

The harness is split by concern: `common` (paths, namespaces, commands),
`topology` (namespaces and veth), `targets` (servers and configs), `cpu`
(CPU accounting), `load` (dnsperf/kxdpgun runs), `report` (tables).
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from attack import LEGIT_CLI_IF, attack_report, attack_targets, bench_attack, flood_file, links_up
from common import *  # noqa: F401,F403
from cpu import *  # noqa: F401,F403
from load import *  # noqa: F401,F403
from report import *  # noqa: F401,F403
from targets import *  # noqa: F401,F403
from topology import *  # noqa: F401,F403

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--names", type=int, default=100_000, help="owner names in the generated zone")
    ap.add_argument("--queries", type=int, default=200_000, help="lines per query file")
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate", type=int, default=30_000, help="fixed rate (q/s) every target sustains")
    ap.add_argument("--kxdpgun-rate", type=int, default=400_000)
    ap.add_argument("--start-timeout", type=int, default=300, help="seconds a target may take to load the zone")
    ap.add_argument("--only", action="append", help="run only targets whose label contains this (repeatable)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny zone, 2 s per run, one repeat; fails unless every target answers every load")
    ap.add_argument("--xdpdns", default=os.path.join(ROOT, "target", "release", "xdpdns"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    ap.add_argument("--attack", action="store_true",
                    help="instead: the front line under attack (attack.py), xdpdns, NSD and Knot with RRL")
    ap.add_argument("--legit-rate", type=int, default=10_000, help="legitimate q/s during --attack")
    ap.add_argument("--dnstap", action="store_true",
                    help="also run xdpdns with dnstap on (kernel sampling 1 in 100; fallback 1 in 1) into fstrm_capture")
    ap.add_argument("--metrics", action="store_true",
                    help="also run xdpdns (native XDP and fallback only) with /metrics served and scraped every second")
    a = ap.parse_args()
    if a.smoke:
        a.names, a.queries, a.duration, a.repeats, a.rate, a.kxdpgun_rate = 1000, 5000, 2, 1, 5000, 20_000
        a.start_timeout = 60
    a.xdpdns = os.path.abspath(a.xdpdns)
    if os.geteuid() != 0:
        sys.exit("bench-e2e needs root (network namespaces, XDP)")
    if NPROC < 2:
        sys.exit("bench-e2e needs two CPUs: one for the load generator, the rest for the server")
    for tool in ("dnsperf", "kxdpgun", "nsd", "knotd", "named", "dig", "ip", "taskset", a.xdpdns):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: run `cargo xtask deps` (and build xdpdns)")

    # The harness itself counts as load generator.
    os.sched_setaffinity(0, [GEN_CPU])
    # Every server and dnsperf hold TCP_CLIENTS connections: lift the
    # open-file limit (1,024 by default) for all of them.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    workdir = tempfile.mkdtemp(prefix="xdpdns-bench-")
    results = []
    pinner = NapiPinner(urgent=(LEGIT_CLI_IF,) if a.attack else ())
    try:
        t0 = time.time()
        zone, files, names, records = gen.generate(workdir, a.names, a.queries)
        hits = files["hits"]
        print(f"bench-e2e: {names} names, {records} records generated in {time.time() - t0:.1f} s", file=sys.stderr)
        probe = f"svc0.svc.u0.{ORIGIN}"
        netns_up(a.xdpdns)
        pinner.start()
        # What the server CPU does with no target and no load: the noise.
        idle_busy, _, wall = measured([["sleep", str(a.duration)]], a.duration + 5).server
        idle_pct = 100.0 * idle_busy / (wall * len(SRV_CPUS))
        flood = flood_file(workdir, a.queries) if a.attack else None
        if a.attack:
            links_up(a.xdpdns)
        chosen = attack_targets(workdir, zone, names, a.xdpdns) if a.attack else targets(
            workdir, zone, names, a.xdpdns, a.metrics, a.dnstap)
        for t in chosen:
            if a.only and not any(o in t.label for o in a.only):
                continue
            t0 = time.time()
            try:
                results.append(bench_attack(t, a, hits, flood, probe) if a.attack
                               else bench_target(t, a, files, probe))
                print(f"bench-e2e: {t.label} done in {time.time() - t0:.0f} s", file=sys.stderr)
            except Exception as e:  # one broken target must not hide the others
                results.append({"target": t.label, "error": str(e)})
                print(f"bench-e2e: {t.label} failed: {e}", file=sys.stderr)
    finally:
        pinner.stop.set()
        netns_down()
        shutil.rmtree(workdir, ignore_errors=True)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    machine = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": NPROC,
        "cpu": cpu,
        "kernel": platform.release(),
        "server_cpus": SRV_CPUS,
        "generator_cpu": GEN_CPU,
        "names": names,
        "records": records,
        "duration_s": a.duration,
        "repeats": a.repeats,
        "fixed_rate_qps": a.rate,
        "tcp_share": TCP_SHARE,
        "kxdpgun_rate_qps": a.kxdpgun_rate,
        "server_cpu_pct_without_load": idle_pct,
        "legit_rate_qps": a.legit_rate,
        "command": " ".join(sys.argv),
    }
    if a.attack:
        table = attack_report(results, machine)
        os.makedirs(a.out, exist_ok=True)
        stem = os.path.join(a.out, "attack")
        with open(stem + ".json", "w") as f:
            json.dump({"machine": machine, "results": results}, f, indent=1)
        with open(stem + ".md", "w") as f:
            f.write(table + "\n")
        print(table)
        return
    ratio_rows = ratios(results)
    table = report(machine, results, ratio_rows)
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "e2e-smoke" if a.smoke else "e2e")
    with open(stem + ".json", "w") as f:
        json.dump({"machine": machine, "results": results, "ratios": ratio_rows}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(table + "\n")
    print(table)
    problems = check_smoke(results) if a.smoke else [r["target"] for r in results if "error" in r]
    if problems:
        sys.exit("bench-e2e: " + "\n  ".join(["failed:", *problems]))


if __name__ == "__main__":
    main()
