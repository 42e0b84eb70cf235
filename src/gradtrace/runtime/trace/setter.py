"""A module's setter method: the object it stores came from its caller.

# NOTE [setter stores what it is handed]
A replacement made in a method of the module it changes names that method's assignment
(NOTE [replaced after the optimizer]: the module re-creates its own parameter there). A
setter is not such a method: ``def set_input_embeddings(self, value): self.embeddings =
value`` stores the object its caller built and handed it, and does what it is for whenever it
is called; the decision that came after the optimizer was built is the caller's call
(``model.set_input_embeddings(reduced)`` in a context manager that swaps the embedding for
training). Run-time fact: the object registered is one of the method's own arguments (the
same object, not one built from it). The line named is then the user frame that called the
method (library frames in between are skipped: a library's helper that calls the setter was
itself called by the user's line); with no user caller the assignment stays.
"""
from __future__ import annotations

from typing import Any

from gradtrace.runtime.frames import Site


def handed_in(frame: Any, value: Any) -> bool:
    """Whether ``value`` is one of the arguments (other than ``self``) of ``frame``."""
    if frame is None:
        return False
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    if n < 2:
        return False
    local = frame.f_locals
    return any(local.get(name) is value for name in code.co_varnames[1:n])


def caller_site(stack: Any) -> Site:
    """The caller of the innermost user frame of ``stack`` (ids, codes, lines; innermost
    first), or that frame when it has no user caller."""
    _, code, line = stack[1] if len(stack) > 1 else stack[0]
    return Site(code.co_filename, line, code.co_name)
