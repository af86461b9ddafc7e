"""What a compiled step's tasks run: the whole program as one callable, held in a worker's
memory between steps on a cluster, and one group of it on pargraph's threads."""

from __future__ import annotations

from typing import Any

from pargraph.engine.threads import run_on_threads
from pargraph.runtime import LIT, FusedTask, straight_line


class WholeProgram:
    """A compiled step's group tasks as one cluster task, run on the worker's threads as
    :func:`threads.run_on_threads` runs them locally: where one worker process would run
    every group anyway, this saves a scheduler round trip between dependent groups. Takes
    the program's slots; returns the values of its outputs (``unpack``), in order.
    ``recipes[g]``: group ``g``'s arguments, each ``(True, group)`` (its tuple) or
    ``(False, slot)``, as :attr:`Program.recipes`.

    It travels to the cluster once and stays in a worker's memory (:func:`run_held`): each
    step sends the call's numbers, which ``literals`` ``(group, member, position, symbol)``
    and ``attributes`` ``(group, member, name, symbol)`` say where to write, and the worker
    runs its groups as straight-line code made at its first call there."""

    __slots__ = ("tasks", "recipes", "unpack", "threads", "literals", "attributes", "seen",
                 "generated")

    def __init__(self, tasks: list[FusedTask], recipes: list, unpack: list,
                 threads: int, literals: list = (), attributes: list = ()) -> None:
        self.tasks, self.recipes, self.unpack, self.threads = tasks, recipes, unpack, threads
        self.literals, self.attributes = list(literals), list(attributes)
        self.seen: list | None = None
        self.generated = False

    def __getstate__(self) -> tuple:
        return (self.tasks, self.recipes, self.unpack, self.threads, self.literals,
                self.attributes)

    def __setstate__(self, state: tuple) -> None:
        self.__init__(*state)

    def __call__(self, *slots: Any) -> tuple:
        graph = {g: WholeGroup(self, g, slots) for g in range(len(self.tasks))}
        wanted = sorted({g for g, _ in self.unpack})
        done = dict(zip(wanted, run_on_threads(graph, wanted, self.threads)))
        return tuple(done[g][e] for g, e in self.unpack)

    def bind(self, symbols: list | None) -> None:
        """Write this call's numbers into the members' literals and attributes."""
        if symbols is None or symbols == self.seen:
            return
        for g, j, position, symbol in self.literals:
            self.tasks[g].sources[j][position] = (LIT, symbols[symbol])
        for g, j, name, symbol in self.attributes:
            member = self.tasks[g].nodes[j]
            member.attrs = {**member.attrs, name: symbols[symbol]}
        self.seen = symbols

    def generate(self) -> None:
        """Each group's straight-line code, reading literals and attributes at each run."""
        if not self.generated:
            for task in self.tasks:
                if task.straight is None:
                    task.straight = straight_line(task, per_run=True)
            self.generated = True

    def __repr__(self) -> str:
        return f"WholeProgram({len(self.tasks)} groups)"


def run_held(program: WholeProgram, symbols: list | None, *slots: Any) -> tuple:
    """A step of a :class:`WholeProgram` held in this worker's memory: its numbers bound,
    its groups run on the step's slots."""
    program.bind(symbols)
    program.generate()
    return program(*slots)


class WholeGroup:
    """One group of a :class:`WholeProgram`, as :func:`threads.run_on_threads` runs it."""

    __slots__ = ("program", "group", "slots", "dependencies")

    def __init__(self, program: WholeProgram, group: int, slots: tuple) -> None:
        self.program, self.group, self.slots = program, group, slots
        self.dependencies = [v for is_group, v in program.recipes[group] if is_group]

    def __call__(self, done: dict) -> Any:
        slots = self.slots
        return self.program.tasks[self.group](*[done[v] if is_group else slots[v]
                                                for is_group, v in
                                                self.program.recipes[self.group]])
