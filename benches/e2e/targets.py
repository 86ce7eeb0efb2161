"""The targets: each server's config and process in the server namespace."""

import os
import subprocess
import tempfile
import threading
import time

from common import *  # noqa: F401,F403

def server_dir(workdir, name):
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    return d


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


METRICS_PORT = 9153
# The answer table holds an EXIST entry per name and one per (name, type)
# answer: about three per name in gen.py's zone (an instance: EXIST, A,
# AAAA; a CNAME: five). Room for all of them, so no answer is left to
# the fallback for want of space.
TABLE_ENTRIES_PER_NAME = 5


def xdpdns_config(workdir, zone, xdp_mode, names, metrics=False, dnstap=None):
    text = f'[server]\nlisten = ["{SRV_IP}:53"]\ntcp_max_connections = {TCP_CLIENTS + 100}\n[log]\nlevel = "info"\n'
    if dnstap:
        # (socket, TOML lines): the collector listens on the socket.
        text += f'[dnstap]\nsocket = "{dnstap[0]}"\n{dnstap[1]}'
    if metrics:
        text += f'[metrics]\nlisten = "{SRV_IP}:{METRICS_PORT}"\n'
    if xdp_mode:
        text += f'[xdp]\ninterfaces = ["{SRV_IF}"]\nmode = "{xdp_mode}"\ncapacity = {max(1 << 16, TABLE_ENTRIES_PER_NAME * names)}\n'
    text += f'[[zone]]\norigin = "{ORIGIN}."\nfile = "{zone}"\n'
    tag = (xdp_mode or "fallback") + ("-metrics" if metrics else "") + ("-dnstap" if dnstap else "")
    cfg = write_file(os.path.join(workdir, f"xdpdns-{tag}.toml"), text)
    return ["serve", "--config", cfg, "--ready-file", cfg + ".ready"]


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
    # The TCP load opens TCP_CLIENTS connections (the default is 100).
    tcp-count: {TCP_CLIENTS + 100}
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


def knot_config(workdir, zone, xdp=False):
    d = server_dir(workdir, "knot-xdp" if xdp else "knot")
    # Knot's own XDP mode (AF_XDP): UDP over XDP on the interface, TCP
    # through the ordinary listener.
    xdp_section = f"""xdp:
    listen: {SRV_IF}@53
    udp: on
    tcp: off
""" if xdp else ""
    cfg = write_file(os.path.join(d, "knot.conf"), f"""server:
    rundir: "{d}"
    listen: {SRV_IP}@53
    udp-workers: {len(SRV_CPUS)}
    tcp-workers: {len(SRV_CPUS)}
    tcp-max-clients: {TCP_CLIENTS + 100}
{xdp_section}database:
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
    tcp-clients {TCP_CLIENTS + 100};
}};
zone "{ORIGIN}" {{ type primary; file "{zone}"; }};
""")
    return ["named", "-g", "-c", cfg, "-n", str(len(SRV_CPUS))]


class Target:
    def __init__(self, label, cmd, native=False, floor=False, in_kernel=False, scrape=False, collector=None):
        self.label, self.cmd, self.native = label, cmd, native
        self.floor, self.in_kernel = floor, in_kernel
        # Scraped once a second during every load, as Prometheus would.
        self.scrape = scrape
        # A dnstap collector's Unix socket: fstrm_capture listens there
        # (on the generator's CPU, as a collector elsewhere would cost the
        # server nothing) and writes to /dev/null.
        self.collector = collector


def dnstap_targets(workdir, zone, names, xdpdns):
    """xdpdns beside itself with dnstap on: the kernel sampling one answer
    in 100 of each kind, and the fallback tapping every exchange."""
    sock = os.path.join(workdir, "dnstap.sock")
    kernel = (sock, "fallback = 1\nkernel_answers = 100\nkernel_negatives = 100\n"
                    "kernel_limited = 100\nkernel_passed = 100\n")
    fallback = (sock, "fallback = 1\nkernel_answers = 0\nkernel_negatives = 0\n"
                      "kernel_limited = 0\nkernel_passed = 0\n")
    return [
        Target("xdpdns XDP native, dnstap kernel 1 in 100",
               [xdpdns, *xdpdns_config(workdir, zone, "driver", names, dnstap=kernel)],
               native=True, in_kernel=True, collector=sock),
        Target("xdpdns fallback only, dnstap 1 in 1",
               [xdpdns, *xdpdns_config(workdir, zone, None, names, dnstap=fallback)], collector=sock),
    ]


