"""Gradient checks for test suites: ``assert_gradients_flow`` and ``gradcheck_module``.

* :func:`assert_gradients_flow` runs one forward+backward and fails with one readable message
  listing every trainable parameter that got no gradient (and why), an all-zero one or a
  non-finite one, without changing the model's state.
* :func:`gradcheck_module` checks a custom layer's or ``autograd.Function``'s backward against
  finite differences on float64 copies, and names the input and output that disagree.

The pytest plugin (``pytest --gradtrace``, ``@pytest.mark.gradtrace``, the ``gradtrace_watch``
fixture) lives in :mod:`gradtrace.pytest_plugin`.
"""
from __future__ import annotations

from gradtrace.testing._explain import FlowResult, ParamProblem
from gradtrace.testing.flow import GradientFlowError, assert_gradients_flow
from gradtrace.testing.gradcheck import GradcheckFailure, gradcheck_module

__all__ = ["FlowResult", "GradcheckFailure", "GradientFlowError", "ParamProblem",
           "assert_gradients_flow", "gradcheck_module"]
