"""The front line under attack (`run.py --attack`): a flood from spoofed
sources in one /24 (kxdpgun, its source addresses drawn from FLOOD_NET)
while dnsperf sends legitimate hits at a fixed rate from another /24, over
a second veth pair (kxdpgun's XDP program takes every reply arriving on
its own interface, dnsperf's too). The server serves both links, with
XDP on both for xdpdns.

  (a) random subdomains: NXDOMAIN names under the zone ("water torture");
  (b) reflection: hits, for their answers to go to the spoofed sources;
  (c) the reflection flood of (b) spoofing the legitimate client's own
      /24 (the victim of a reflection attack is often a resolver that
      still needs its answers): its queries share the flood's buckets.

Every server runs response rate limiting with the same settings (RRL_RATE
a second per /24 and class, slip RRL_SLIP): xdpdns `[rrl]`, NSD
`rrl-ratelimit`, Knot `mod-rrl` (after `mod-cookies`). The legitimate
client sends a server cookie it got from the server beforehand, as a
resolver does: a valid cookie exempts it from rate limiting in xdpdns and
Knot (NSD 4.6 has no cookies). Per server: the legitimate queries
answered, server CPU, the flood's replies, and for xdpdns the share of the
flood handled in the kernel.
"""

import json
import os
import random
import re
import subprocess

from common import *  # noqa: F401,F403
from cpu import measured
from load import dnsperf_figures, num
from targets import (Server, Target, dig_ok, knot_config, nsd_config, peer_pass_program, stop, write_file,
                     xdpdns_config)
from topology import veth_pair

FLOOD_NET = "10.88.0.0/24"
LEGIT_SRV_IF, LEGIT_CLI_IF = "xdpb-srv2", "xdpb-cli2"
LEGIT_SRV_IP, LEGIT_CLI_IP = "10.78.0.1", "10.78.0.2"
# (c): the legitimate client inside the flood's /24, on its own link.
VICTIM_IP = "10.88.0.254"
RRL_RATE, RRL_SLIP = 20, 2
CLIENT_COOKIE = "0123456789abcdef"


def flood_file(workdir, count, seed=7):
    """Random names under the zone, lower-case as bots send them: directly
    under the apex and under a tenant's empty non-terminal."""
    rng = random.Random(seed)
    path = os.path.join(workdir, "flood.txt")
    with open(path, "w") as f:
        for i in range(count):
            label = "%010x" % rng.getrandbits(40)
            under = ORIGIN if i % 2 else f"u0.{ORIGIN}"
            f.write(f"{label}.{under} {'A' if i % 3 else 'AAAA'}\n")
    return path


def links_up(xdpdns):
    """The legitimate client's veth pair, and the route back to the spoofed sources (through the
    client, where kxdpgun takes the replies)."""
    veth_pair(xdpdns, LEGIT_SRV_IF, LEGIT_CLI_IF, LEGIT_SRV_IP, LEGIT_CLI_IP)
    sh("ip", "-n", SRV_NS, "route", "add", FLOOD_NET, "via", CLI_IP)
    sh("ip", "-n", CLI_NS, "addr", "add", f"{VICTIM_IP}/32", "dev", LEGIT_CLI_IF)
    sh("ip", "-n", SRV_NS, "route", "add", f"{VICTIM_IP}/32", "via", LEGIT_CLI_IP)


def edit(path, old, new):
    text = open(path).read()
    assert old in text, f"{old!r} not in {path}"
    write_file(path, text.replace(old, new))


def rrl_xdpdns(cmd):
    cfg = cmd[cmd.index("--config") + 1]
    edit(cfg, f'listen = ["{SRV_IP}:53"]', f'listen = ["{SRV_IP}:53", "{LEGIT_SRV_IP}:53"]')
    if "[xdp]" in open(cfg).read():
        edit(cfg, f'interfaces = ["{SRV_IF}"]', f'interfaces = ["{SRV_IF}", "{LEGIT_SRV_IF}"]')
    with open(cfg, "a") as f:
        f.write(f"[rrl]\nenabled = true\nresponses_per_second = {RRL_RATE}\nslip = {RRL_SLIP}\n")
    return cmd


def rrl_nsd(cmd):
    cfg = cmd[cmd.index("-c") + 1]
    edit(cfg, f"    ip-address: {SRV_IP}\n", f"    ip-address: {SRV_IP}\n    ip-address: {LEGIT_SRV_IP}\n")
    text = open(cfg).read().replace(
        "    rrl-ratelimit: 0\n",
        f"    rrl-ratelimit: {RRL_RATE}\n    rrl-slip: {RRL_SLIP}\n    rrl-ipv4-prefix-length: 24\n")
    write_file(cfg, text)
    return cmd


