"""The report: medians and ranges per target and load, ratios, and the
smoke check."""

from common import *  # noqa: F401,F403
from load import LOADS

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
        ("xdpdns XDP generic", "Knot DNS XDP"),
        ("xdpdns XDP native", "Knot DNS XDP"),
        ("xdpdns fallback only", "NSD"),
        ("xdpdns fallback only", "floor (socket reflector)"),
        ("floor (socket reflector)", "NSD"),
        # --metrics: the same server with /metrics served and scraped each second
        ("xdpdns XDP native, /metrics scraped", "xdpdns XDP native"),
        ("xdpdns fallback only, /metrics scraped", "xdpdns fallback only"),
    ]
    out = []
    ran = {r["target"] for r in results}
    for load in (LOADS[1], LOADS[4], LOADS[2], LOADS[5], LOADS[6], LOADS[7]):
        for a, b in pairs:
            if "/metrics" in a and a not in ran:
                continue  # --metrics was not given
            if load in (LOADS[4], LOADS[5], LOADS[6], LOADS[7]) and ("floor" in a or "floor" in b):
                continue
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
            if "TCP share" in load and not s.get("tcp_answered", {}).get("median"):
                problems.append(f"{r['target']}, {load}: no TCP answers {v['samples'][-1].get('raw_tcp', '')}")
            kernel = s.get("in_kernel_pct", {}).get("median")
            # Queries over TCP are the fallback's by design.
            udp_hits = "hits" in load and "TCP" not in load
            if r["target"].startswith("xdpdns XDP") and udp_hits and not (kernel and kernel > 50):
                problems.append(f"{r['target']}, {load}: {kernel} % answered in kernel")
    return problems
