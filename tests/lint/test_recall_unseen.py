"""Bugs injected into real training steps of research code (benchmarks/mutation_recall.py on
the repositories of docs/triage/unseen.md) that the checker missed, as shapes: each buggy twin
is reported on its line and fails on real torch as the finding says; each look-alike is
silent and trains."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""
ELEMENT0 = (RuntimeError, "does not require grad")

SHAPES: dict[str, Shape] = {
    # NOTE [batch siblings]: the targets come with the model's input from a batch helper
    "targets-from-a-batch-helper": Shape("""
        def get_batch(source, i):
            return source[i], torch.tensor([0, 1, 0])
        def train(model, criterion, optimizer, source):
            for i in range(2):
                data, targets = get_batch(source, i)
                output = model(data)
                loss = criterion(output.detach(), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        model = nn.Linear(4, 3)
        train(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), 0.1),
              torch.randn(2, 3, 4))
        """, "GT107", 7, ELEMENT0),
    # fields of a batch object whose `src` is the model's input (torchtext iterators)
    "targets-from-the-batch-object": Shape("""
        def train(model, iterator, optimizer):
            criterion = nn.CrossEntropyLoss().to("cpu")
            for i, batch in enumerate(iterator):
                src = batch.src
                trg = batch.trg
                output = model(src)
                loss = criterion(output.detach(), trg)
                loss.backward()
                optimizer.step()
        class Batch:
            def __init__(self):
                self.src, self.trg = torch.randn(3, 4), torch.tensor([0, 1, 2])
        model = nn.Linear(4, 3)
        train(model, [Batch()], torch.optim.SGD(model.parameters(), 0.1))
        """, "GT107", 7, ELEMENT0),
    # a loss object built inline and called at once
    "inline-loss-object": Shape("""
        def train(model, linear_classifier, optimizer, pairs):
            for (inp, target) in pairs:
                output = linear_classifier(model(inp))
                loss = nn.CrossEntropyLoss()(output.detach(), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        model, head = nn.Linear(4, 4), nn.Linear(4, 3)
        train(model, head, torch.optim.SGD(head.parameters(), 0.1),
              [(torch.randn(3, 4), torch.tensor([0, 1, 2]))])
        """, "GT107", 4, ELEMENT0),
    # TD3's critic update: the target detached on purpose, the rewards are data
    "td-target-detached-on-purpose": Shape("""
        class Buffer:
            def sample(self, n):
                return torch.randn(n, 3), torch.randn(n, 1), torch.randn(n, 1), torch.randn(n, 3)
        class Agent:
            def __init__(self, discount=0.99):
                self.critic, self.critic_target = nn.Linear(4, 1), nn.Linear(4, 1)
                self.discount = discount
                self.critic_optimizer = torch.optim.SGD(self.critic.parameters(), 0.1)
            def train(self, replay_buffer, batch_size=8):
                state, action, reward, next_state = replay_buffer.sample(batch_size)
                target_q = self.critic_target(torch.cat([next_state, action], 1))
                target_q = reward + (self.discount * target_q).detach()
                current_q = self.critic(torch.cat([state, action], 1))
                critic_loss = F.mse_loss(current_q, target_q)
                self.critic_optimizer.zero_grad()
                critic_loss.backward()
                self.critic_optimizer.step()
        agent = Agent()
        agent.train(Buffer())
        """, "GT107", holds="agent.critic.weight.grad is not None"),
    # the same step with the prediction detached too: named there, not at the target
    "td-prediction-detached": Shape("""
        class Buffer:
            def sample(self, n):
                return torch.randn(n, 3), torch.randn(n, 1), torch.randn(n, 1), torch.randn(n, 3)
        class Agent:
            def __init__(self, discount=0.99):
                self.critic, self.critic_target = nn.Linear(4, 1), nn.Linear(4, 1)
                self.discount = discount
                self.critic_optimizer = torch.optim.SGD(self.critic.parameters(), 0.1)
            def train(self, replay_buffer, batch_size=8):
                state, action, reward, next_state = replay_buffer.sample(batch_size)
                target_q = self.critic_target(torch.cat([next_state, action], 1))
                target_q = reward + (self.discount * target_q).detach()
                current_q = self.critic(torch.cat([state, action], 1))
                critic_loss = F.mse_loss(current_q.detach(), target_q)
                self.critic_optimizer.zero_grad()
                critic_loss.backward()
                self.critic_optimizer.step()
        Agent().train(Buffer())
        """, "GT107", 14, ELEMENT0),
    # the source of the unpacking is a model: its second output may carry a graph
    "outputs-of-a-model-unpacked": Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                h = self.fc(x)
                return h, h.pow(2).mean()
        def step(encoder, decoder, optimizer, x):
            z, reg = encoder(x)
            out = decoder(z)
            loss = F.mse_loss(out.detach(), reg.expand(3, 4))
            loss.backward()
        encoder, decoder = Encoder(), nn.Linear(4, 4)
        step(encoder, decoder, None, torch.randn(3, 4))
        """, "GT107", holds="encoder.fc.weight.grad is not None"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_is_judged_as_torch_behaves(name: str) -> None:
    judge(PRELUDE, SHAPES[name])
