"""The simulation of one run of a step's tasks on threads and worker processes.

:class:`Simulation` replays a run's tasks, each a list of nodes with their seconds alone and
their GIL shares, on simulated lanes, as events in time order: the GIL each process's lanes
share, the cores a machine's processes share, and on a cluster the scheduler, the tasks'
round trips, the transfers between workers and the copies of the training state.
:mod:`pargraph.forecast` makes the tasks of each configuration and reads the outcome.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pargraph.graph import Node
from pargraph.machine_costs import Network
from pargraph.remote.layout import SEND_PARTS_SAVING

#: Seconds between two turns of a cluster process's own loops in the simulation (a worker's
#: profiler samples every 10 ms), each taking its share of a core (``Network.worker_idle``).
LOOPS_PERIOD = 0.01
#: A node whose time on a core is under this share of its time mostly waits (a sleep, I/O, a
#: device), and takes the GIL back after its wait (``forecast.fitted_retake``); an op that computes
#: without the GIL has its hand-overs in its measured share (``machine_costs.measure_call``).
WAITS_BELOW = 0.5


@dataclass
class Segment:
    """A simulated stretch of one lane: one node, from its start to its stop; or, on the
    ``client`` lane of a cluster's configuration, the values the caller read back after a
    run (op ``read back``, phase ``transfer``)."""

    lane: str
    key: str
    op: str
    phase: str
    start: float
    stop: float


@dataclass
class Outcome:
    """One configuration's simulated step: its time and where the time went (seconds)."""

    config: tuple[str, int]
    step_time: float
    lanes: int
    compute: float = 0.0
    gil_wait: float = 0.0
    #: time without a core, where the processes share a machine's (``cores=``): a stretch
    #: going at half its pace for lack of cores goes half its time without one
    core_wait: float = 0.0
    transfers: float = 0.0
    scheduling: float = 0.0
    outside: float = 0.0
    #: the caller's wait on each run, from its start to its values back
    waits: list[float] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)

    @property
    def busy(self) -> float:
        """Share of the lanes' time spent computing nodes."""
        return self.compute / (self.lanes * self.step_time) if self.step_time else 0.0


@dataclass
class Task:
    """One task of a run: its members, run one after another on one lane of ``worker``."""

    members: list[int]  # indices into the run's computed nodes
    worker: int
    #: per task it reads from (by index), the nodes of that task it reads
    reads: dict[int, set[int]] = field(default_factory=dict)
    done: float = 0.0


@dataclass
class _Ask:
    """A stretch of work on process ``process`` (None: on a core, no GIL) and, where the
    processes share cores, a core: a node's part on a core shares its process's GIL by its
    share (``Simulation._rates``), any other stretch takes the process's lock first. Asked at
    ``asked``, ``then`` called when it ends."""

    asked: float
    process: int | None
    seconds: float
    member: int | None  # the node it is part of; None: scheduling
    then: tuple
    lane: bool = True  # a lane's step (else the scheduler's or a worker's own loop)
    held_at: float = 0.0  # when it got the process's lock
    #: scheduling time (else a transfer's, which counts its whole span when it ends)
    scheduling: bool = True
    #: the cores it takes, where the processes share them
    cores: int = 1
    #: a turn of a cluster process's own loops, which no task waits for
    loops: bool = False
    #: a thread back from a wait taking the GIL again: the whole stretch is a wait for it
    retake: bool = False
    #: what it slows, and is slowed by, a stretch of its process running beside it
    #: (``Simulation._rates``): a node's GIL share; a stretch that takes the lock, 1
    share: float = 1.0
    #: its node's kind of op, where two kinds were measured side by side (else -1)
    kind: int = -1
    #: a node's part on a core that computes: it pays the hand-over beside another such part
    hands: bool = False
    #: a node's part that takes the process's lock alone, first come first served, as any
    #: stretch of no node does (a waiting node's short stretch of Python: ``switch_interval``)
    alone: bool = False
    #: its seconds of work not done yet, and the pace it goes at, while it runs: its pace
    #: beside its process's other stretches (``gil_pace``) times its share of the cores
    left: float = 0.0
    rate: float = 1.0
    gil_pace: float = 1.0
    #: the seconds it has gone without a core so far, where the cores are shared
    core_lost: float = 0.0
    ran_at: float = 0.0  # when it began to run
    version: int = 0  # its latest end event; older ones are stale


