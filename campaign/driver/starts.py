"""How an actor's start is followed (plain data, no Ray): `ActorStart` is one actor's state from
its creation until it is ready, or is given up on because it cannot be placed, or failed;
`Placement` is what the cluster said about a start still pending (`cluster.placement` looks);
`placement_reason` says why a resource request is not met, from the nodes' resources.

A slow start is no failure: an actor whose process runs (its constructor is importing, on a
loaded machine) is waited for however long it takes, and said so every `ray.start_timeout_s`.
Only an actor that is not placed (no node can hold its request, or none had it free for
`ray.start_timeout_s`) is given up on; one whose constructor raised or whose process died
failed."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: a start not back yet is looked at (a GCS query) at most this often
PROBE_S = 5.0
#: when testing ends, an actor not placed for this long is taken as never to be (a shorter
#: wait may be a worker process starting on a loaded machine, its resources already held)
FINAL_MIN_S = 10.0


class Phase(str, Enum):
    """Where an actor's start stands."""

    STARTING = "starting"  #: created, its start-up check not back
    READY = "ready"  #: its start-up check came back
    NOT_PLACED = "not placed"  #: given up on: no node could hold it, or none had it free
    FAILED = "failed"  #: its constructor raised or its process died while starting


@dataclass(frozen=True)
class Placement:
    """What the cluster says of an actor still starting."""

    #: it has a process (on a node): its constructor is running; or a node has its request
    #: free, so Ray is starting a process for it
    placed: bool
    #: no live node has the resources it asks for, even with nothing else running
    fits_nowhere: bool = False
    #: its request against what the nodes have and have free (`placement_reason`)
    why: str = ""
    node: str = ""  #: where it runs, when placed


def fmt_resources(res: dict[str, float]) -> str:
    """Resources as the messages show them: `{CPU: 1, GPU: 0.5}`."""
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(res.items())) + "}"


def placement_reason(request: dict[str, float], nodes: dict[str, dict[str, float]],
                     free: dict[str, dict[str, float]]) -> tuple[bool, str]:
    """Why `request` is not met: (fits nowhere, reason). `nodes`: each live node's resources by
    its name, `free`: what each has free. The reason shows, for the resources asked for, the
    nodes that could hold the request with nothing else running, with what they have free; or
    when there are none, every node."""
    keys = sorted(request)
    shown = lambda nd: {r: nd.get(r, 0.0) for r in keys}  # noqa: E731
    could = [n for n, nd in nodes.items() if all(nd.get(r, 0.0) >= v for r, v in request.items())]
    if not could:
        have = "; ".join(f"{n} has {fmt_resources(shown(nd))}" for n, nd in nodes.items()) or "none"
        return True, f"needs {fmt_resources(request)}; no live node has that much ({have})"
    parts = [f"{n} has {fmt_resources(shown(nodes[n]))}, free {fmt_resources(shown(free.get(n, {})))}"
             for n in could]
    where = "the only node that could hold it" if len(could) == 1 else "the nodes that could hold it"
    return False, f"needs {fmt_resources(request)}; {where}: " + "; ".join(parts)


@dataclass(eq=False)
class ActorStart:
    """One actor's start. Invariants: `phase` leaves STARTING once, for READY (with `start_s`),
    NOT_PLACED or FAILED (with `reason`); a placed actor is never given up on for being slow."""

    name: str
    since: float  #: when it was created (monotonic)
    #: the campaign's first actor on its slot (its failing to start stops the campaign)
    first: bool = True
    phase: Phase = Phase.STARTING
    start_s: float | None = None  #: seconds from its creation until it was ready
    #: NOT_PLACED: "could not be placed in <s> s: <placement_reason>"; FAILED: the error
    reason: str = ""
    node: str = ""  #: where it was seen running while still starting
    #: the cluster was last seen holding it nowhere (no process, no node with its request free)
    unplaced: bool = False
    warnings: int = 0  #: "still starting" lines said so far
    probed: float = 0.0  #: when the cluster was last asked about it

    @property
    def starting(self) -> bool:
        return self.phase is Phase.STARTING

    @property
    def given_up(self) -> bool:
        return self.phase is Phase.NOT_PLACED

    def ready(self, now: float) -> None:
        self.phase, self.start_s = Phase.READY, now - self.since

    def failed(self, reason: str) -> None:
        self.phase, self.reason = Phase.FAILED, reason

    def due_probe(self, now: float) -> bool:
        """Whether to ask the cluster about it now: it has been starting for PROBE_S and was
        not asked in the last PROBE_S."""
        return (self.starting and now - self.since >= PROBE_S
                and now - self.probed >= PROBE_S)

    def observe(self, now: float, where: Placement, timeout_s: float,
                final: bool = False) -> str | None:
        """Take what the cluster says of it; return a line to log, if any. Not placed: given up
        on when no node could hold it, after `timeout_s`, or (`final`) when the campaign's
        testing ended. Placed: waited for, said so after each `timeout_s` it has taken."""
        self.probed = now
        waited = now - self.since
        if not self.starting:
            return None
        self.unplaced = not where.placed
        if where.placed:
            self.node = where.node
            if waited >= timeout_s * (self.warnings + 1):
                self.warnings += 1
                on = f"on {where.node}: " if where.node else ""
                return (f"actor {self.name} still starting after {waited:.0f} s, waiting "
                        f"({on}imports under load?)")
            return None
        if where.fits_nowhere or waited >= timeout_s or (final and waited >= FINAL_MIN_S):
            self.phase = Phase.NOT_PLACED
            self.reason = f"could not be placed in {waited:.0f} s: {where.why}"
            return f"actor {self.name} {self.reason}"
        return None

    def describe(self, now: float) -> str:
        """Its state in a few words, for the summary."""
        if self.phase is Phase.READY:
            return f"ready in {self.start_s:.1f} s"
        if self.phase is Phase.STARTING:
            return (f"still starting after {now - self.since:.0f} s"
                    + (f" on {self.node}" if self.node else ""))
        if self.phase is Phase.NOT_PLACED:
            return self.reason
        return f"failed to start: {self.reason}"
