"""Many processes' stacks merged into one tree with counts, the way LLNL's STAT groups ranks.

Theory of operation
-------------------
The input is the ``processes`` list of the hub's ``/api/stacks`` answer: one entry per
process (its record, ``answered``, ``reason``, ``threads``), each thread's ``frames``
outermost first. Every thread of every process that answered is a *member* of the tree. A
member walks down from the root, one node per frame; members whose frames agree share the
nodes, so the tree has one path per distinct stack and each node counts who is on it.

What "agree" means (the node's key):

- **Inner frames** (every frame but the innermost) merge on ``(file, function)``: the same
  function calling out from different lines is one node, and the lines it was seen at are
  kept (``lines``). A node then branches only where the processes really went different
  ways (into different callees), so a straggler shows as a sibling branch under the common
  caller rather than as a second copy of the whole prefix. (STAT's default merges on the
  function too.)
- **The innermost frame** (where the thread is now) merges on ``(file, function, line)``:
  two ranks in the same function at different lines are not at the same place, and telling
  them apart is the point. So a leaf node always has a line and never has children; an
  inner node has ``line`` None and always has children. A thread sitting in ``f`` at line 7
  and another one in ``f`` calling ``g`` are two sibling nodes (``f:7`` and ``f -> g``).

*Odd groups* are odd among *peers*: processes doing the same job (:mod:`raydebug.peer_groups`), the
same Ray task or actor method, or the ranks of one job. A driver is not the peer of its
workers, nor an idle worker of a busy one: their stacks differ by nature, and marking them
would bury the one stuck task. So, among siblings (the children of one node, or the roots),
a child is ``odd`` when, for some peer group, it holds fewer of the group's processes than
the group's largest sibling and at most ``odd_share`` (a third by default) of the group's
processes at the parent: three ranks waiting on a lock among 64 in ``allreduce``, one
``shard`` task of eight stuck elsewhere. ``odd_among`` names those groups. The mark is on
the node where the group splits off; a renderer highlights it and what is below it. A group
all on one child, or split in equal parts, is never odd there.

A process read from outside (an entry with ``outside``, see :mod:`raydebug.outside_stacks`)
is in the tree like the others; its nodes say so (``outside``, and in their label).
Processes that did not answer in time (``answered`` false) are not in the tree: they are
listed apart (:attr:`StackTree.not_answering`) with their one-line reason. A process that
answered without a single Python thread is listed in :attr:`StackTree.no_threads`.

Everything here is pure: plain data in, plain data out (:meth:`StackTree.to_dict`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .peer_groups import peer_group

TREE_VERSION = 1
ODD_SHARE = 1 / 3  # a group of at most this share of its parent's processes can be odd
MAX_LOCAL_NAMES = 20  # locals kept per node in to_dict() (the first seen)
MAX_LOCAL_VALUES = 5  # distinct values kept per local name, most frequent first
WHO_SHORT = 30  # a label names its processes when that takes at most this many characters


@dataclass(frozen=True)
class ProcessRef:
    """Who a member belongs to: the hub's process id, its pid, host and rank (the ``RANK``
    label as an int, None when absent or not a number), its :func:`peer_group`, and how
    its stacks were read from outside (``outside``: ``py-spy``; "" when it answered)."""

    id: str
    pid: int | None
    host: str
    rank: int | None
    peers: str = ""
    outside: str = ""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ProcessRef:
        labels = record.get("labels") or {}
        pid = record.get("pid")
        return cls(id=str(record.get("id") or f"pid-{pid}"),
                   pid=pid if isinstance(pid, int) else None,
                   host=str(record.get("node_ip") or record.get("host") or ""),
                   rank=_as_int(labels.get("RANK", labels.get("rank"))),
                   peers=peer_group(record))

    def to_dict(self) -> dict[str, Any]:
        return {"process": self.id, "pid": self.pid, "host": self.host, "rank": self.rank}


@dataclass(frozen=True)
class Member:
    """One thread of one process: what the tree counts."""

    process: ProcessRef
    thread: int
    thread_name: str


@dataclass
class StackNode:
    """One frame shared by ``members`` (see the module docstring for what shares a node).

    ``line`` is None for an inner node; ``lines`` are the lines its members were at;
    ``code`` is the source line when they were all at the same line, else ``""``."""

    file: str
    function: str
    line: int | None
    lines: set[int] = field(default_factory=set)
    code: str = ""
    members: list[Member] = field(default_factory=list)
    children: dict[tuple[str, str, int | None], StackNode] = field(default_factory=dict)
    odd: bool = False
    odd_among: list[str] = field(default_factory=list)  # the peer groups it is odd in
    # name -> repr -> number of threads whose frame held it (only when locals were asked)
    locals: dict[str, Counter[str]] = field(default_factory=dict)
    _codes: dict[int, str] = field(default_factory=dict, repr=False)
    _processes: list[ProcessRef] | None = field(default=None, repr=False)  # once merged

    @property
    def is_leaf(self) -> bool:
        return self.line is not None

    def processes(self) -> list[ProcessRef]:
        """The distinct processes on this node, in (rank, pid, id) order."""
        if self._processes is None:  # not counted yet: a tree still being merged
            unique = {member.process.id: member.process for member in self.members}
            return sorted(unique.values(), key=_process_order)
        return self._processes

    def process_count(self) -> int:
        return len(self.processes())

    def ordered_children(self) -> list[StackNode]:
        """Children with the most processes first; ties by file, function, line (stable)."""
        return sorted(self.children.values(),
                      key=lambda child: (-child.process_count(), child.file, child.function,
                                         child.line if child.line is not None else -1))

    def label(self) -> str:
        """What a renderer writes next to the node: ``61 processes here`` at a leaf,
        ``3 processes: ranks 7, 19, 44`` elsewhere; the processes are named when the node is
        odd or naming them is short (see :func:`describe_processes`)."""
        processes = self.processes()
        label = describe_group(processes, len(self.members), here=self.is_leaf,
                               name_them=self.odd)
        outside = sorted({p.outside for p in processes if p.outside})
        return label + (f" (read from outside by {', '.join(outside)})" if outside else "")

    def to_dict(self, with_members: bool = True) -> dict[str, Any]:
        """This node as JSON (see :meth:`StackTree.to_dict` for the shape)."""
        processes = self.processes()
        node: dict[str, Any] = {
            "function": self.function, "file": self.file, "line": self.line,
            "lines": sorted(self.lines), "code": self.code_line(),
            "leaf": self.is_leaf, "odd": self.odd, "odd_among": self.odd_among,
            "label": self.label(),
            "count": {"processes": len(processes), "threads": len(self.members)},
            "processes": [p.id for p in processes],
            "ranks": sorted({p.rank for p in processes if p.rank is not None}),
            "pids": [p.pid for p in processes],
        }
        outside = [p.id for p in processes if p.outside]
        if outside:
            node["outside"] = outside
        if self.locals:
            node["locals"] = _bounded_locals(self.locals)
        if self.is_leaf and with_members:
            node["members"] = [{"process": m.process.id, "thread": m.thread,
                                "name": m.thread_name} for m in self.members]
        node["children"] = [child.to_dict(with_members) for child in self.ordered_children()]
        return node

    def code_line(self) -> str:
        """The source line of this frame when its members were all at one line, else ``""``."""
        if len(self.lines) != 1:
            return ""
        return self._codes.get(next(iter(self.lines)), "")

    def walk(self) -> Iterable[StackNode]:
        """This node and every node under it, depth first in :meth:`ordered_children` order."""
        yield self
        for child in self.ordered_children():
            yield from child.walk()


@dataclass(frozen=True)
class Unanswered:
    """A selected process that is not in the tree, and why (the hub's one-line reason)."""

    process: ProcessRef
    reason: str


@dataclass
class StackTree:
    """The merged stacks: :attr:`root` (no frame of its own; its children are the
    outermost frames), and the processes that are not in it."""

    root: StackNode
    not_answering: list[Unanswered]
    no_threads: list[ProcessRef]
    odd_share: float = ODD_SHARE

    def to_dict(self) -> dict[str, Any]:
        """The tree as JSON, stable across releases of the same ``version``::

            {"version": 1,
             "odd_share": 0.333,                  # the threshold the marks used
             "count": {"processes": 64,           # answered, with at least one thread
                       "threads": 130, "not_answering": 2, "no_threads": 0,
                       "outside": 1},     # of the processes: read from outside (py-spy)
             "root": NODE,                        # function "", file "", line null
             "not_answering": [{"process": "p..", "pid": 12, "host": "..", "rank": 3,
                                "reason": "no answer within 2 s"}],
             "no_threads": [{"process": .., "pid": .., "host": .., "rank": ..}]}

            NODE = {"function": "step", "file": "/x/job.py",
                    "line": 12 | null,            # null: an inner frame (merged on function)
                    "lines": [12, 15],            # lines its members were at
                    "code": "run()",              # the source line if one line, else ""
                    "leaf": bool,                 # innermost frame: line set, no children
                    "odd": bool,                  # a minority of its peers
                    "odd_among": ["task shard of job 01000000"],   # of these peer groups
                    "label": "3 processes here: ranks 7, 19, 44",
                    "count": {"processes": 3, "threads": 3},
                    "processes": ["p..", ..],     # ids, in rank then pid order
                    "ranks": [7, 19, 44],         # the RANK labels that are numbers
                    "pids": [..],                 # one per process, same order as processes
                    "locals": {"i": [{"value": "3", "threads": 61}, ..]},   # with --locals
                    "outside": ["p..", ..],       # when some were read from outside
                    "members": [{"process": "p..", "thread": 1402, "name": "MainThread"}],
                                                  # leaves only: every thread that is here
                    "children": [NODE, ..]}       # most processes first

        ``locals`` keeps at most :data:`MAX_LOCAL_NAMES` names per node and
        :data:`MAX_LOCAL_VALUES` values per name (most frequent first); ``members`` of the
        root and inner nodes are the union of their leaves'.
        """
        return {
            "version": TREE_VERSION,
            "odd_share": round(self.odd_share, 3),
            "count": {"processes": self.root.process_count(),
                      "threads": len(self.root.members),
                      "not_answering": len(self.not_answering),
                      "no_threads": len(self.no_threads),
                      "outside": sum(1 for p in self.root.processes() if p.outside)},
            "root": self.root.to_dict(),
            "not_answering": [{**u.process.to_dict(), "reason": u.reason}
                              for u in self.not_answering],
            "no_threads": [p.to_dict() for p in self.no_threads],
        }


def merge_stacks(answers: Iterable[Mapping[str, Any]], odd_share: float = ODD_SHARE
                 ) -> StackTree:
    """Merge the ``processes`` entries of a ``/api/stacks`` answer into one tree (see the
    module docstring). Tolerates missing fields (a frame without ``line`` is at line 0);
    never raises on well-formed JSON of the contract's shape."""
    root = StackNode(file="", function="", line=None)
    not_answering: list[Unanswered] = []
    no_threads: list[ProcessRef] = []
    # In (rank, pid, id) order from the start, so every node's members are in that order
    # too: a node's processes need no sorting of their own (10,000 processes, 20 frames).
    ordered = sorted(((ProcessRef.from_record(answer.get("process") or {}), answer)
                      for answer in answers), key=lambda pair: _process_order(pair[0]))
    for process, answer in ordered:
        if answer.get("outside"):
            process = replace(process, outside=str(answer["outside"]))
        if not answer.get("answered", False):
            not_answering.append(Unanswered(process, str(answer.get("reason")
                                                         or "did not answer")))
            continue
        threads = answer.get("threads") or []
        if not threads:
            no_threads.append(process)
        for thread in threads:
            member = Member(process, _as_int(thread.get("id")) or 0,
                            str(thread.get("name") or ""))
            _add(root, member, thread.get("frames") or [])
    _finish(root, odd_share)
    return StackTree(root, not_answering, no_threads, odd_share)


NO_FRAME = {"file": "", "function": "(no Python frame)", "line": 0}


def _add(root: StackNode, member: Member, frames: Sequence[Mapping[str, Any]]) -> None:
    root.members.append(member)
    node = root
    frames = frames or [NO_FRAME]
    last = len(frames) - 1
    for depth, frame in enumerate(frames):
        file = str(frame.get("file") or "")
        function = str(frame.get("function") or "")
        line = _as_int(frame.get("line")) or 0
        key = (file, function, line if depth == last else None)
        child = node.children.get(key)
        if child is None:
            child = node.children[key] = StackNode(file, function, key[2])
        child.members.append(member)
        child.lines.add(line)
        child._codes.setdefault(line, str(frame.get("code") or ""))
        for name, value in (frame.get("locals") or {}).items():
            child.locals.setdefault(str(name), Counter())[str(value)] += 1
        node = child


def _finish(node: StackNode, odd_share: float) -> None:
    """Count each node's processes once, and mark the children odd among their peers
    (module docstring)."""
    node._processes = list({m.process.id: m.process for m in node.members}.values())
    children = list(node.children.values())
    for child in children:
        _finish(child, odd_share)
    if len(children) > 1:
        here = Counter(process.peers for process in node.processes())
        counts = [Counter(process.peers for process in child.processes())
                  for child in children]
        largest = {group: max(count[group] for count in counts) for group in here}
        for child, count in zip(children, counts, strict=True):
            child.odd_among = sorted(group for group, n in count.items()
                                     if n < largest[group] and n <= odd_share * here[group])
            child.odd = bool(child.odd_among)


def _bounded_locals(values: dict[str, Counter[str]]) -> dict[str, list[dict[str, Any]]]:
    bounded: dict[str, list[dict[str, Any]]] = {}
    for name in list(values)[:MAX_LOCAL_NAMES]:
        bounded[name] = [{"value": value, "threads": threads}
                         for value, threads in values[name].most_common(MAX_LOCAL_VALUES)]
    return bounded


def _process_order(process: ProcessRef) -> tuple[int, int, int, str]:
    return (process.rank is None, process.rank if process.rank is not None else 0,
            process.pid or 0, process.id)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def format_numbers(numbers: Iterable[int]) -> str:
    """``0-5, 7, 19-20``: sorted, distinct, runs of three or more as ranges."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f"{ordered[start]}-{ordered[end]}")
        else:
            parts.extend(str(n) for n in ordered[start:end + 1])
        start = end + 1
    return ", ".join(parts)


def format_ranks(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 7, 19, 44``, ``ranks 0-5, 9``."""
    ordered = sorted(set(ranks))
    return f"rank{'s' if len(ordered) != 1 else ''} {format_numbers(ordered)}"


def describe_processes(processes: Sequence[ProcessRef]) -> str:
    """Who these processes are: their ranks, and pids for those without one
    (``ranks 0-3; pid 4242``)."""
    ranks = [p.rank for p in processes if p.rank is not None]
    pids = [p.pid for p in processes if p.rank is None and p.pid is not None]
    parts = []
    if ranks:
        parts.append(format_ranks(ranks))
    if pids:
        parts.append(f"pid{'s' if len(set(pids)) != 1 else ''} {format_numbers(pids)}")
    return "; ".join(parts)


def describe_group(processes: Sequence[ProcessRef], threads: int, here: bool = False,
                   name_them: bool = False) -> str:
    """``61 processes here``, ``3 processes here: ranks 7, 19, 44``, ``1 process: pid 42``,
    with ``(N threads)`` when more threads than processes are on it. The processes are
    named when ``name_them`` (an odd group) or when that takes at most :data:`WHO_SHORT`
    characters."""
    count = len(processes)
    text = f"{count} process{'es' if count != 1 else ''}{' here' if here else ''}"
    if threads > count:
        text += f" ({threads} threads)"
    who = describe_processes(processes)
    if who and (name_them or len(who) <= WHO_SHORT):
        text += f": {who}"
    return text
