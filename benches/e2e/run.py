#!/usr/bin/env python3
"""End-to-end benchmark harness (run by `cargo xtask bench-e2e`).

Every target serves the same generated zone (gen.py) in a server network
namespace; dnsperf and kxdpgun load it from a client namespace over a veth
pair. Targets: the floor (`xdpdns xdp-reflect`, an XDP program that bounces
each query back with QR set and no lookup) and xdpdns with XDP, both in
generic and native mode; xdpdns with its fallback server only; NSD; Knot
DNS; BIND 9.

Per target: a maximum-rate dnsperf run, a fixed-rate dnsperf run on hits, a
fixed-rate mixed run (UDP mix plus a concurrent TCP share), and a kxdpgun
run; each repeated, reported as medians with min-max.

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
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

SRV_NS, CLI_NS = "xdpdns-bench-srv", "xdpdns-bench-cli"
SRV_IF, CLI_IF = "xdpb-srv", "xdpb-cli"
SRV_IP, CLI_IP = gen.SERVER_IP, "10.77.0.2"
ORIGIN = gen.ORIGIN
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NPROC = os.cpu_count() or 1
GEN_CPU = NPROC - 1
SRV_CPUS = list(range(NPROC - 1))
SRV_CPU_LIST = ",".join(map(str, SRV_CPUS))
TCP_SHARE = 0.05


def sh(*args, check=True, timeout=60, **kw):
    return subprocess.run(list(args), check=check, timeout=timeout, capture_output=True, text=True, **kw)


def in_ns(ns, *args):
    return ["ip", "netns", "exec", ns, *args]


def on_server(*args):
    return in_ns(SRV_NS, "taskset", "-c", SRV_CPU_LIST, *args)


def on_client(*args):
    return in_ns(CLI_NS, "taskset", "-c", str(GEN_CPU), *args)


def cpu_mask(cpus):
    return format(sum(1 << c for c in cpus), "x")


# ---------------------------------------------------------------- namespaces

def netns_up(xdpdns):
    netns_down()
    sh("ip", "netns", "add", SRV_NS)
    sh("ip", "netns", "add", CLI_NS)
    sh("ip", "link", "add", SRV_IF, "type", "veth", "peer", "name", CLI_IF)
    sh("ip", "link", "set", SRV_IF, "netns", SRV_NS)
    sh("ip", "link", "set", CLI_IF, "netns", CLI_NS)
    sh("ip", "-n", SRV_NS, "addr", "add", f"{SRV_IP}/24", "dev", SRV_IF)
    sh("ip", "-n", CLI_NS, "addr", "add", f"{CLI_IP}/24", "dev", CLI_IF)
    for ns, dev, cpus in ((SRV_NS, SRV_IF, SRV_CPUS), (CLI_NS, CLI_IF, [GEN_CPU])):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        # Receive work on the side's own CPUs: RPS for the plain veth path,
        # threaded NAPI (pinned by NapiPinner) when an XDP program gives the
        # veth NAPI. The kernel takes `threaded` only while NAPI exists, and
        # keeps it for later attachments: set it under a pass program.
        sh(*in_ns(ns, "sh", "-c", f"echo {cpu_mask(cpus)} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"))
        p = subprocess.Popen(in_ns(ns, xdpdns, "xdp-pass", dev), stdout=subprocess.PIPE, text=True)
        try:
            p.stdout.readline()
            sh(*in_ns(ns, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/threaded"))
        finally:
            stop(p)


def netns_down():
    for ns in (SRV_NS, CLI_NS):
        sh("ip", "netns", "del", ns, check=False)


class NapiPinner(threading.Thread):
    """Keeps the veth NAPI threads on their side's CPUs. They come and go
    as XDP programs (ours, the client's pass program, kxdpgun's) attach."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.pinned = set()

    def run(self):
        while not self.stop.wait(0.25):
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or pid in self.pinned:
                    continue
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        comm = f.read().strip()
                except OSError:
                    continue
                if comm.startswith(f"napi/{SRV_IF}"):
                    cpus = SRV_CPUS
                elif comm.startswith(f"napi/{CLI_IF}"):
                    cpus = [GEN_CPU]
                else:
                    continue
                try:
                    os.sched_setaffinity(int(pid), cpus)
                    self.pinned.add(pid)
                except OSError:
                    pass


