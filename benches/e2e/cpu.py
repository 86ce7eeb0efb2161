"""CPU accounting: machine CPU time from the cpuidle residency counters,
split between the server CPUs and the load generator's CPU."""

import os
import re
import subprocess
import tempfile
import time

from common import *  # noqa: F401,F403

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
