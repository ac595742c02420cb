#!/usr/bin/env python3
"""The parts of scripts/demo.sh that read JSON: following a rollout, the summary, the ready file.

    demo_follow.py follow LAUNCHER AGENTS TIMEOUT TTY
        Finds the scheduler through the launcher (GET /v2/apps/storage-scheduler), then polls
        its /api/state once a second, writing a progress line (nodes per phase) to stderr.
        The last line on stdout is the outcome: `ready <scheduler url>`, `failed <reason>` or
        `timeout <reason>`. TIMEOUT 0 follows until every node runs and never reports a failed
        node as the end (the demo then stays up for inspection). TTY 1 redraws one line.
    demo_follow.py summary SCHEDULER_URL
        One line per node: hostname, persona, phase, devices attached, and under it what its
        row on the status page flags (error, warning, failed launches); the scheduler's
        warning about its state store, if any; one per pool
        (`pd/pool: used X of Y (Z%)`); the storage health (`health: <state>` and its reasons)
        when the scheduler serves /api/health. It waits (up to 15 s) for a gateway poll read
        after the last node's change, so that it shows what the gateway says of the devices
        just attached.
    demo_follow.py ready-file DEVCLUSTER_JSON SCHEDULER_URL PATH
        Writes PATH (atomically): the scheduler URL and the dev cluster's own ready file.
"""
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

PHASES = ["launching", "environment", "reboot-prerequisites", "packages", "devices",
          "cluster-init", "volume-driver", "reboot-final", "storage-attach", "running",
          "failed", "lost"]


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def phase_counts(nodes):
    counts = {}
    for n in nodes.values():
        p = n.get("phase", "?")
        counts[p] = counts.get(p, 0) + 1
    return counts


def describe(counts):
    parts = [f"{p} {counts[p]}" for p in PHASES if p in counts]
    parts += [f"{p} {c}" for p, c in counts.items() if p not in PHASES]
    return ", ".join(parts) or "none yet"


def verdict(nodes, agents, stop_on_failure):
    """`ready`, `failed <reason>` or None (keep following) for one /api/state."""
    counts = phase_counts(nodes)
    if len(nodes) >= agents and counts.get("running", 0) == len(nodes):
        return "ready"
    # The scheduler relaunches a failed node after a backoff, and a first failure may pass
    # (the dev cluster's fetcher can race another launch): a node has failed for good only
    # once it failed again after its relaunch. A host's planned reboot is no failure.
    failed = [n for n in nodes.values() if n.get("phase") == "failed" and n.get("failures", 0) >= 2]
    if failed and stop_on_failure:
        reasons = "; ".join(f"{n.get('hostname', '?')}: {n.get('last_error') or 'no reason given'}"
                            for n in sorted(failed, key=lambda n: n.get("hostname", "")))
        return f"failed {len(failed)} node(s) failed: {reasons}"
    return None


def stuck(counts, agents, timeout):
    """The timeout's reason: the earliest phase a node is in is what holds the rollout up."""
    waiting = {p: c for p, c in counts.items() if p != "running"}
    total = sum(counts.values())
    if not waiting:
        return f"only {total} of {agents} agents have a node after {timeout:.0f} s"
    phase = min(waiting, key=lambda p: PHASES.index(p) if p in PHASES else len(PHASES))
    return (f"after {timeout:.0f} s, {waiting[phase]} of {total} nodes are stuck in phase {phase}"
            + "".join(f", {c} in {p}" for p, c in waiting.items() if p != phase))


def follow(launcher, agents, timeout, tty):
    # Ctrl-C kills this follower outright (no traceback), so the shell's INT trap runs.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    start = time.monotonic()

    def progress(line, end=False):
        sys.stderr.write(("\r\033[K" + line + ("\n" if end else "")) if tty else line + "\n")
        sys.stderr.flush()

    scheduler, last, counts = None, None, {}
    while True:
        elapsed = time.monotonic() - start
        stamp = f"[{elapsed:4.0f}s] "
        try:
            if scheduler is None:
                app = get(f"http://{launcher}/v2/apps/storage-scheduler")["app"]
                running = [t for t in app.get("tasks", [])
                           if t.get("state") == "TASK_RUNNING" and t.get("ports")]
                if running:
                    scheduler = f"http://{running[0]['host']}:{running[0]['ports'][0]}"
                line = "scheduler: waiting for the launcher to start it"
                failure = app.get("lastTaskFailure")
                if failure:
                    line += f" (last failure: {failure.get('message', '?')})"
            if scheduler is not None:
                state = get(f"{scheduler}/api/state")
                nodes = state.get("model", {}).get("nodes", {})
                counts = phase_counts(nodes)
                line = (f"nodes {len(nodes)}/{agents}: {describe(counts)}"
                        + ("" if state.get("subscribed") else " (scheduler not subscribed)"))
                outcome = verdict(nodes, agents, timeout > 0)
                if outcome:
                    progress(stamp + line, end=True)
                    print(outcome if outcome != "ready" else f"ready {scheduler}")
                    return
        except (OSError, ValueError, KeyError) as err:
            line = f"waiting for {'the scheduler' if scheduler else 'the launcher'} ({err})"
        # A terminal gets the live line every second; a log only a line per change.
        if tty or line != last:
            progress(stamp + line)
            last = line
        if timeout > 0 and elapsed >= timeout:
            if tty:
                sys.stderr.write("\n")
            if scheduler is None:
                print(f"timeout the scheduler did not start within {timeout:.0f} s ({line})")
            else:
                print("timeout " + stuck(counts, agents, timeout))
            return
        time.sleep(1)


