"""The loads: dnsperf (maximum and fixed rate, the mix with a TCP share)
and kxdpgun, each measured for server CPU per answer."""

import re
import statistics

from common import *  # noqa: F401,F403
from cpu import measured
from targets import Server, dig_ok, peer_pass_program, stop

def num(pattern, text, cast=float):
    m = re.search(pattern, text)
    return cast(m.group(1)) if m else None


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def result(sent, done, m, duration, latencies_ms=None, latency_avg_ms=None):
    """One run's figures in the same shape for every load generator."""
    (server_s, server_ticks, wall), (gen_s, _, _) = m.server, m.generator
    return {
        "sent": sent,
        "answered": done,
        "loss_pct": 100.0 * (sent - done) / sent if sent else None,
        "qps": done / duration,
        "latency_avg_ms": statistics.fmean(latencies_ms) if latencies_ms else latency_avg_ms,
        "latency_p99_ms": percentile(latencies_ms, 0.99),
        "server_cpu_ns_per_answer": 1e9 * server_s / done if done else None,
        "server_cpu_ns_per_answer_proc_stat_ticks": 1e9 * server_ticks / done if done else None,
        "server_cpu_pct": 100.0 * server_s / (wall * len(SRV_CPUS)),
        "generator_cpu_pct": 100.0 * gen_s / wall,
        "top_tasks": m.top_tasks,
    }


# What a validating resolver sends (Unbound, Knot Resolver, BIND): EDNS0
# with the DO bit and a DNS COOKIE option holding a client cookie.
RESOLVER_SHAPED = ["-D", "-E", "10:0123456789abcdef"]


def dnsperf_cmd(queries, duration, rate, tcp=False, verbose=False, extra=()):
    cmd = on_client("dnsperf", "-s", SRV_IP, "-d", queries, "-l", str(duration), "-c", "8" if tcp else "4",
                    "-T", "1", "-q", "64" if tcp else "500", "-t", "2", *extra)
    if rate:
        cmd += ["-Q", str(int(rate))]
    if tcp:
        cmd += ["-m", "tcp"]
    if verbose:
        cmd += ["-v"]  # a line per answer with its latency: the p99
    return cmd


def dnsperf_figures(out):
    sent = num(r"Queries sent:\s+(\d+)", out, int) or 0
    done = num(r"Queries completed:\s+(\d+)", out, int) or 0
    avg = num(r"Average Latency \(s\):\s+([\d.]+)", out)
    latencies = [float(m) * 1000 for m in re.findall(r"^> (?!T )\S+ .* ([\d.]+)$", out, re.M)]
    return sent, done, avg * 1000 if avg is not None else None, latencies


def run_dnsperf(queries, duration, rate, extra=()):
    return measured_dnsperf(dnsperf_cmd(queries, duration, rate, verbose=bool(rate), extra=extra), duration)


def measured_dnsperf(cmd, duration):
    m = measured([cmd], duration + 30)
    out = m.outs[0]
    sent, done, avg, latencies = dnsperf_figures(out)
    r = result(sent, done, m, duration, latencies, avg)
    if not done:
        r["raw"] = out[-800:]
    return r


def run_mix(queries, duration, rate):
    """The mix over UDP plus a TCP share on its own connections, at once."""
    udp = dnsperf_cmd(queries, duration, rate * (1 - TCP_SHARE), verbose=True)
    tcp = dnsperf_cmd(queries, duration, rate * TCP_SHARE, tcp=True, verbose=True)
    m = measured([udp, tcp], duration + 30)
    figures = [dnsperf_figures(o) for o in m.outs]
    sent = sum(f[0] for f in figures)
    done = sum(f[1] for f in figures)
    latencies = figures[0][3] + figures[1][3]
    r = result(sent, done, m, duration, latencies)
    r["tcp_answered"] = figures[1][1]
    if not figures[1][1]:
        r["raw_tcp"] = m.outs[1][-800:]
    return r


def run_tcp_many(queries, duration, rate):
    """Hits over TCP from TCP_CLIENTS connections at once, each with
    several queries in flight (pipelined, RFC 7766 §6.2.1.1)."""
    cmd = on_client("dnsperf", "-s", SRV_IP, "-d", queries, "-l", str(duration), "-m", "tcp",
                    "-c", str(TCP_CLIENTS), "-T", "1", "-q", str(TCP_CLIENTS * TCP_PIPELINED), "-t", "5",
                    "-Q", str(int(rate)), "-v")
    return measured_dnsperf(cmd, duration)