def targets(workdir, zone, names, xdpdns, metrics=False, dnstap=False):
    scraped = [
        Target("xdpdns XDP native, /metrics scraped", [xdpdns, *xdpdns_config(workdir, zone, "driver", names, True)],
               native=True, in_kernel=True, scrape=True),
        Target("xdpdns fallback only, /metrics scraped", [xdpdns, *xdpdns_config(workdir, zone, None, names, True)],
               scrape=True),
    ] if metrics else []
    if dnstap:
        scraped += dnstap_targets(workdir, zone, names, xdpdns)
    return scraped + [
        Target("floor (XDP reflector), generic", [xdpdns, "xdp-reflect", SRV_IF, "--mode", "generic"], floor=True),
        Target("floor (XDP reflector), native", [xdpdns, "xdp-reflect", SRV_IF, "--mode", "driver"], native=True,
               floor=True),
        # The fallback's own sockets and loop answering with the query itself.
        Target("floor (socket reflector)", [xdpdns, "udp-reflect", f"{SRV_IP}:53"], floor=True),
        Target("xdpdns XDP generic", [xdpdns, *xdpdns_config(workdir, zone, "generic", names)], in_kernel=True),
        Target("xdpdns XDP native", [xdpdns, *xdpdns_config(workdir, zone, "driver", names)], native=True,
               in_kernel=True),
        Target("xdpdns fallback only", [xdpdns, *xdpdns_config(workdir, zone, None, names)]),
        Target("NSD", nsd_config(workdir, zone)),
        Target("Knot DNS", knot_config(workdir, zone)),
        Target("Knot DNS XDP", knot_config(workdir, zone, xdp=True), native=True),
        Target("BIND 9", bind_config(workdir, zone)),
    ]


def ready_file(cmd):
    """The --ready-file of an `xdpdns serve` command line."""
    return cmd[cmd.index("--ready-file") + 1]


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
        self.collector = None
        if target.collector:
            if os.path.exists(target.collector):
                os.unlink(target.collector)
            self.collector = subprocess.Popen(
                ["taskset", "-c", str(GEN_CPU), "fstrm_capture", "-t", "protobuf:dnstap.Dnstap",
                 "-u", target.collector, "-w", "/dev/null"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.time() + 10
            while not os.path.exists(target.collector) and time.time() < end:
                time.sleep(0.05)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(on_server(*target.cmd), stdout=log, stderr=log)
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{target.cmd[0]} exited: {self.output()[-2000:]}")
            # xdpdns answers from its fallback before the XDP table is
            # loaded: wait for the whole start-up (its ready file).
            if dig_ok(probe) and (target.cmd[1:2] != ["serve"] or os.path.exists(ready_file(target.cmd))):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{target.cmd[0]} did not answer within {timeout}s: {self.output()[-1000:]}")

    def scraping(self):
        """A thread that scrapes /metrics every second from the client
        namespace until the returned event is set (None: not scraped)."""
        if not self.target.scrape:
            return None
        done = threading.Event()
        url = f"http://{SRV_IP}:{METRICS_PORT}/metrics"

        def loop():
            while not done.wait(1.0):
                subprocess.run(on_client("curl", "-s", "-o", "/dev/null", "--max-time", "2", url),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        threading.Thread(target=loop, daemon=True).start()
        return done

    def output(self):
        with open(self.log_path, "rb") as log:
            return log.read().decode(errors="replace")

    def counter_values(self):
        """xdpdns's kernel counters by name, as it logs them on SIGUSR1;
        None unless xdpdns with XDP."""
        if not self.target.in_kernel:
            return None
        self.proc.send_signal(10)  # SIGUSR1
        time.sleep(0.3)
        lines = [line for line in self.output().splitlines() if "xdp counters" in line]
        if not lines:
            return None
        pairs = (x.split("=", 1) for x in lines[-1].split() if "=" in x)
        return {k: int(v) for k, v in pairs if v.isdigit()}

    def counters(self):
        """(answered in kernel, passed up) so far; None unless xdpdns with XDP."""
        kv = self.counter_values()
        if kv is None:
            return None
        answered = sum(kv.get(k, 0) for k in ("answered_a", "answered_aaaa", "answered_other", "nxdomain", "nodata", "referrals"))
        passed = sum(v for k, v in kv.items() if k.startswith("pass_"))
        return answered, passed

    def stop(self):
        stop(self.proc)
        stop(self.collector)
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
