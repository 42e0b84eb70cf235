"""xdist's `loadgroup` scheduling at a cost linear in the number of tests (tests/conftest.py's
`pytest_xdist_make_scheduler`).

Under `-n 2 --dist loadgroup` every test outside a group is a work unit of its own, and
pytest-xdist 3's LoadScopeScheduling keeps every unit it ever gave a worker: each finished test
counts the worker's pending tests by walking all of them (`_pending_of`), and each unit handed
out finds its tests' indexes with `list.index` over the whole collection. Both are quadratic in
the number of tests: at 11,029 tests the controlling process spent 20 s of CPU (5% of the
suite's) while the workers ran, on the same two cores. This scheduler hands out the same units
in the same order, under the same rule (a worker with two tests or fewer left gets the next
unit), and only keeps the count instead of recounting: a unit is forgotten once every test of it
has finished (a unit with nothing pending can change neither a count nor the test a crashed
worker was running), and each worker's collection is indexed once.
"""
from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadGroupScheduling


class LinearLoadGroupScheduling(LoadGroupScheduling):
    """LoadGroupScheduling whose per-test bookkeeping does not grow with the run."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._index: dict[Any, dict[str, int]] = {}

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        nodeid = self.registered_collections[node][item_index]
        scope = self._split_scope(nodeid)
        workload = self.assigned_work[node]
        unit = workload[scope]
        unit[nodeid] = True
        if False not in unit.values():  # the count (_pending_of) walks the units still open
            del workload[scope]
        self._reschedule(node)

    def _assign_work_unit(self, node: Any) -> None:
        assert self.workqueue
        scope, work_unit = self.workqueue.popitem(last=False)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        index = self._index.get(node)
        if index is None:
            index = self._index[node] = {}
            for i, nodeid in enumerate(self.registered_collections[node]):
                index.setdefault(nodeid, i)  # the first, as list.index
        node.send_runtest_some([index[nodeid] for nodeid, done in work_unit.items() if not done])

    def remove_node(self, node: Any) -> str | None:
        self._index.pop(node, None)
        return super().remove_node(node)


def linear_scheduler(config: Any, log: Any) -> LoadGroupScheduling | None:
    """:class:`LinearLoadGroupScheduling`, or None (xdist's own) when this xdist's scheduler
    lacks the state and methods the class above builds on (written for pytest-xdist 3.8)."""
    sched = LinearLoadGroupScheduling(config, log)
    state = ("workqueue", "assigned_work", "registered_collections")
    methods = ("_split_scope", "_reschedule", "_pending_of")
    if all(hasattr(sched, name) for name in state + methods):
        return sched
    return None