def run_kxdpgun(queries, duration, rate):
    dig_ok(f"svc0.svc.u0.{ORIGIN}")  # kxdpgun needs the server's MAC in the neighbour table
    cmd = on_client("kxdpgun", "-t", str(duration), "-Q", str(rate), "-i", queries, "-I", CLI_IF,
                    "-F", str(GEN_CPU), SRV_IP)
    m = measured([cmd], duration + 30)
    out = m.outs[0]
    sh(*in_ns(CLI_NS, "ip", "link", "set", "dev", CLI_IF, "xdp", "off"))  # kxdpgun leaves its program
    sent = num(r"total queries:\s+(\d+)", out, int) or 0
    done = num(r"total replies:\s+(\d+)", out, int) or 0
    r = result(sent, done, m, duration)
    if not done:
        r["raw"] = out[-800:]
    return r


def with_counters(server, run):
    """Runs `run()` and adds the share the kernel answered, for xdpdns."""
    before = server.counters()
    r = run()
    after = server.counters()
    if before and after:
        answered = after[0] - before[0]
        total = answered + after[1] - before[1]
        r["in_kernel_pct"] = 100.0 * answered / total if total else None
    return r


LOADS = ("dnsperf max rate, hits", "dnsperf fixed rate, hits", "dnsperf fixed rate, mix + TCP share",
         "kxdpgun, hits", "dnsperf fixed rate, resolver-shaped hits (EDNS0 + DO + client cookie)",
         f"dnsperf fixed rate, hits over TCP, {TCP_CLIENTS:,} connections pipelined",
         "dnsperf fixed rate, front-line mix, resolver-shaped",
         "dnsperf fixed rate, SRV, resolver-shaped")


def bench_target(t, a, files, probe):
    hits, mix = files["hits"], files["mix"]
    peer = server = scraping = None
    try:
        if t.native:
            peer = peer_pass_program(a.xdpdns)
        server = Server(t, probe, a.start_timeout)
        scraping = server.scraping()
        runs = {load: [] for load in LOADS}
        for _ in range(a.repeats):
            runs[LOADS[0]].append(with_counters(server, lambda: run_dnsperf(hits, a.duration, None)))
            runs[LOADS[1]].append(with_counters(server, lambda: run_dnsperf(hits, a.duration, a.rate)))
            if not t.floor:  # the floor does not parse EDNS
                runs[LOADS[4]].append(with_counters(
                    server, lambda: run_dnsperf(hits, a.duration, a.rate, RESOLVER_SHAPED)))
            if not t.floor:  # the floor answers UDP only, and every query alike
                runs[LOADS[2]].append(with_counters(server, lambda: run_mix(mix, a.duration, a.rate)))
                runs[LOADS[5]].append(with_counters(server, lambda: run_tcp_many(hits, a.duration, a.rate)))
                runs[LOADS[6]].append(with_counters(
                    server, lambda: run_dnsperf(files["front"], a.duration, a.rate, RESOLVER_SHAPED)))
                runs[LOADS[7]].append(with_counters(
                    server, lambda: run_dnsperf(files["srv"], a.duration, a.rate, RESOLVER_SHAPED)))
            # kxdpgun brings its own program for the client side.
            stop(peer)
            runs[LOADS[3]].append(with_counters(server, lambda: run_kxdpgun(hits, a.duration, a.kxdpgun_rate)))
            if t.native:
                peer = peer_pass_program(a.xdpdns)
        return {"target": t.label,
                "runs": {k: {"summary": summarise(v), "samples": v} for k, v in runs.items() if v}}
    finally:
        if server:
            if scraping:
                scraping.set()
            server.stop()
        stop(peer)


KEYS = ("sent", "answered", "loss_pct", "qps", "latency_avg_ms", "latency_p99_ms", "server_cpu_ns_per_answer",
        "server_cpu_ns_per_answer_proc_stat_ticks", "server_cpu_pct", "generator_cpu_pct", "in_kernel_pct", "tcp_answered")


def summarise(samples):
    out = {}
    for key in KEYS:
        vals = [s[key] for s in samples if s.get(key) is not None]
        if vals:
            out[key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    return out