# ---------------------------------------------------------------- targets

def server_dir(workdir, name):
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    return d


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def xdpdns_config(workdir, zone, xdp_mode, names):
    text = f'[server]\nlisten = ["{SRV_IP}:53"]\n[log]\nlevel = "info"\n'
    if xdp_mode:
        text += f'[xdp]\ninterfaces = ["{SRV_IF}"]\nmode = "{xdp_mode}"\ncapacity = {max(1 << 16, 2 * names)}\n'
    text += f'[[zone]]\norigin = "{ORIGIN}."\nfile = "{zone}"\n'
    cfg = write_file(os.path.join(workdir, f"xdpdns-{xdp_mode or 'fallback'}.toml"), text)
    return ["serve", "--config", cfg]


def nsd_config(workdir, zone):
    d = server_dir(workdir, "nsd")
    cfg = write_file(os.path.join(d, "nsd.conf"), f"""server:
    ip-address: {SRV_IP}
    port: 53
    username: ""
    chroot: ""
    zonesdir: "{d}"
    database: ""
    zonelistfile: "{d}/zone.list"
    xfrdfile: "{d}/xfrd.state"
    pidfile: "{d}/nsd.pid"
    server-count: {len(SRV_CPUS)}
    verbosity: 0
    # Debian builds NSD with response rate limiting on: one client at tens
    # of thousands of q/s would be throttled (NXDOMAINs dropped).
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: {ORIGIN}
    zonefile: "{zone}"
""")
    return ["nsd", "-d", "-c", cfg]


