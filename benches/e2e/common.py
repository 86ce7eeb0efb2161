"""Shared by the harness modules: where things are, the namespaces, the
CPU split, and running commands in and out of the namespaces."""

import os
import subprocess
import sys

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
# The TCP load: this many connections at once, each with this many
# queries in flight.
TCP_CLIENTS = 1000
TCP_PIPELINED = 8


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
