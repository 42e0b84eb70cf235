"""pytorch-pfn-extras' `Reporter.report` after the fix: every reported tensor is stored as `value.detach()`, so the `LogReport` summaries add up plain values, keep no autograd graph between log triggers, and the metric that is reported but not part of the loss leaves nothing behind once the iteration ends.

source: https://github.com/pfnet/pytorch-pfn-extras/pull/49
kind: lookalike
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class Reporter:
    def __init__(self):
        self.observation = None

    @contextlib.contextmanager
    def scope(self, observation):
        old, self.observation = self.observation, observation
        yield
        self.observation = old

    def report(self, values):
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.detach()
            self.observation[key] = value


_reporter = Reporter()


def report(values):
    _reporter.report(values)


class Summary:
    def __init__(self):
        self._x, self._n = 0.0, 0

    def add(self, value):
        self._x += value
        self._n += 1

    def compute_mean(self):
        return self._x / self._n


class LogReport:
    def __init__(self, every=50):
        self.every, self.summaries, self.log = every, {}, []

    def __call__(self, observation, iteration):
        for key, value in observation.items():
            self.summaries.setdefault(key, Summary()).add(value)
        if iteration % self.every == 0:
            self.log.append({k: float(s.compute_mean()) for k, s in self.summaries.items()})
            self.summaries = {}


def retained_graph(summaries):
    """Autograd nodes reachable from the summaries' running sums, and their saved-tensor bytes (read only)."""
    seen, stack, saved = set(), [], 0
    for s in summaries.values():
        if isinstance(s._x, torch.Tensor) and s._x.grad_fn is not None:
            stack.append(s._x.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_"):
                try:
                    value = getattr(node, name)
                except RuntimeError:  # already freed by a backward
                    continue
                if isinstance(value, torch.Tensor):
                    saved += value.numel() * value.element_size()
        stack.extend(fn for fn, _ in node.next_functions)
    return len(seen), saved


model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
log_report = LogReport(every=50)
g = torch.Generator().manual_seed(0)
for iteration in range(1, 41):
    observation = {}
    with _reporter.scope(observation):
        x = torch.randn(32, 16, generator=g)
        target = torch.randn(32, 8, generator=g)
        output = model(x)
        loss = F.mse_loss(output, target)
        report({"train/loss": loss, "train/l1": F.l1_loss(output, target)})
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    log_report(observation, iteration)
nodes, saved = retained_graph(log_report.summaries)
print(f"after 40 iterations the summaries reach {nodes} autograd nodes holding {saved} bytes of saved tensors")