def rrl_knot(cmd):
    cfg = cmd[cmd.index("-c") + 1]
    edit(cfg, f"    listen: {SRV_IP}@53\n", f"    listen: [{SRV_IP}@53, {LEGIT_SRV_IP}@53]\n")
    if f"    listen: {SRV_IF}@53\n" in open(cfg).read():
        edit(cfg, f"    listen: {SRV_IF}@53\n", f"    listen: [{SRV_IF}@53, {LEGIT_SRV_IF}@53]\n")
    text = open(cfg).read().replace(
        "template:\n  - id: default\n",
        f"mod-cookies:\n  - id: front\nmod-rrl:\n  - id: front\n    rate-limit: {RRL_RATE}\n"
        f"    slip: {RRL_SLIP}\ntemplate:\n  - id: default\n"
        "    global-module: [mod-cookies/front, mod-rrl/front]\n")
    write_file(cfg, text)
    return cmd


def attack_targets(workdir, zone, names, xdpdns):
    return [
        Target("xdpdns XDP generic", [xdpdns, *rrl_xdpdns(xdpdns_config(workdir, zone, "generic", names))],
               in_kernel=True),
        Target("xdpdns XDP native", [xdpdns, *rrl_xdpdns(xdpdns_config(workdir, zone, "driver", names))],
               native=True, in_kernel=True),
        Target("NSD", rrl_nsd(nsd_config(workdir, zone))),
        Target("Knot DNS", rrl_knot(knot_config(workdir, zone))),
        Target("Knot DNS XDP", rrl_knot(knot_config(workdir, zone, xdp=True)), native=True),
    ]


def server_cookie(probe, source):
    """The COOKIE option (client + server, hex) the server gives a client
    cookie of ours sent from `source`; the client's alone when it has none."""
    r = sh(*in_ns(CLI_NS, "dig", f"@{LEGIT_SRV_IP}", "-b", source, "+norec", f"+cookie={CLIENT_COOKIE}",
                  "+time=1", "+tries=1", probe, "A"), check=False, timeout=10)
    m = re.search(r"COOKIE: ([0-9a-f]+)", r.stdout)
    return m.group(1) if m else CLIENT_COOKIE


def kernel_counters(server):
    """(handled in the kernel, passed up, exempt by cookie, answered in
    full, slipped) so far, from xdpdns's counters line: answers, negative
    answers, and rate-limited responses slipped or dropped there."""
    kv = server.counter_values()
    if kv is None:
        return None
    answered = sum(kv.get(k, 0) for k in ("answered_a", "answered_aaaa", "answered_other", "nxdomain", "nodata", "referrals"))
    handled = answered + kv.get("rrl_slipped", 0) + kv.get("rrl_dropped", 0)
    passed = sum(v for k, v in kv.items() if k.startswith("pass_"))
    return handled, passed, kv.get("rrl_exempt", 0), answered, kv.get("rrl_slipped", 0)


