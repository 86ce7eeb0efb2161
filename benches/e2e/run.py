#!/usr/bin/env python3
"""End-to-end benchmark harness (run by `cargo xtask bench-e2e`).

Every target serves the same generated zone in a server network namespace;
dnsperf and kxdpgun load it from a client namespace over a veth pair:

  xdpdns-xdp-generic, xdpdns-xdp-native, xdpdns-fallback, nsd, knot, bind,
  and the floor: an XDP program that bounces each query back with QR set,
  no lookup (`xdpdns xdp-reflect`).

Per target and run: a fixed-duration maximum-rate dnsperf run, a fixed-rate
dnsperf run, and a kxdpgun run, each repeated; medians with min-max.
Server CPU per answered query = machine CPU time over the run (all non-idle
modes from /proc/stat, softirq included) minus the load generator's own CPU
time (its rusage), divided by answered queries.

Traffic goes only between the two namespaces this script creates and
deletes. Every wait is bounded.
"""
import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SRV_NS, CLI_NS = "xdpdns-bench-srv", "xdpdns-bench-cli"
SRV_IF, CLI_IF = "xdpb-srv", "xdpb-cli"
SRV_IP, CLI_IP = "10.77.0.1", "10.77.0.2"
ORIGIN = "bench.test"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XDPDNS = os.path.join(ROOT, "target", "release", "xdpdns")


def sh(*args, check=True, timeout=60, **kw):
    return subprocess.run(list(args), check=check, timeout=timeout, capture_output=True, text=True, **kw)


def in_ns(ns, *args):
    return ["ip", "netns", "exec", ns, *args]


# ---------------------------------------------------------------- data

def generate(workdir, names, queries, seed=1):
    """A service-discovery shaped zone of about `names` owner names: per
    service, a service name with the A and AAAA of its three instances, and
    three instance names with one A and one AAAA each. Returns the query
    files: all hits with random 0x20 case, and a realistic mix."""
    rng = random.Random(seed)
    services = max(1, names // 4)
    owners = max(1, services // 50)
    path = os.path.join(workdir, f"{ORIGIN}.zone")
    owned = []
    with open(path, "w") as z:
        z.write(f"$ORIGIN {ORIGIN}.\n$TTL 60\n")
        z.write("@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 10.77.0.1\n")
        for s in range(services):
            owner = f"u{s % owners}"
            svc = f"svc{s}.svc.{owner}"
            for i in range(3):
                n = s * 3 + i
                v4 = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
                v6 = f"2001:db8::{n:x}"
                inst = f"i{n}.inst.{owner}"
                z.write(f"{svc} A {v4}\n{svc} AAAA {v6}\n{inst} A {v4}\n{inst} AAAA {v6}\n")
                owned.append(inst)
            owned.append(svc)

    def casefold(name):
        return "".join(c.upper() if rng.random() < 0.5 else c for c in name)

    hits = os.path.join(workdir, "hits.txt")
    with open(hits, "w") as f:
        for _ in range(queries):
            f.write(f"{casefold(rng.choice(owned))}.{ORIGIN} {rng.choice(['A', 'AAAA'])}\n")
    mix = os.path.join(workdir, "mix.txt")
    with open(mix, "w") as f:
        for _ in range(queries):
            r = rng.random()
            name = f"{casefold(rng.choice(owned))}.{ORIGIN}"
            if r < 0.75:
                f.write(f"{name} {rng.choice(['A', 'AAAA'])}\n")
            elif r < 0.85:
                f.write(f"nx{rng.randrange(1 << 30)}.svc.u0.{ORIGIN} A\n")  # NXDOMAIN
            elif r < 0.95:
                f.write(f"{name} TXT\n")  # NODATA
            else:
                f.write(f"{name} MX\n")  # other type, NODATA
    return path, hits, mix, len(owned)


# ---------------------------------------------------------------- namespaces

def netns_up():
    netns_down()
    sh("ip", "netns", "add", SRV_NS)
    sh("ip", "netns", "add", CLI_NS)
    sh("ip", "link", "add", SRV_IF, "type", "veth", "peer", "name", CLI_IF)
    sh("ip", "link", "set", SRV_IF, "netns", SRV_NS)
    sh("ip", "link", "set", CLI_IF, "netns", CLI_NS)
    sh("ip", "-n", SRV_NS, "addr", "add", f"{SRV_IP}/24", "dev", SRV_IF)
    sh("ip", "-n", CLI_NS, "addr", "add", f"{CLI_IP}/24", "dev", CLI_IF)
    for ns, dev in ((SRV_NS, SRV_IF), (CLI_NS, CLI_IF)):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def netns_down():
    for ns in (SRV_NS, CLI_NS):
        sh("ip", "netns", "del", ns, check=False)


# ---------------------------------------------------------------- targets

def xdpdns_config(workdir, zone, xdp_mode):
    cfg = os.path.join(workdir, f"xdpdns-{xdp_mode or 'fallback'}.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = ["{SRV_IP}:53"]\n[log]\nlevel = "info"\n')
        if xdp_mode:
            f.write(f'[xdp]\ninterfaces = ["{SRV_IF}"]\nmode = "{xdp_mode}"\ncapacity = {1 << 20}\n')
        f.write(f'[[zone]]\norigin = "{ORIGIN}."\nfile = "{zone}"\n')
    return [XDPDNS, "serve", "--config", cfg]


def nsd_config(workdir, zone):
    d = os.path.join(workdir, "nsd")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "nsd.conf")
    with open(cfg, "w") as f:
        f.write(f"""server:
    ip-address: {SRV_IP}
    port: 53
    username: ""
    chroot: ""
    zonesdir: "{d}"
    database: ""
    zonelistfile: "{d}/zone.list"
    xfrdfile: "{d}/xfrd.state"
    pidfile: "{d}/nsd.pid"
    server-count: {os.cpu_count()}
    verbosity: 0
remote-control:
    control-enable: no
zone:
    name: {ORIGIN}
    zonefile: "{zone}"
""")
    return ["nsd", "-d", "-c", cfg]


def knot_config(workdir, zone):
    d = os.path.join(workdir, "knot")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "knot.conf")
    with open(cfg, "w") as f:
        f.write(f"""server:
    rundir: "{d}"
    listen: {SRV_IP}@53
    udp-workers: {os.cpu_count()}
database:
    storage: "{d}"
log:
  - target: stderr
    any: warning
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    journal-content: none
zone:
  - domain: {ORIGIN}
    file: "{zone}"
""")
    return ["knotd", "-c", cfg]


def bind_config(workdir, zone):
    d = os.path.join(workdir, "bind")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "named.conf")
    with open(cfg, "w") as f:
        f.write(f"""options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    listen-on port 53 {{ {SRV_IP}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    minimal-responses yes;
}};
zone "{ORIGIN}" {{ type primary; file "{zone}"; }};
""")
    return ["named", "-g", "-c", cfg, "-n", str(os.cpu_count())]


