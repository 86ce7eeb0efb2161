"""The two network namespaces joined by a veth pair, and threaded-NAPI
pinning for native XDP."""

import os
import threading

from common import *  # noqa: F401,F403
from targets import stop

def netns_up(xdpdns):
    netns_down()
    sh("ip", "netns", "add", SRV_NS)
    sh("ip", "netns", "add", CLI_NS)
    veth_pair(xdpdns, SRV_IF, CLI_IF, SRV_IP, CLI_IP)


def veth_pair(xdpdns, srv_if, cli_if, srv_ip, cli_ip):
    """A veth pair between the namespaces, addressed in one /24."""
    sh("ip", "link", "add", srv_if, "type", "veth", "peer", "name", cli_if)
    sh("ip", "link", "set", srv_if, "netns", SRV_NS)
    sh("ip", "link", "set", cli_if, "netns", CLI_NS)
    sh("ip", "-n", SRV_NS, "addr", "add", f"{srv_ip}/24", "dev", srv_if)
    sh("ip", "-n", CLI_NS, "addr", "add", f"{cli_ip}/24", "dev", cli_if)
    for ns, dev, cpus in ((SRV_NS, srv_if, SRV_CPUS), (CLI_NS, cli_if, [GEN_CPU])):
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
    as XDP programs (ours, the client's pass program, kxdpgun's) attach.

    `urgent`: client-side interfaces whose NAPI threads run SCHED_FIFO, so
    the generator CPU, saturated by kxdpgun, still drains the replies that
    arrive there (the attack bench's legitimate client: a separate machine
    in real life, which the flood's generator must not starve)."""

    def __init__(self, urgent=()):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.pinned = set()
        self.urgent = tuple(f"napi/{dev}" for dev in urgent)

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
                    if comm.startswith(self.urgent) and self.urgent:
                        os.sched_setscheduler(int(pid), os.SCHED_FIFO, os.sched_param(1))
                    self.pinned.add(pid)
                except OSError:
                    pass