def knot_config(workdir, zone):
    d = server_dir(workdir, "knot")
    cfg = write_file(os.path.join(d, "knot.conf"), f"""server:
    rundir: "{d}"
    listen: {SRV_IP}@53
    udp-workers: {len(SRV_CPUS)}
    tcp-workers: {len(SRV_CPUS)}
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
    d = server_dir(workdir, "bind")
    cfg = write_file(os.path.join(d, "named.conf"), f"""options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    listen-on port 53 {{ {SRV_IP}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    minimal-responses yes;
}};
zone "{ORIGIN}" {{ type primary; file "{zone}"; }};
""")
    return ["named", "-g", "-c", cfg, "-n", str(len(SRV_CPUS))]


class Target:
    def __init__(self, label, cmd, native=False, floor=False, in_kernel=False):
        self.label, self.cmd, self.native = label, cmd, native
        self.floor, self.in_kernel = floor, in_kernel


def targets(workdir, zone, names, xdpdns):
    return [
        Target("floor (XDP reflector), generic", [xdpdns, "xdp-reflect", SRV_IF, "--mode", "generic"], floor=True),
        Target("floor (XDP reflector), native", [xdpdns, "xdp-reflect", SRV_IF, "--mode", "driver"], native=True,
               floor=True),
        Target("xdpdns XDP generic", [xdpdns, *xdpdns_config(workdir, zone, "generic", names)], in_kernel=True),
        Target("xdpdns XDP native", [xdpdns, *xdpdns_config(workdir, zone, "driver", names)], native=True,
               in_kernel=True),
        Target("xdpdns fallback only", [xdpdns, *xdpdns_config(workdir, zone, None, names)]),
        Target("NSD", nsd_config(workdir, zone)),
        Target("Knot DNS", knot_config(workdir, zone)),
        Target("BIND 9", bind_config(workdir, zone)),
    ]


def dig_ok(name):
    r = sh(*in_ns(CLI_NS, "dig", f"@{SRV_IP}", "+norec", "+nocookie", "+time=1", "+tries=1", name, "A"),
           check=False, timeout=10)
    return "status: NOERROR" in r.stdout and "flags: qr" in r.stdout


class Server:
    """A target process in the server namespace, its output kept in a file
    (xdpdns logs its kernel counters there on SIGUSR1)."""

    def __init__(self, target, probe, timeout):
        self.target = target
        # Appended to by the server, read through a separate descriptor:
        # a shared file offset would let our reads move its writes.
        fd, self.log_path = tempfile.mkstemp(prefix="xdpdns-bench-server-", suffix=".log")
        os.close(fd)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(on_server(*target.cmd), stdout=log, stderr=log)
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{target.cmd[0]} exited: {self.output()[-2000:]}")
            # xdpdns answers from its fallback before the XDP table is
            # loaded: wait for the whole start-up.
            if dig_ok(probe) and (target.cmd[1:2] != ["serve"] or re.search(r" ready\s*$", self.output(), re.M)):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{target.cmd[0]} did not answer within {timeout}s: {self.output()[-1000:]}")

    def output(self):
        with open(self.log_path, "rb") as log:
            return log.read().decode(errors="replace")

    def counters(self):
        """(answered in kernel, passed up) so far; None unless xdpdns with XDP."""
        if not self.target.in_kernel:
            return None
        self.proc.send_signal(10)  # SIGUSR1
        time.sleep(0.3)
        lines = [line for line in self.output().splitlines() if "xdp counters" in line]
        if not lines:
            return None
        kv = dict(x.split("=", 1) for x in lines[-1].split() if "=" in x)
        answered = int(kv.get("answered_a", 0)) + int(kv.get("answered_aaaa", 0))
        passed = sum(int(v) for k, v in kv.items() if k.startswith("pass_"))
        return answered, passed

    def stop(self):
        stop(self.proc)
        if os.path.exists(self.log_path):
            os.unlink(self.log_path)


def stop(p):
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def peer_pass_program(xdpdns):
    """Native XDP_TX on veth needs an XDP program on the peer too."""
    p = subprocess.Popen(in_ns(CLI_NS, xdpdns, "xdp-pass", CLI_IF), stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    return p


# ---------------------------------------------------------------- runs

def proc_stat():
    """Per CPU: (busy, idle, steal) seconds from /proc/stat, busy being
    every mode but idle, iowait and steal (softirq included)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu(\d+) (.*)", line)
            if m:
                v = [int(x) for x in m.group(2).split()]
                out[int(m.group(1))] = ((v[0] + v[1] + v[2] + v[5] + v[6]) / tick, (v[3] + v[4]) / tick, v[7] / tick)
    return out


def idle_seconds(cpu, stat):
    """Idle time of one CPU: the cpuidle residency counters (microseconds)
    where the kernel has them; /proc/stat shows the same time rounded to
    10 ms, too coarse for a few thousand answers."""
    d = f"/sys/devices/system/cpu/cpu{cpu}/cpuidle"
    try:
        return sum(int(open(f"{d}/{s}/time").read()) for s in os.listdir(d) if s.startswith("state")) / 1e6
    except OSError:
        return stat[cpu][1]


def task_ticks():
    """CPU ticks (user + system) of every thread, by thread id: which tasks
    the server CPU's time went to."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    st = f.read()
                comm = st[st.index("(") + 1:st.rindex(")")]
                fields = st[st.rindex(")") + 2:].split()
                out[tid] = (comm, int(fields[11]) + int(fields[12]))
        except OSError:
            continue
    return out


class CpuClock:
    """CPU time over a run, per side. Busy = wall time minus idle minus
    steal, i.e. every mode in which the CPU worked, softirq included."""

    def __init__(self):
        self.tasks = task_ticks()
        self.wall, self.stat = time.monotonic(), proc_stat()
        self.idle = {c: idle_seconds(c, self.stat) for c in self.stat}

    def busy_since(self, start, cpus):
        """(busy seconds, /proc/stat busy ticks in seconds, wall seconds)."""
        wall = self.wall - start.wall
        precise = sum(wall - (self.idle[c] - start.idle[c]) - (self.stat[c][2] - start.stat[c][2]) for c in cpus)
        ticks = sum(self.stat[c][0] - start.stat[c][0] for c in cpus)
        return max(0.0, precise), ticks, wall

    def top_tasks_since(self, start, n=6):
        """The threads that used the most CPU over the run, in seconds."""
        tick = os.sysconf("SC_CLK_TCK")
        used = [(t - start.tasks.get(tid, (comm, 0))[1], comm) for tid, (comm, t) in self.tasks.items()]
        return [{"task": comm, "cpu_s": d / tick} for d, comm in sorted(used, reverse=True)[:n] if d > 0]


class Measurement:
    """What one run of load generators leaves: their outputs; for the
    server CPUs and the generator CPU each (busy s, /proc/stat busy s,
    wall s); and the busiest threads."""

    def __init__(self, outs, before, after):
        self.outs = outs
        self.server = after.busy_since(before, SRV_CPUS)
        self.generator = after.busy_since(before, [GEN_CPU])
        self.top_tasks = after.top_tasks_since(before)


def measured(cmds, timeout):
    """Runs load generators side by side, each bounded by `timeout`."""
    # Output goes to files and is read afterwards: a line per answer
    # (dnsperf -v) read during the run would load the generator's CPU.
    files = [tempfile.TemporaryFile() for _ in cmds]
    before = CpuClock()
    procs = [subprocess.Popen(c, stdout=f, stderr=subprocess.STDOUT) for c, f in zip(cmds, files)]
    deadline = time.time() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    after = CpuClock()
    outs = []
    for f in files:
        f.seek(0)
        outs.append(f.read().decode(errors="replace"))
        f.close()
    return Measurement(outs, before, after)


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


def dnsperf_cmd(queries, duration, rate, tcp=False, verbose=False):
    cmd = on_client("dnsperf", "-s", SRV_IP, "-d", queries, "-l", str(duration), "-c", "8" if tcp else "4",
                    "-T", "1", "-q", "64" if tcp else "500", "-t", "2")
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


def run_dnsperf(queries, duration, rate):
    m = measured([dnsperf_cmd(queries, duration, rate, verbose=bool(rate))], duration + 30)
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
         "kxdpgun, hits")


def bench_target(t, a, hits, mix, probe):
    peer = server = None
    try:
        if t.native:
            peer = peer_pass_program(a.xdpdns)
        server = Server(t, probe, a.start_timeout)
        runs = {load: [] for load in LOADS}
        for _ in range(a.repeats):
            runs[LOADS[0]].append(with_counters(server, lambda: run_dnsperf(hits, a.duration, None)))
            runs[LOADS[1]].append(with_counters(server, lambda: run_dnsperf(hits, a.duration, a.rate)))
            if not t.floor:  # the floor answers UDP only, and every query alike
                runs[LOADS[2]].append(with_counters(server, lambda: run_mix(mix, a.duration, a.rate)))
            # kxdpgun brings its own program for the client side.
            stop(peer)
            runs[LOADS[3]].append(with_counters(server, lambda: run_kxdpgun(hits, a.duration, a.kxdpgun_rate)))
            if t.native:
                peer = peer_pass_program(a.xdpdns)
        return {"target": t.label,
                "runs": {k: {"summary": summarise(v), "samples": v} for k, v in runs.items() if v}}
    finally:
        if server:
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


# ---------------------------------------------------------------- report

def fmt(s, key, digits=0):
    v = s.get(key)
    if not v:
        return "n/a"
    f = f"{{:,.{digits}f}}"
    if v["min"] == v["max"]:
        return f.format(v["median"])
    return f"{f.format(v['median'])} ({f.format(v['min'])}–{f.format(v['max'])})"


def median_of(results, target, load, key):
    for r in results:
        if r["target"] == target and "runs" in r:
            v = r["runs"].get(load, {}).get("summary", {}).get(key)
            return v["median"] if v else None
    return None


def ratios(results):
    pairs = [
        ("xdpdns XDP generic", "floor (XDP reflector), generic"),
        ("xdpdns XDP native", "floor (XDP reflector), native"),
        ("xdpdns XDP generic", "NSD"),
        ("xdpdns XDP native", "NSD"),
        ("xdpdns fallback only", "NSD"),
    ]
    out = []
    for load in (LOADS[1], LOADS[2]):
        for a, b in pairs:
            x = median_of(results, a, load, "server_cpu_ns_per_answer")
            y = median_of(results, b, load, "server_cpu_ns_per_answer")
            out.append({"load": load, "ratio": f"{a} / {b}", "value": x / y if x and y else None})
    return out


def report(machine, results, ratio_rows):
    lines = [
        f"{machine['date']}: {machine['nproc']} CPUs ({machine['cpu']}), kernel {machine['kernel']}; "
        f"{machine['names']:,} names, {machine['records']:,} records; {machine['duration_s']} s per run, "
        f"medians of {machine['repeats']} (min–max); fixed rate {machine['fixed_rate_qps']:,} q/s "
        f"({100 * TCP_SHARE:.0f} % of it over TCP in the mix), kxdpgun at {machine['kxdpgun_rate_qps']:,} q/s. "
        f"Server on CPU {SRV_CPU_LIST}, load generator on CPU {GEN_CPU}; "
        f"server CPU busy without load: {machine['server_cpu_pct_without_load']:.2f} %.",
        "",
        "| target | load | answered/s | loss % | latency avg ms | latency p99 ms | server CPU ns/answer "
        "| server CPU % | answered in kernel % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['target']} | failed: {r['error'][:100]} | | | | | | | |")
            continue
        for load, v in r["runs"].items():
            s = v["summary"]
            lines.append(f"| {r['target']} | {load} | {fmt(s, 'qps')} | {fmt(s, 'loss_pct', 2)} | "
                         f"{fmt(s, 'latency_avg_ms', 3)} | {fmt(s, 'latency_p99_ms', 3)} | "
                         f"{fmt(s, 'server_cpu_ns_per_answer')} | {fmt(s, 'server_cpu_pct', 1)} | "
                         f"{fmt(s, 'in_kernel_pct', 1)} |")
    lines += ["", "Server CPU per answer, ratios of medians:", "", "| load | ratio | value |", "| --- | --- | --- |"]
    for r in ratio_rows:
        value = f"{r['value']:.2f}" if r["value"] else "n/a"
        lines.append(f"| {r['load']} | {r['ratio']} | {value} |")
    return "\n".join(lines)


def check_smoke(results):
    """What the smoke run in CI holds the harness to: every target answers
    every load, and xdpdns with XDP answers hits in the kernel."""
    problems = []
    for r in results:
        if "error" in r:
            problems.append(f"{r['target']}: {r['error'][:300]}")
            continue
        for load, v in r["runs"].items():
            s = v["summary"]
            if not s.get("answered", {}).get("median"):
                problems.append(f"{r['target']}, {load}: nothing answered {v['samples'][-1].get('raw', '')}")
            if s.get("server_cpu_ns_per_answer") is None:
                problems.append(f"{r['target']}, {load}: no CPU figure")
            if "mix" in load and not s.get("tcp_answered", {}).get("median"):
                problems.append(f"{r['target']}, {load}: no TCP answers {v['samples'][-1].get('raw_tcp', '')}")
            kernel = s.get("in_kernel_pct", {}).get("median")
            if r["target"].startswith("xdpdns XDP") and "hits" in load and not (kernel and kernel > 50):
                problems.append(f"{r['target']}, {load}: {kernel} % answered in kernel")
    return problems


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
    workdir = tempfile.mkdtemp(prefix="xdpdns-bench-")
    results = []
    pinner = NapiPinner()
    try:
        t0 = time.time()
        zone, hits, mix, names, records = gen.generate(workdir, a.names, a.queries)
        print(f"bench-e2e: {names} names, {records} records generated in {time.time() - t0:.1f} s", file=sys.stderr)
        probe = f"svc0.svc.u0.{ORIGIN}"
        netns_up(a.xdpdns)
        pinner.start()
        # What the server CPU does with no target and no load: the noise.
        idle_busy, _, wall = measured([["sleep", str(a.duration)]], a.duration + 5).server
        idle_pct = 100.0 * idle_busy / (wall * len(SRV_CPUS))
        for t in targets(workdir, zone, names, a.xdpdns):
            if a.only and not any(o in t.label for o in a.only):
                continue
            t0 = time.time()
            try:
                results.append(bench_target(t, a, hits, mix, probe))
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
        "command": " ".join(sys.argv),
    }
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