def targets(workdir, zone):
    return [
        ("floor (XDP reflector)", [XDPDNS, "xdp-reflect", SRV_IF, "--mode", "generic"], False),
        ("xdpdns XDP generic", xdpdns_config(workdir, zone, "generic"), False),
        ("xdpdns XDP native", xdpdns_config(workdir, zone, "driver"), True),
        ("xdpdns fallback only", xdpdns_config(workdir, zone, None), False),
        ("NSD", nsd_config(workdir, zone), False),
        ("Knot DNS", knot_config(workdir, zone), False),
        ("BIND 9", bind_config(workdir, zone), False),
    ]


def dig_ok(name):
    r = sh(*in_ns(CLI_NS, "dig", f"@{SRV_IP}", "+norec", "+nocookie", "+time=1", "+tries=1", name, "A"),
           check=False, timeout=10)
    return "status: NOERROR" in r.stdout and "flags: qr" in r.stdout


def start(cmd, probe_name, timeout=60):
    log = tempfile.TemporaryFile()
    p = subprocess.Popen(in_ns(SRV_NS, *cmd), stdout=log, stderr=log)
    # Only `xdpdns serve` logs kernel counters on SIGUSR1 (it ends others).
    if cmd[0] == XDPDNS and cmd[1] == "serve":
        p.log = log
    end = time.time() + timeout
    while time.time() < end:
        if p.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{cmd[0]} exited: {log.read().decode(errors='replace')[-2000:]}")
        if dig_ok(probe_name):
            return p
        time.sleep(0.2)
    stop(p)
    raise RuntimeError(f"{cmd[0]} did not answer within {timeout}s")


def stop(p):
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


# ---------------------------------------------------------------- runs

def cpu_busy_seconds():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def measured(cmd, timeout):
    """Runs a load generator; returns (stdout, machine busy s, its own CPU s)."""
    before = cpu_busy_seconds()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout
    out = ""
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > deadline:
            p.kill()
            pid, status, usage = os.wait4(p.pid, 0)
            break
        time.sleep(0.05)
    busy = cpu_busy_seconds() - before
    out = p.stdout.read()
    return out, busy, usage.ru_utime + usage.ru_stime