def legit_link_drops():
    """Packets dropped so far on the legitimate link, per side (receive and
    send): where a lost legitimate query or reply went."""
    out = {}
    for ns, dev in ((SRV_NS, LEGIT_SRV_IF), (CLI_NS, LEGIT_CLI_IF)):
        r = sh("ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev, check=False)
        try:
            st = json.loads(r.stdout)[0]["stats64"]
            out[dev] = st["rx"]["dropped"] + st["tx"]["dropped"]
        except (ValueError, KeyError, IndexError):
            out[dev] = None
    return out


def attack_run(server, flood_queries, legit_queries, duration, legit_rate, flood_rate, source, cookie):
    legit = on_client("dnsperf", "-s", LEGIT_SRV_IP, "-a", source, "-d", legit_queries, "-l", str(duration),
                      "-c", "4", "-T", "1", "-q", "500", "-t", "2", "-Q", str(int(legit_rate)),
                      "-E", f"10:{cookie}")
    flood = on_client("kxdpgun", "-t", str(duration), "-Q", str(flood_rate), "-i", flood_queries, "-I", CLI_IF,
                      "-F", str(GEN_CPU), "-l", FLOOD_NET, SRV_IP)
    before, drops_before = kernel_counters(server), legit_link_drops()
    m = measured([legit, flood], duration + 30)
    after, drops_after = kernel_counters(server), legit_link_drops()
    sh(*in_ns(CLI_NS, "ip", "link", "set", "dev", CLI_IF, "xdp", "off"), check=False)
    sent, done, _, _ = dnsperf_figures(m.outs[0])
    fsent = num(r"total queries:\s+(\d+)", m.outs[1], int) or 0
    freplies = num(r"total replies:\s+(\d+)", m.outs[1], int) or 0
    server_s, _, wall = m.server
    r = {
        "legit_sent": sent,
        "legit_answered": done,
        "legit_answered_pct": 100.0 * done / sent if sent else None,
        "flood_qps": fsent / duration,
        "flood_replies_per_s": freplies / duration,
        "server_cpu_pct": 100.0 * server_s / (wall * len(SRV_CPUS)),
        "legit_link_drops": {dev: (drops_after[dev] - n if n is not None and drops_after[dev] is not None
                                   else None) for dev, n in drops_before.items()},
    }
    if before and after:
        handled, passed = after[0] - before[0], after[1] - before[1]
        # Of all the queries the kernel saw (the flood's and the legitimate
        # ones, which are hits), the share it handled.
        r["in_kernel_pct"] = 100.0 * handled / (handled + passed) if handled + passed else None
        r["passed_up"] = passed
        # Answers exempt from rate limiting by a valid server cookie: the
        # legitimate client's.
        r["rrl_exempt"] = after[2] - before[2]
        # What the flood got: full answers (every answer but the exempt
        # ones), which RRL holds to its rate per class, and TC slips.
        r["flood_full_per_s"] = (after[3] - before[3] - r["rrl_exempt"]) / duration
        r["flood_slipped_per_s"] = (after[4] - before[4]) / duration
    if not fsent:
        r["raw_flood"] = m.outs[1][-800:]
    return r


SCENARIOS = ("(a) random-subdomain flood", "(b) reflection flood of hits",
             "(c) reflection flood spoofing the client's /24")


def bench_attack(t, a, hits, flood, probe):
    peer = flood_peer = server = None
    try:
        if t.native:
            # Native XDP_TX needs a program on the receiving peer: a pass
            # program on the legitimate link throughout, and on the flood's
            # until kxdpgun brings its own.
            peer = subprocess.Popen(in_ns(CLI_NS, a.xdpdns, "xdp-pass", LEGIT_CLI_IF), stdout=subprocess.PIPE,
                                    text=True)
            peer.stdout.readline()
            flood_peer = peer_pass_program(a.xdpdns)
        server = Server(t, probe, a.start_timeout)
        cookies = {src: server_cookie(probe, src) for src in (LEGIT_CLI_IP, VICTIM_IP)}
        runs = {s: [] for s in SCENARIOS}
        for _ in range(a.repeats):
            plan = zip(SCENARIOS, (flood, hits, hits), (LEGIT_CLI_IP, LEGIT_CLI_IP, VICTIM_IP))
            for scenario, queries, source in plan:
                if t.native and not flood_peer:
                    flood_peer = peer_pass_program(a.xdpdns)
                dig_ok(probe)  # the server's MAC in the neighbour table, for kxdpgun
                stop(flood_peer)
                flood_peer = None
                runs[scenario].append(attack_run(server, queries, hits, a.duration, a.legit_rate,
                                                 a.kxdpgun_rate, source, cookies[source]))
        return {"target": t.label, "attack": runs}
    finally:
        if server:
            server.stop()
        stop(peer)
        stop(flood_peer)


def attack_report(results, machine):
    lines = [
        f"Front line under attack: {machine['duration_s']} s per run, {machine['repeats']} repeats (medians); "
        f"flood by kxdpgun at up to {machine['kxdpgun_rate_qps']:,} q/s from {FLOOD_NET} (spoofed); "
        f"legitimate hits by dnsperf at {machine['legit_rate_qps']:,} q/s from {LEGIT_CLI_IP} "
        f"((c): from {VICTIM_IP}) with a server cookie; "
        f"RRL {RRL_RATE}/s per /24, slip {RRL_SLIP}, everywhere.",
        "",
        "| server | scenario | legitimate answered | server CPU | flood sent (q/s) | flood replies (/s) "
        "| xdpdns: of which full answers (/s) | xdpdns: handled in kernel |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['target']} | error: {r['error'][:80]} | | | | | | |")
            continue
        for scenario, samples in r["attack"].items():
            def med(key, fmt):
                vals = sorted(s[key] for s in samples if s.get(key) is not None)
                return fmt.format(vals[len(vals) // 2]) if vals else "-"
            lines.append(f"| {r['target']} | {scenario} | {med('legit_answered_pct', '{:.2f} %')} "
                         f"| {med('server_cpu_pct', '{:.0f} %')} | {med('flood_qps', '{:,.0f}')} "
                         f"| {med('flood_replies_per_s', '{:,.0f}')} | {med('flood_full_per_s', '{:,.1f}')} "
                         f"| {med('in_kernel_pct', '{:.2f} %')} |")
    return "\n".join(lines)
