"""One test item for many small checks on shared data, every failing case named in its message.

A parametrized item costs ~3 ms of CPU across pytest, its xdist worker and the controller,
whatever it asserts (docs/triage/suite49.md); a file of thousands of one-assertion items (each
real-world case, each rule example) spends more on items than on checks. ``check_each`` runs
every case's check in one item, one case's failure never stops the next, and fails once with
each failing case's name and its own message: the assertion's text and pytest's explanation
(expected vs got) as the case's own item would have shown it, or the traceback of an exception.
"""
from __future__ import annotations

import traceback
from typing import Callable, Iterable, TypeVar

import pytest

T = TypeVar("T")


def check_each(cases: Iterable[tuple[str, T]], check: Callable[[T], object]) -> int:
    """``check(case)`` for every ``(name, case)``; fails listing each failing name and message.
    Returns the number of cases checked (a caller may assert it is not zero)."""
    failed: list[str] = []
    count = 0
    for name, case in cases:
        count += 1
        try:
            check(case)
        except (AssertionError, pytest.fail.Exception) as exc:
            failed.append(f"{name}: {exc}")
        except Exception:  # noqa: BLE001 - a crash in one case is that case's failure
            failed.append(f"{name}: {traceback.format_exc()}")
    if failed:
        pytest.fail(f"{len(failed)} of {count} cases failed:\n\n" + "\n\n".join(failed),
                    pytrace=False)
    return count