def num(pattern, text, cast=float):
    m = re.search(pattern, text)
    return cast(m.group(1)) if m else None


def xdp_counters(server):
    """Kernel counters of an xdpdns server (SIGUSR1 makes it log them)."""
    if not hasattr(server, "log"):
        return None
    server.send_signal(10)
    time.sleep(0.3)
    server.log.seek(0)
    lines = [l for l in server.log.read().decode(errors="replace").splitlines() if "xdp counters" in l]
    if not lines:
        return None
    kv = dict(x.split("=", 1) for x in lines[-1].split() if "=" in x)
    answered = int(kv.get("answered_a", 0)) + int(kv.get("answered_aaaa", 0))
    passed = sum(int(v) for k, v in kv.items() if k.startswith("pass_"))
    return answered, passed


def with_counters(server, run):
    """Runs `run()` and adds the share the kernel answered, for xdpdns."""
    before = xdp_counters(server)
    result = run()
    after = xdp_counters(server)
    if before and after:
        answered = after[0] - before[0]
        total = answered + after[1] - before[1]
        result["in_kernel_pct"] = 100.0 * answered / total if total else None
    return result


def result(sent, done, busy, own, qps, latency_avg_ms):
    """One run's figures in the shape every load generator reports."""
    return {
        "sent": sent,
        "answered": done,
        "loss_pct": 100.0 * (sent - done) / sent if sent else None,
        "qps": qps,
        "latency_avg_ms": latency_avg_ms,
        "latency_p99_ms": None,  # neither dnsperf 2.10 nor kxdpgun reports a p99
        "machine_cpu_ns_per_answer": 1e9 * busy / done if done else None,
        "cpu_ns_per_answer": 1e9 * (busy - own) / done if done else None,
    }


def run_dnsperf(queries, duration, rate):
    cmd = in_ns(CLI_NS, "dnsperf", "-s", SRV_IP, "-d", queries, "-l", str(duration), "-c", "4", "-T", "2", "-q", "500")
    if rate:
        cmd += ["-Q", str(rate)]
    out, busy, own = measured(cmd, duration + 30)
    sent = num(r"Queries sent:\s+(\d+)", out, int) or 0
    done = num(r"Queries completed:\s+(\d+)", out, int) or 0
    latency = (num(r"Average Latency \(s\):\s+([\d.]+)", out) or 0) * 1000 or None
    return result(sent, done, busy, own, num(r"Queries per second:\s+([\d.]+)", out), latency)


def run_kxdpgun(queries, duration, rate):
    sh(*in_ns(CLI_NS, "ping", "-c", "1", "-W", "1", SRV_IP), check=False)  # neighbour entry
    cmd = in_ns(CLI_NS, "kxdpgun", "-t", str(duration), "-Q", str(rate), "-i", queries, "-I", CLI_IF, SRV_IP)
    out, busy, own = measured(cmd, duration + 30)
    sent = num(r"total queries:\s+(\d+)", out, int) or 0
    done = num(r"total replies:\s+(\d+)", out, int) or 0
    r = result(sent, done, busy, own, done / duration if duration else None, None)
    r["raw"] = out[-800:] if not done else None
    return r


