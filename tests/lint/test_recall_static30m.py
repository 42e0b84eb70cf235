"""Session 30's mutation-study fixes (docs/triage/static30m.md): the facts the loss tracers
misread, each as a buggy twin real torch shows the bug on and a correct look-alike, through
the checker and on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import types
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
data = TensorDataset(torch.randn(6, 4), torch.randn(6, 2), torch.ones(6, 2))
'''
NO_GRAD = (RuntimeError, "does not require grad")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT107: `criterion = cal_loss` names the file's loss function, which holds no weights:
    # the detached prediction is the only path from the model (M5's dgcnn shape). Look-alike:
    # the target detached through the same alias
    "loss-function-through-an-alias": (Shape("""
        def cal_loss(pred, y):
            return ((pred - y) ** 2).mean()

        def train(model, loader, opt):
            criterion = cal_loss
            for x, y, _ in loader:
                opt.zero_grad()
                loss = criterion(model(x), y.detach())
                loss.backward()
                opt.step()

        model = nn.Linear(4, 2)
        train(model, DataLoader(data, batch_size=3), torch.optim.SGD(model.parameters(), lr=0.1))
        """, "GT107", holds="model.weight.grad is not None"), Shape("""
        def cal_loss(pred, y):
            return ((pred - y) ** 2).mean()

        def train(model, loader, opt):
            criterion = cal_loss
            for x, y, _ in loader:
                opt.zero_grad()
                loss = criterion(model(x).detach(), y)
                loss.backward()
                opt.step()

        model = nn.Linear(4, 2)
        train(model, DataLoader(data, batch_size=3), torch.optim.SGD(model.parameters(), lr=0.1))
        """, "GT107", line=8, raises=NO_GRAD)),
    # GT107: `next(it)` with `it = iter(feed)` and `feed` a DataLoader hands out data, as a
    # `for` over it does: the mask multiplied into the loss is no path from the model (M5/M15's
    # CORL decision-transformer shape). Look-alike: the target detached
    "batch-drawn-with-next": (Shape("""
        def train(model, opt, steps):
            feed = DataLoader(data, batch_size=3)
            it = iter(feed)
            for _ in range(steps):
                batch = next(it)
                x, y, mask = [b.float() for b in batch]
                out = model(x)
                loss = F.mse_loss(out, y.detach(), reduction="none")
                loss = (loss * mask).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

        model = nn.Linear(4, 2)
        train(model, torch.optim.SGD(model.parameters(), lr=0.1), 2)
        """, "GT107", holds="model.weight.grad is not None"), Shape("""
        def train(model, opt, steps):
            feed = DataLoader(data, batch_size=3)
            it = iter(feed)
            for _ in range(steps):
                batch = next(it)
                x, y, mask = [b.float() for b in batch]
                out = model(x)
                loss = F.mse_loss(out.detach(), y, reduction="none")
                loss = (loss * mask).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

        model = nn.Linear(4, 2)
        train(model, torch.optim.SGD(model.parameters(), lr=0.1), 2)
        """, "GT107", line=8, raises=NO_GRAD)),
    # GT201: the batch moved by a comprehension (`[b.to(cfg.device) for b in batch]`) is data,
    # and a move's device argument carries no graph: the forward under `inference_mode` is the
    # loss's only source (M21's shape). Look-alike: a teacher's target under `no_grad`, the
    # prediction with grad
    "forward-under-inference-mode-batch-comprehension": (Shape("""
        def train(model, teacher, loader, opt, cfg):
            for batch in loader:
                x, y, mask = [b.to(cfg.device) for b in batch]
                with torch.no_grad():
                    target = teacher(x)
                loss = F.mse_loss(model(x), target, reduction="none")
                loss = (loss * mask).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

        model, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
        train(model, teacher, DataLoader(data, batch_size=3),
              torch.optim.SGD(model.parameters(), lr=0.1), types.SimpleNamespace(device="cpu"))
        """, "GT201", holds="model.weight.grad is not None"), Shape("""
        def train(model, loader, opt, cfg):
            for batch in loader:
                x, y, mask = [b.to(cfg.device) for b in batch]
                with torch.inference_mode():
                    out = model(x)
                loss = F.mse_loss(out, y, reduction="none")
                loss = (loss * mask).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

        model = nn.Linear(4, 2)
        train(model, DataLoader(data, batch_size=3),
              torch.optim.SGD(model.parameters(), lr=0.1), types.SimpleNamespace(device="cpu"))
        """, "GT201", line=4, raises=NO_GRAD)),
    # GT105: `.data` on the model output through the same alias (M15's shape). Look-alike: a
    # teacher's output `.data` used as the target
    "data-on-output-through-an-alias": (Shape("""
        def cal_loss(pred, y):
            return ((pred - y) ** 2).mean()

        def train(model, teacher, loader, opt):
            criterion = cal_loss
            for x, y, _ in loader:
                opt.zero_grad()
                loss = criterion(model(x), teacher(x).data)
                loss.backward()
                opt.step()

        model, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
        train(model, teacher, DataLoader(data, batch_size=3),
              torch.optim.SGD(model.parameters(), lr=0.1))
        """, "GT105", holds="model.weight.grad is not None"), Shape("""
        def cal_loss(pred, y):
            return ((pred - y) ** 2).mean()

        def train(model, loader, opt):
            criterion = cal_loss
            for x, y, _ in loader:
                opt.zero_grad()
                out = model(x).data
                loss = criterion(out, y)
                loss.backward()
                opt.step()

        model = nn.Linear(4, 2)
        train(model, DataLoader(data, batch_size=3), torch.optim.SGD(model.parameters(), lr=0.1))
        """, "GT105", line=8, raises=NO_GRAD)),
    # GT105: `replay_data` holds the model's input (`self.q_net(replay_data.observations)`),
    # so its other fields (`replay_data.rewards`) are data, not a path from the model: the
    # `.data` on the Q-values cuts the only one (M15's stable-baselines3 DQN shape). Look-alike:
    # a target network's output `.data` in the target
    "batch-object-fields": (Shape("""
        class Buffer:
            def __init__(self):
                self.obs, self.rewards = torch.randn(6, 4), torch.randn(6, 2)

            def sample(self):
                return types.SimpleNamespace(observations=self.obs, rewards=self.rewards)

        class Agent:
            def __init__(self):
                self.q_net, self.q_target = nn.Linear(4, 2), nn.Linear(4, 2)
                self.replay_buffer = Buffer()
                self.optimizer = torch.optim.SGD(self.q_net.parameters(), lr=0.1)

            def train(self, steps):
                for _ in range(steps):
                    replay_data = self.replay_buffer.sample()
                    target = replay_data.rewards + 0.9 * self.q_target(replay_data.observations).data
                    loss = F.smooth_l1_loss(self.q_net(replay_data.observations), target)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

        agent = Agent()
        agent.train(2)
        """, "GT105", holds="agent.q_net.weight.grad is not None"),
                            Shape("""
        class Buffer:
            def __init__(self):
                self.obs, self.rewards = torch.randn(6, 4), torch.randn(6, 2)

            def sample(self):
                return types.SimpleNamespace(observations=self.obs, rewards=self.rewards)

        class Agent:
            def __init__(self):
                self.q_net, self.q_target = nn.Linear(4, 2), nn.Linear(4, 2)
                self.replay_buffer = Buffer()
                self.optimizer = torch.optim.SGD(self.q_net.parameters(), lr=0.1)

            def train(self, steps):
                for _ in range(steps):
                    replay_data = self.replay_buffer.sample()
                    current = self.q_net(replay_data.observations).data
                    loss = F.smooth_l1_loss(current, replay_data.rewards)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

        agent = Agent()
        agent.train(2)
        """, "GT105", line=17, raises=NO_GRAD)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