class Simulation:
    """One run on ``workers`` processes of ``threads`` lanes each (one process: threads), as events
    in time order. A lane runs a task's steps one after another: its scheduling (``task_cost``
    of the GIL locally), then per member its part on a core and the part that waits. The
    stretches of one process that run at once slow each other by their GIL shares (``_rates``):
    two nodes of one kind each take ``1 + share`` times their time alone, as the share was
    measured (``machine_costs.measure_call``), many nodes holding the GIL throughout take turns,
    and a node that releases it goes at its own pace; where two nodes' kinds (``kinds``) were
    measured side by side, each slows the other as measured (``pairs``,
    ``machine_costs.measure_pair``), and a node that computes beside another loses ``handover``
    seconds to the GIL's hand-overs, as often as the other holds the lock (its share). Stretches
    that are no node's (scheduling, transfers) take the process's lock, first come first served,
    and run as holding the GIL throughout. Where all processes share ``cores`` cores, the
    stretches running at once share them as Linux shares a busy core: each wants its width
    (``widths``) times its pace beside its process's others, and where all want more than
    ``cores``, each goes at ``cores / wanted`` of that pace. A node that mostly waits
    (:data:`WAITS_BELOW`) takes its process's GIL back after its wait, for ``retake`` seconds,
    where a stretch holding it runs then; its stretch on a core, where shorter than
    ``switch_interval``, takes the lock alone, as a stretch of no node does. On a cluster, the
    scheduler (a process of its own) takes in each task's end, one at a time, then sends off the
    tasks that end made ready; of each task's latency its worker spends ``worker_task`` holding
    its GIL, then fetches what the task reads from other workers; transfers and copies of
    training state take the workers' and the scheduler's time on a core too. Each ready task
    goes to the first free lane of its process, in the tasks' order."""

    def __init__(self, tasks: list[Task], nodes: list[Node], seconds: list[float],
                 shares: list[float], workers: int, threads: int, remote: bool,
                 network: Network | None, start: float, outcome: Outcome,
                 task_cost: float = 0.0, on_core: list[float] | None = None,
                 cores: int | None = None,
                 returned: set[int] | None = None, copies: bool = False,
                 widths: list[int] | None = None, retake: float = 0.0,
                 kinds: list[int] | None = None,
                 pairs: dict[tuple[int, int], float] | None = None,
                 handover: float = 0.0, switch_interval: float = 0.0) -> None:
        self.tasks, self.nodes, self.seconds, self.shares = tasks, nodes, seconds, shares
        #: the interval after which a thread waiting for the GIL asks its holder to drop it:
        #: a node that mostly waits holds it for its stretch of Python from one wait to the
        #: next, and one shorter than this runs to its end, the lock's other takers waiting
        #: in turn (0: every node's part shares the lock as its share says)
        self.switch_interval = switch_interval
        #: seconds a node that computes loses to the GIL's hand-overs beside a node of
        #: another lane of its process that holds the lock throughout, and that share of
        #: them beside one holding it for a share of its time (fitted by the forecast)
        self.handover = handover
        #: per node, its kind of op's number (-1: none measured in pairs), and per ordered
        #: pair of kinds ``(a, b)`` how much ``b`` beside ``a`` slows it, over its time on a
        #: core: ``a`` goes at ``1 / (1 + slowing)`` of its pace
        self.kinds = kinds or [-1] * len(nodes)
        self.pairs = pairs or {}
        #: per node, the cores it takes where the processes share them: a product with
        #: BLAS on every core takes them all
        self.widths = widths or [1] * len(nodes)
        #: the members the run returns, and of them the training state (the optimizer's
        #: updates), which ``copies`` copies to a second worker
        self.returned = returned or set()
        self.copied = {m for m in self.returned if nodes[m].phase == "update"} \
            if copies else set()
        #: per node, the share of its time on a core (the rest waits: a sleep, a device)
        self.on_core = on_core or [1.0] * len(nodes)
        self.task_cost = task_cost  # seconds of the GIL a local task costs the scheduler
        #: the GIL's time a thread back from a wait takes to have it again (``LocalCosts``)
        self.retake = retake
        self.workers, self.threads, self.remote = workers, threads, remote
        self.network, self.outcome, self.start = network, outcome, start
        self.events: list[tuple] = []
        self.order = 0
        self.free_lanes = [list(range(threads)) for _ in range(workers)]
        self.ready: list[list[int]] = [[] for _ in range(workers)]
        self.scheduler = workers  # the scheduler's process, after the workers'
        self.gil_held = [False] * (workers + 1)
        self.gil_queue: list[list[_Ask]] = [[] for _ in range(workers + 1)]
        #: per process, the stretches running on it (the last: those of no process, the
        #: loops' turns), and when the work of all was last counted
        self.running: list[list[_Ask]] = [[] for _ in range(workers + 2)]
        self.counted = 0.0
        self.cores = cores
        #: the share of its pace each stretch on a core goes at, where the cores are shared
        self.core_pace = 1.0
        #: per task whose inputs travel, the messages it waits for
        self.fetching: dict[int, int] = {}
        #: per (source task, worker), the message bringing its result there: a list of the
        #: tasks waiting for it while it travels, None once it has landed
        self.landing: dict[tuple[int, int], list[int] | None] = {}
        self.in_flight = 0  # messages between workers not landed yet
        self.finished = 0  # tasks done

    def _at(self, when: float, action: Any, *args: Any) -> None:
        self.order += 1
        heapq.heappush(self.events, (when, self.order, action, args))

    def run(self) -> float:
        """Simulates the run; returns when its last task ends."""
        producer: dict[int, int] = {}
        for t, task in enumerate(self.tasks):
            for m in task.members:
                producer.setdefault(m, t)
        index = {id(node): k for k, node in enumerate(self.nodes)}
        for task in self.tasks:
            own = set(task.members)
            for m in task.members:
                for i in self.nodes[m].inputs:
                    k = index.get(id(i)) if type(i) is Node else None
                    if k is not None and k not in own:
                        task.reads.setdefault(producer[k], set()).add(k)
        #: per task, the members other tasks read: the tuple its task returns
        self.exported: dict[int, set[int]] = defaultdict(set)
        for task in self.tasks:
            for source, read in task.reads.items():
                self.exported[source] |= read
        self.readers: dict[int, list[int]] = defaultdict(list)
        self.waiting = {t: len(task.reads) for t, task in enumerate(self.tasks)}
        for t, task in enumerate(self.tasks):
            for n in task.reads:
                self.readers[n].append(t)
        for t, n in self.waiting.items():
            if n == 0:
                self._at(self.start, self._ready, t)
        network = self.network
        if self.remote and self.cores is not None and network is not None:
            # the processes' own loops take turns on the cores while the run lasts
            shares = [network.worker_idle] * self.workers + [network.scheduler_idle]
            for process, share in enumerate(shares):
                if share > 0:
                    self._at(self.start + LOOPS_PERIOD * process / len(shares), self._loops,
                             share * LOOPS_PERIOD)
        end = self.start
        loops, ran = self._loops, self._ran  # bound once
        while self.events:
            now, _, action, args = heapq.heappop(self.events)
            if action == ran and args[1] != args[0].version:
                continue  # an end its stretch's pace has since moved
            if action != loops and not (action == ran and args[0].loops):
                end = max(end, now)
            action(now, *args)
        return end

    def _loops(self, now: float, seconds: float) -> None:
        """A turn of a cluster process's own loops: ``seconds`` on a core, again every
        :data:`LOOPS_PERIOD` until the run's tasks are done."""
        if self.finished == len(self.tasks):
            return
        self._ask(now, _Ask(now, None, seconds, None, (_nothing,), lane=False, scheduling=False,
                            loops=True))
        self._at(now + LOOPS_PERIOD, self._loops, seconds)

    # --- the GILs and the cores ---

    def _ask(self, now: float, ask: _Ask) -> None:
        if ask.process is None or (ask.member is not None and not ask.alone):
            self._core(now, ask)  # a node shares its process's GIL as it runs (_rates)
        elif self.gil_held[ask.process]:
            self.gil_queue[ask.process].append(ask)
        else:
            self._gil(now, ask)

    def _gil(self, now: float, ask: _Ask) -> None:
        self.gil_held[ask.process] = True
        ask.held_at = now
        self._core(now, ask)

    def _core(self, now: float, ask: _Ask) -> None:
        """``ask`` begins to run, beside the stretches running already."""
        if ask.lane and ask.process is not None and (ask.member is None or ask.alone):
            self.outcome.gil_wait += ask.held_at - ask.asked  # it waited for the lock
        self._count(now)
        ask.left, ask.ran_at = ask.seconds, now
        slot = self._slot(ask)
        self.running[slot].append(ask)
        self._rates(now, slot)

    def _slot(self, ask: _Ask) -> int:
        return self.workers + 1 if ask.process is None else ask.process

    def _count(self, now: float) -> None:
        """The work done, and the time gone without a core, since it was last counted."""
        passed = now - self.counted
        if passed > 0:
            lost = passed * (1.0 - self.core_pace)
            for running in self.running:
                for ask in running:
                    ask.left -= passed * ask.rate
                    ask.core_lost += lost
                    if not ask.loops:
                        self.outcome.core_wait += lost
        self.counted = now

    def _rates(self, now: float, p: int) -> None:
        """Each stretch running on process ``p`` goes at ``1 / (1 + the sum, over the others,
        of the smaller of its share and theirs)`` of its pace alone: two of one kind each at
        ``1 / (1 + share)``; ``n`` holding the GIL throughout at ``1 / n``; one that never
        holds it at its own pace. Where the two stretches' kinds were measured side by side
        (``pairs``), that slowing replaces the smaller share. A node that computes, beside
        another lane's node that computes, loses ``handover`` seconds more times the other's
        share, at most the whole (the GIL's hand-overs). Where the cores are shared, every
        stretch then goes at ``cores / wanted`` of that, where the stretches want more cores
        than there are."""
        running = self.running[p]
        pairs = self.pairs
        handing = self.handover and sum(ask.hands for ask in running) > 1
        # the shares of the nodes that compute, whose lock a hand-over waits for
        held = sum(ask.share for ask in running if ask.hands) if handing else 0.0
        for ask in running:
            if ask.process is None:
                ask.gil_pace = 1.0
                continue
            if pairs and ask.kind >= 0:
                slowing = sum(pairs.get((ask.kind, other.kind), min(ask.share, other.share))
                              for other in running if other is not ask)
            else:
                slowing = sum(min(ask.share, other.share) for other in running
                              if other is not ask)
            if handing and ask.hands:
                # taking the lock back waits for a thread that holds it: as often as the
                # nodes beside it hold it (their shares; a product in BLAS seldom does)
                slowing += self.handover / ask.seconds * min(max(held - ask.share, 0.0), 1.0)
            ask.gil_pace = 1.0 / (1.0 + slowing)
        changed = [running]
        if self.cores is not None:
            wanted = sum(ask.cores * ask.gil_pace for each in self.running for ask in each)
            pace = min(1.0, self.cores / wanted) if wanted else 1.0
            if pace != self.core_pace:
                self.core_pace, changed = pace, self.running
        for each in changed:
            for ask in each:
                rate = ask.gil_pace * self.core_pace
                if rate != ask.rate or ask.version == 0:  # (0: just begun, no end yet)
                    ask.rate = rate
                    ask.version += 1
                    self._at(now + max(ask.left, 0.0) / rate, self._ran, ask, ask.version)

    def _ran(self, now: float, ask: _Ask, version: int) -> None:
        self._count(now)
        slot = self._slot(ask)
        self.running[slot].remove(ask)
        self._rates(now, slot)
        own = now - ask.ran_at - ask.core_lost  # its time on a core
        if ask.retake:
            self.outcome.gil_wait += own
        elif ask.lane:  # what the stretches beside it cost it (none: rounding, not below 0)
            self.outcome.gil_wait += max(own - ask.seconds, 0.0)
        self._release(now, ask)

    def _release(self, now: float, ask: _Ask) -> None:
        if ask.member is None and ask.scheduling:
            self.outcome.scheduling += now - ask.asked
        if ask.process is not None and (ask.member is None or ask.alone):
            self.gil_held[ask.process] = False
            queue = self.gil_queue[ask.process]
            if queue:
                self._gil(now, queue.pop(0))
        action, *args = ask.then
        action(now, *args)

    # --- tasks ---

    def _ready(self, now: float, t: int) -> None:
        if self.remote:  # the scheduler sends it off (its time on a task: at the task's end)
            self._taken(now, t)
        else:
            self._sent(now, t)

    def _taken(self, now: float, t: int) -> None:
        network = self.network
        travel = max(network.task_latency - network.scheduler_task - network.worker_task, 0.0)
        self.outcome.scheduling += travel
        self._at(now + travel, self._arrived, t)

    def _arrived(self, now: float, t: int) -> None:
        self._ask(now, _Ask(now, self.tasks[t].worker, self.network.worker_task, None,
                            (self._fetch, t), lane=False))

    def _sent(self, now: float, t: int) -> None:
        w = self.tasks[t].worker
        heapq.heappush(self.ready[w], t)
        self._dispatch(now, w)

    def _dispatch(self, now: float, w: int) -> None:
        while self.ready[w] and self.free_lanes[w]:
            t, lane = heapq.heappop(self.ready[w]), self.free_lanes[w].pop(0)
            task = self.tasks[t]
            steps: list[tuple] = []
            if self.task_cost:
                steps.append(("gil", self.task_cost, None))
            for m in task.members:
                seconds, on_core = self.seconds[m], self.on_core[m]
                steps += [("core", seconds * on_core, m), ("free", seconds * (1.0 - on_core), m)]
                if on_core < WAITS_BELOW and self.retake:
                    steps.append(("retake", self.retake, m))
            self._step(now, t, lane, steps, 0, now)

    def _step(self, now: float, t: int, lane: int, steps: list, k: int, began: float) -> None:
        """Lane ``lane`` goes on with step ``k`` of task ``t`` at ``now``; ``began``: when
        the current member (or the scheduling) started."""
        if k == len(steps):
            self._done(now, t, lane)
            return
        kind, seconds, member = steps[k]
        if k and steps[k - 1][2] != member:
            began = now
        then = (self._after, t, lane, steps, k, began)
        if kind == "gil" and seconds > 0:
            self._ask(now, _Ask(now, self.tasks[t].worker, seconds, member, then))
        elif kind == "core" and seconds > 0:
            waits = self.on_core[member] < WAITS_BELOW
            self._ask(now, _Ask(now, self.tasks[t].worker, seconds, member, then,
                                cores=self._width(member), share=self.shares[member],
                                kind=self.kinds[member], hands=not waits,
                                alone=waits and seconds < self.switch_interval))
        elif kind == "retake" and self._gil_busy(self.tasks[t].worker):
            self._ask(now, _Ask(now, self.tasks[t].worker, seconds, member, then,
                                retake=True, alone=self.switch_interval > 0))
        else:  # a part that waits; or a GIL taken back that no other thread holds
            self._at(now + (seconds if kind != "retake" else 0.0), *then)

    def _gil_busy(self, p: int) -> bool:
        """Whether a stretch holding process ``p``'s GIL runs now."""
        return self.gil_held[p] or any(ask.share > 0 for ask in self.running[p])

    def _width(self, member: int | None) -> int:
        return 1 if member is None else self.widths[member]

    def _after(self, now: float, t: int, lane: int, steps: list, k: int, began: float) -> None:
        kind, seconds, member = steps[k]
        last_of_member = k + 1 == len(steps) or steps[k + 1][2] != member
        if member is not None and last_of_member:
            node = self.nodes[member]
            self.outcome.compute += self.seconds[member]
            self.outcome.segments.append(Segment(self._lane_name(t, lane), node.key,
                                                 node.op.name, node.phase, began, now))
        self._step(now, t, lane, steps, k + 1, began)

    def _done(self, now: float, t: int, lane: int) -> None:
        task = self.tasks[t]
        task.done = now
        self.finished += 1
        self.free_lanes[task.worker].append(lane)
        self.free_lanes[task.worker].sort()
        if self.remote:  # the scheduler takes in the task's end, then sends its readers off
            self._ask(now, _Ask(now, self.scheduler, self.network.scheduler_task, None,
                                (self._reported, t), lane=False))
        else:
            self._reported(now, t)
        if self.copied:
            self._copy(now, t)
        self._dispatch(now, task.worker)

    def _reported(self, now: float, t: int) -> None:
        for r in self.readers[t]:
            self.waiting[r] -= 1
            if self.waiting[r] == 0:
                self._ready(now, r)

    def _travel(self, now: float, seconds: float, asks: list[tuple[int, float]],
                then: tuple | None) -> None:
        """Something that moves between processes from ``now``: it lasts ``seconds`` at
        least, and until each of ``asks`` (a process, its seconds on a core, holding its
        GIL) is done; then ``then`` is called. Its span counts as transfers."""
        asks = [(process, cpu) for process, cpu in asks if cpu > 0]
        step = (self._moved, [1 + len(asks)], now, then)
        self._at(now + seconds, *step)
        for process, cpu in asks:
            self._ask(now, _Ask(now, process, cpu, None, step, lane=False, scheduling=False))

    def _moved(self, now: float, left: list[int], began: float, then: tuple | None) -> None:
        left[0] -= 1
        if left[0]:
            return
        self.outcome.transfers += now - began
        if then is not None:
            action, *args = then
            action(now, *args)

    def _between(self, now: float, seconds: float, sender: int, receiver: int,
                 worker_cpu: float, scheduler_cpu: float, arrays: int, nbytes: int,
                 then: tuple | None) -> None:
        """A message of ``arrays`` arrays of ``nbytes`` bytes from worker ``sender`` to
        ``receiver``, as :meth:`_travel`: ``worker_cpu``, ``worker_value`` per array and
        ``worker_byte`` per byte on a core, half on each worker, and ``scheduler_cpu`` on
        the scheduler's."""
        network = self.network
        cpu = (worker_cpu + network.worker_value * arrays + network.worker_byte * nbytes) / 2
        self._travel(now, seconds, [(sender, cpu), (receiver, cpu),
                                    (self.scheduler, scheduler_cpu)], then)

    def _fetch(self, now: float, r: int) -> None:
        """Task ``r`` reached its worker, its sources done: what it reads from other workers
        travels, one message per worker it reads from (``Network.transfer_costs``: less for
        one that starts while another moves), then it runs (a dask worker fetches a task's
        inputs once the scheduler has sent it the task). A result travels to a worker once,
        as a dask worker fetches a key once for all its tasks that read it: a second reader
        there waits for the same message, or finds the result landed."""
        fetches = self._fetches(r)
        waits = {id(waiting): waiting for key in self._reads_elsewhere(r)
                 if (waiting := self.landing.get(key)) is not None}
        self.fetching[r] = len(waits) + len(fetches)
        if not self.fetching[r]:
            self._sent(now, r)
            return
        for waiting in waits.values():
            waiting.append(r)
        for k, (source, (seconds, arrays, nbytes, keys)) in enumerate(fetches.items()):
            waiting = [r]
            for key in keys:
                self.landing[key] = waiting
            worker_cpu, scheduler_cpu = self.network.transfer_costs(self.in_flight + k > 0)
            self._between(now, seconds, source, self.tasks[r].worker, worker_cpu,
                          scheduler_cpu, arrays, nbytes, (self._landed, keys, waiting))
        self.in_flight += len(fetches)

    def _landed(self, now: float, keys: list[tuple[int, int]], waiting: list[int]) -> None:
        self.in_flight -= 1
        for key in keys:
            self.landing[key] = None
        for r in waiting:
            self.fetching[r] -= 1
            if not self.fetching[r]:
                self._sent(now, r)

    def _copy(self, now: float, t: int) -> None:
        """Task ``t`` ended: the training state it holds is copied to another worker
        (``remote.replication``). Where its tuple holds other values too, a ``_keep`` task
        on its worker picks the state first (``remote.layout.keep_copied``)."""
        task = self.tasks[t]
        state = {m for m in task.members if m in self.copied}
        if not state:
            return
        held = self.exported[t] | (set(task.members) & self.returned)
        copy = (self._copy_out, t, sum(nbytes(self.nodes[m]) for m in state), len(state))
        if held - state:
            network = self.network
            self._travel(now, network.task_latency, [(self.scheduler, network.scheduler_task),
                                                     (task.worker, network.worker_task)], copy)
        else:
            self._copy_out(now, *copy[1:])

    def _copy_out(self, now: float, t: int, nbytes: int, arrays: int) -> None:
        network, w = self.network, self.tasks[t].worker
        self._between(now, network.replicate_latency + nbytes / network.bandwidth, w,
                      (w + 1) % self.workers, network.worker_replicate,
                      network.scheduler_replicate, arrays, nbytes, None)

    def _reads_elsewhere(self, r: int) -> list[tuple[int, int]]:
        """The (source task, task ``r``'s worker) pairs of the results ``r`` reads from
        other workers."""
        w = self.tasks[r].worker
        return [(n, w) for n in self.tasks[r].reads if self.tasks[n].worker != w]

    def _fetches(self, r: int) -> dict[int, tuple[float, int, int, list[tuple[int, int]]]]:
        """Per worker task ``r`` reads from, of the results that have not travelled to its
        worker yet: the seconds the message waits, the arrays and the bytes it moves, and the
        (source task, worker) pairs it brings. A worker fetches the whole tuple a task
        exports, unless picking the parts the tasks of that worker read keeps
        SEND_PARTS_SAVING bytes from travelling: then a task on the producer's worker picks
        them first (remote.layout). What one worker sends goes in one message."""
        moved: dict[int, list] = {}
        for key in self._reads_elsewhere(r):
            if key in self.landing:
                continue  # landed, or on its way
            n, w = key
            exported = sum(nbytes(self.nodes[m]) for m in self.exported[n])
            wanted = set().union(*(self.tasks[t].reads[n] for t in self.readers[n]
                                   if self.tasks[t].worker == w))
            read = sum(nbytes(self.nodes[m]) for m in wanted)
            picked = exported - read >= SEND_PARTS_SAVING
            entry = moved.setdefault(self.tasks[n].worker, [0, False, 0, []])
            entry[0] += read if picked else exported
            entry[1] = entry[1] or picked
            entry[2] += len(wanted) if picked else len(self.exported[n])
            entry[3].append(key)
        network = self.network
        return {w: (network.transfer_latency + (network.task_latency if picked else 0.0)
                    + nbytes / network.bandwidth, arrays, nbytes, keys)
                for w, (nbytes, picked, arrays, keys) in moved.items()}

    def _lane_name(self, t: int, lane: int) -> str:
        w = self.tasks[t].worker
        return f"worker {w} thread {lane}" if self.remote else f"thread {lane}"


def _nothing(now: float) -> None:
    """What follows a turn of a process's own loops: nothing waits for it."""


def nbytes(node: Node) -> int:
    """The bytes of ``node``'s value."""
    return math.prod(node.shape) * node.dtype.itemsize