def settled(scheduler, state, wait=15.0):
    """The state once the gateway was read after the last node's change, so that the summary
    shows what the gateway says of the devices just attached (their pool, their SDS), not the
    poll from before them; `state` as it is after `wait` seconds, or when the scheduler has
    no /api/health to say when it last read the gateway."""
    deadline = time.monotonic() + wait
    while True:
        nodes = state.get("model", {}).get("nodes", {}).values()
        changed = max((n.get("updated_ms", 0) for n in nodes), default=0)
        try:
            read = get(f"{scheduler}/api/health").get("read_ms") or 0
        except (OSError, ValueError):
            return state
        if read >= changed or time.monotonic() >= deadline:
            return state
        time.sleep(0.2)
        state = get(f"{scheduler}/api/state")


def summary(scheduler):
    state = settled(scheduler, get(f"{scheduler}/api/state"))
    model = state.get("model", {})
    print(f"{'node':<14} {'persona':<11} {'phase':<9} devices attached")
    for n in sorted(model.get("nodes", {}).values(), key=lambda n: n.get("hostname", "")):
        attached, devices = n.get("attached", []), n.get("devices", [])
        print(f"{n.get('hostname', '?'):<14} {n.get('persona', '?'):<11} {n.get('phase', '?'):<9} "
              f"{len(attached)}/{len(devices)} {' '.join(attached)}".rstrip())
        # What the status page flags on the node's row, under it.
        if n.get("last_error"):
            print(f"  error: {n['last_error']}")
        if n.get("warning"):
            print(f"  warning: {n['warning']}")
        failures = n.get("failures", 0)
        if failures:
            print(f"  {failures} failed launch{'' if failures == 1 else 'es'}")
    try:
        note = get(f"{scheduler}/health").get("state_warning")
    except (OSError, ValueError) as err:
        note = f"/health not read ({err})"
    if note:
        print(f"warning: {note}")
    for p in model.get("pools", []):
        print(pool_line(p))
    for line in health_lines(scheduler):
        print(line)


def pool_line(p):
    """`pd/pool: used X of Y (Z%)` in GiB as the status page shows them: Y the pool's capacity,
    Z the share of it the scheduler's threshold and health reasons read (used over capacity
    less the spare kept for rebuilds)."""
    gib = lambda key: p.get(key, 0) / (1 << 30)
    return (f"{p.get('protection_domain', '?')}/{p.get('pool', '?')}: used "
            f"{gib('used_bytes'):.1f} GiB of {gib('capacity_bytes'):.1f} GiB "
            f"({p.get('used_pct', 0):.1f}%)")


def health_lines(scheduler):
    """`health: <state>` and its reasons, one a line, from /api/health; nothing from a
    scheduler that has no such endpoint (404)."""
    try:
        doc = get(f"{scheduler}/api/health")
    except urllib.error.HTTPError as err:
        return [] if err.code == 404 else [f"health: not read (/api/health answered {err.code})"]
    except (OSError, ValueError) as err:
        return [f"health: not read ({err})"]
    lines = [f"health: {doc.get('state', '?')}"]
    lines += [f"  {r}" for r in doc.get("reasons", [])]
    for n in doc.get("nodes", []):
        reasons = "; ".join(n.get("reasons", [])) or "no reason given"
        lines.append(f"  {n.get('hostname', n.get('agent_id', '?'))}: {n.get('state', '?')}: {reasons}")
    return lines


def ready_file(devcluster_json, scheduler, path):
    doc = {"scheduler": scheduler, "status_page": scheduler + "/"}
    with open(devcluster_json, encoding="utf-8") as f:
        doc.update(json.load(f))
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    os.rename(path + ".tmp", path)


def main(argv):
    match argv[1:]:
        case ["follow", launcher, agents, timeout, tty]:
            follow(launcher, int(agents), float(timeout), tty == "1")
        case ["summary", scheduler]:
            summary(scheduler)
        case ["ready-file", devcluster_json, scheduler, path]:
            ready_file(devcluster_json, scheduler, path)
        case _:
            print(__doc__.strip(), file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