def summarise(samples):
    out = {}
    for key in ("sent", "answered", "loss_pct", "qps", "latency_avg_ms", "latency_p99_ms",
                "machine_cpu_ns_per_answer", "cpu_ns_per_answer", "in_kernel_pct"):
        vals = [s[key] for s in samples if s.get(key) is not None]
        if vals:
            out[key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    return out


def fmt(s, key, digits=0):
    v = s.get(key)
    if not v:
        return "n/a"
    f = f"{{:.{digits}f}}"
    return f"{f.format(v['median'])} ({f.format(v['min'])}–{f.format(v['max'])})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--names", type=int, default=100_000)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate", type=int, default=20_000, help="fixed dnsperf rate every target sustains")
    ap.add_argument("--kxdpgun-rate", type=int, default=300_000)
    ap.add_argument("--smoke", action="store_true", help="tiny zone, 2 s per run, one repeat")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results"))
    a = ap.parse_args()
    if a.smoke:
        a.names, a.duration, a.repeats, a.rate, a.kxdpgun_rate = 1000, 2, 1, 10_000, 20_000
    if os.geteuid() != 0:
        sys.exit("bench-e2e needs root (network namespaces, XDP)")
    for tool in ("dnsperf", "kxdpgun", "nsd", "knotd", "named", "dig", "ip"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: run `cargo xtask deps`")

    workdir = tempfile.mkdtemp(prefix="xdpdns-bench-")
    results = []
    try:
        zone, hits, mix, nnames = generate(workdir, a.names, 100_000 if not a.smoke else 5_000)
        probe = f"svc0.svc.u0.{ORIGIN}"
        netns_up()
        for label, cmd, needs_peer_prog in targets(workdir, zone):
            peer = None
            server = None
            try:
                if needs_peer_prog:
                    peer = subprocess.Popen(in_ns(CLI_NS, XDPDNS, "xdp-pass", CLI_IF), stdout=subprocess.PIPE, text=True)
                    peer.stdout.readline()
                server = start(cmd, probe)
                runs = {"dnsperf max rate (hits)": [], "dnsperf fixed rate (hits)": [],
                        "dnsperf fixed rate (mix)": [], "kxdpgun (hits)": []}
                for _ in range(a.repeats):
                    runs["dnsperf max rate (hits)"].append(with_counters(server, lambda: run_dnsperf(hits, a.duration, None)))
                    runs["dnsperf fixed rate (hits)"].append(with_counters(server, lambda: run_dnsperf(hits, a.duration, a.rate)))
                    runs["dnsperf fixed rate (mix)"].append(with_counters(server, lambda: run_dnsperf(mix, a.duration, a.rate)))
                    if peer:
                        stop(peer)  # kxdpgun attaches its own program to the client side
                        peer = None
                    runs["kxdpgun (hits)"].append(with_counters(server, lambda: run_kxdpgun(hits, a.duration, a.kxdpgun_rate)))
                    if needs_peer_prog:
                        peer = subprocess.Popen(in_ns(CLI_NS, XDPDNS, "xdp-pass", CLI_IF), stdout=subprocess.PIPE, text=True)
                        peer.stdout.readline()
                results.append({"target": label, "runs": {k: {"summary": summarise(v), "samples": v} for k, v in runs.items()}})
                print(f"bench-e2e: {label} done", file=sys.stderr)
            except Exception as e:  # one broken target must not hide the others
                results.append({"target": label, "error": str(e)})
                print(f"bench-e2e: {label} failed: {e}", file=sys.stderr)
            finally:
                stop(server)
                stop(peer)
    finally:
        netns_down()
        shutil.rmtree(workdir, ignore_errors=True)

    machine = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "names": nnames,
        "duration_s": a.duration,
        "repeats": a.repeats,
        "fixed_rate_qps": a.rate,
        "kxdpgun_rate_qps": a.kxdpgun_rate,
    }
    lines = [
        f"End-to-end, {machine['date']}: {machine['nproc']} CPUs, kernel {machine['kernel']}, "
        f"{nnames} names, {a.duration} s per run, medians of {a.repeats} (min–max). "
        f"Fixed dnsperf rate {a.rate} q/s, kxdpgun {a.kxdpgun_rate} q/s.",
        "",
        "Machine CPU = all non-idle CPU time over the run (/proc/stat) per answer, load generator included; "
        "server CPU = that minus the load generator's own rusage. This kernel has no "
        "CONFIG_IRQ_TIME_ACCOUNTING, so softirq work (the veth path and XDP itself) is charged to whichever "
        "task is running, often the load generator: the server column undercounts XDP targets, and "
        "comparisons use the machine column at the fixed rate, where the load generator's work is the same "
        "for every target. dnsperf reports no p99; kxdpgun no latency.",
        "",
        "| target | load | answered/s | loss % | avg latency ms | machine CPU ns/answer | server CPU ns/answer | answered in kernel % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['target']} | failed: {r['error'][:80]} | | | | | | |")
            continue
        for load, v in r["runs"].items():
            s = v["summary"]
            lines.append(f"| {r['target']} | {load} | {fmt(s, 'qps')} | {fmt(s, 'loss_pct', 2)} | "
                         f"{fmt(s, 'latency_avg_ms', 3)} | {fmt(s, 'machine_cpu_ns_per_answer')} | "
                         f"{fmt(s, 'cpu_ns_per_answer')} | {fmt(s, 'in_kernel_pct', 1)} |")
    table = "\n".join(lines)
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "e2e-smoke" if a.smoke else "e2e")
    with open(stem + ".json", "w") as f:
        json.dump({"machine": machine, "results": results}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(table + "\n")
    print(table)
    failed = [r["target"] for r in results if "error" in r]
    if failed:
        sys.exit(f"bench-e2e: failed targets: {', '.join(failed)}")


if __name__ == "__main__":
    main()
