"""Shapes that fired wrongly on the projects of docs/triage/unseen32c.md (session 32: course,
tutorial, book-companion and Kaggle code), each in another spelling than the project's and
next to a buggy twin that is still reported. The snippets run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # WZMIAOMIAO/deep-learning-for-image-processing (three ONNX export scripts, PyTorch's
    # ONNX tutorial's helper): `t.detach().cpu().numpy() if t.requires_grad else
    # t.cpu().numpy()`: the plain `.numpy()` runs only for a tensor that does not require
    # grad. Twin: the arms swapped: NumPy gets the tensor that requires grad
    "numpy-on-the-arm-where-the-tensor-does-not-require-grad": (Shape("""
        def as_array(t):
            if not t.requires_grad:
                return t.numpy()
            return t.detach().numpy()
        def to_numpy(t):
            return t.detach().cpu().numpy() if t.requires_grad else t.cpu().numpy()
        net = nn.Linear(3, 2)
        inp = torch.rand(1, 3, requires_grad=True)
        out = net(inp)
        arrays = [to_numpy(inp), to_numpy(out), as_array(out)]
        """, "GT116", holds="all(isinstance(a, np.ndarray) for a in arrays)"),
        Shape("""
        def to_numpy(t):
            return t.cpu().numpy() if t.requires_grad else t.detach().cpu().numpy()
        net = nn.Linear(3, 2)
        inp = torch.rand(1, 3, requires_grad=True)
        out = net(inp)
        arrays = [to_numpy(out)]
        """, "GT116", line=2, raises=(RuntimeError, "requires grad"))),
    # WZMIAOMIAO's yolov3_spp (train_utils/train_eval_utils.py): `accumulate` is a parameter
    # and `accumulate = 1` only in the warm-up branch: the `% accumulate` guard around the
    # step is periodic, the step is under it. Twin: the step outside that guard
    "period-of-a-parameter-set-to-one-in-a-branch": (Shape("""
        def train_one_epoch(model, opt, loader, epoch, accumulate, warmup=False):
            if epoch == 0 and warmup:
                accumulate = 1
            size = 0
            for i, (x, y) in enumerate(loader):
                ni = i + len(loader) * epoch
                if ni % accumulate == 0:
                    size = 4 + ni % 3
                loss = F.mse_loss(model(x), y) / accumulate
                loss.backward()
                if ni % accumulate == 0:
                    opt.step()
                    opt.zero_grad()
            return size
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        got = train_one_epoch(model, opt, [(torch.randn(2, 3), torch.randn(2, 1))] * 4, 1, 2)
        """, "GT519", holds="got >= 4"),
        Shape("""
        def train_one_epoch(model, opt, loader, epoch, accumulate, warmup=False):
            if epoch == 0 and warmup:
                accumulate = 1
            size = 0
            for i, (x, y) in enumerate(loader):
                ni = i + len(loader) * epoch
                if ni % accumulate == 0:
                    size = 4 + ni % 3
                loss = F.mse_loss(model(x), y) / accumulate
                loss.backward()
                opt.step()
                opt.zero_grad()
            return size
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        got = train_one_epoch(model, opt, [(torch.randn(2, 3), torch.randn(2, 1))] * 4, 1, 2)
        """, "GT519", line=11, holds="got >= 4")),
    # jeffheaton/app_deep_learning (t81_558_class_05_2_cnn.py): `model.train()` at the top of
    # each epoch, and the validation (which calls `model.eval()`) under `if i == len(steps) -
    # 1:` in the batch loop: on its last pass, nothing of the loop trains after it. Twin: the
    # validation every other batch: the batches after it train in eval mode
    "validation-on-the-last-pass-of-the-batch-loop": (Shape("""
        def validate(model, loader):
            model.eval()
            with torch.no_grad():
                return sum(F.mse_loss(model(x), y).item() for x, y in loader)
        model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = [(torch.randn(2, 3), torch.randn(2, 1))] * 3
        modes = []
        for epoch in range(2):
            steps = list(enumerate(loader))
            model.train()
            for i, (x, y) in steps:
                modes.append(model.training)
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if i == len(steps) - 1:
                    vloss = validate(model, loader)
        """, "GT516", holds="all(modes)"),
        Shape("""
        def validate(model, loader):
            model.eval()
            with torch.no_grad():
                return sum(F.mse_loss(model(x), y).item() for x, y in loader)
        model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = [(torch.randn(2, 3), torch.randn(2, 1))] * 3
        modes = []
        for epoch in range(2):
            steps = list(enumerate(loader))
            model.train()
            for i, (x, y) in steps:
                modes.append(model.training)
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if i % 2 == 0:
                    vloss = validate(model, loader)
        """, "GT516", line=19, holds="not all(modes)")),
    # philtabor/Youtube-Code-Repository (DDPG's and TD3's agents): `self.critic.optimizer`
    # is made in the critic's class over `self.parameters()`: the step changes the critic's
    # weights, not the agent's (`self`); `state = T.tensor(...).to(self.critic.device)` reads
    # no weight. The actor's loss is built after the step. Twin: the actor's loss is built
    # before the critic's step
    "optimizer-of-a-part-read-through-the-owner": (Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 1)
                self.optimizer = torch.optim.Adam(self.parameters())
                self.device = torch.device("cpu")
            def forward(self, s, a):
                return self.fc(torch.cat([s, a], 1))
        class Actor(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.optimizer = torch.optim.Adam(self.parameters())
                self.device = torch.device("cpu")
            def forward(self, s):
                return torch.tanh(self.fc(s))
        class Buffer:
            def sample(self, n):
                return np.random.randn(n, 4), np.random.randn(n, 2), np.random.randn(n, 1)
        class Agent:
            def __init__(self):
                self.actor, self.critic = Actor(), Critic()
                self.memory = Buffer()
            def learn(self):
                state, action, target = self.memory.sample(8)
                state = torch.tensor(state, dtype=torch.float).to(self.critic.device)
                action = torch.tensor(action, dtype=torch.float).to(self.critic.device)
                self.critic.eval()
                critic_value = self.critic.forward(state, action)
                self.critic.train()
                self.critic.optimizer.zero_grad()
                F.mse_loss(critic_value, torch.tensor(target, dtype=torch.float)).backward()
                self.critic.optimizer.step()
                self.critic.eval()
                self.actor.optimizer.zero_grad()
                mu = self.actor.forward(state)
                actor_loss = torch.mean(-self.critic.forward(state, mu))
                actor_loss.backward()
                self.actor.optimizer.step()
        agent = Agent()
        for _ in range(2):
            agent.learn()
        """, "GT609"),
        Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 1)
                self.optimizer = torch.optim.Adam(self.parameters())
            def forward(self, s, a):
                return self.fc(torch.cat([s, a], 1))
        class Actor(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.optimizer = torch.optim.Adam(self.parameters())
            def forward(self, s):
                return torch.tanh(self.fc(s))
        class Agent:
            def __init__(self):
                self.actor, self.critic = Actor(), Critic()
            def learn(self, state, action, target):
                state = torch.tensor(state, dtype=torch.float)
                action = torch.tensor(action, dtype=torch.float)
                critic_value = self.critic.forward(state, action)
                actor_loss = torch.mean(-self.critic.forward(state, self.actor.forward(state)))
                self.critic.optimizer.zero_grad()
                F.mse_loss(critic_value, torch.tensor(target, dtype=torch.float)).backward()
                self.critic.optimizer.step()
                self.actor.optimizer.zero_grad()
                actor_loss.backward()
                self.actor.optimizer.step()
        agent = Agent()
        agent.learn(np.random.randn(8, 4), np.random.randn(8, 2), np.random.randn(8, 1))
        """, "GT609", line=25, raises=(RuntimeError, "modified by an inplace operation"))),
    # jeffheaton/app_deep_learning (t81_558_class_04_3_kfold.py): `with torch.no_grad():
    # oos_pred = model(x_test)`, then `torch.sqrt(loss_fn(oos_pred, y_test)).item()` outside
    # the block, with a backward later in the script: the prediction holds no graph, nothing
    # differentiates the square root. Twin: the prediction made with grad on and the RMSE
    # trained on
    "square-root-of-an-error-of-a-no-grad-prediction": (Shape("""
        model = nn.Linear(4, 1)
        loss_fn = nn.MSELoss()
        x_test, y_test = torch.randn(8, 4), torch.randn(8, 1)
        with torch.no_grad():
            pred = model(x_test)
        score = torch.sqrt(loss_fn(pred, y_test)).item()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = loss_fn(model(x_test), y_test)
        loss.backward()
        opt.step()
        """, "GT753", holds="score > 0"),
        Shape("""
        model = nn.Linear(4, 1)
        loss_fn = nn.MSELoss()
        x_test, y_test = torch.randn(8, 4), torch.randn(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        pred = model(x_test)
        rmse = torch.sqrt(loss_fn(pred, y_test))
        rmse.backward()
        opt.step()
        """, "GT753", line=6, holds="rmse.item() > 0")),
    # dvgodoy/PyTorchStepByStep (Chapter06): a notebook's cells rebind `dummy_scheduler`: a
    # `StepLR` stepped without an argument, then a `ReduceLROnPlateau` built later under the
    # same name. Twin: the plateau built first and stepped without its metric
    "steps-of-an-earlier-scheduler-of-the-same-name": (Shape("""
        opt = torch.optim.SGD([nn.Parameter(torch.randn(1))], lr=0.01)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
        for epoch in range(4):
            opt.step()
            sched.step()
        opt = torch.optim.SGD([nn.Parameter(torch.randn(1))], lr=0.01)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=4, factor=0.1)
        sched.step(0.5)
        """, "GT531"),
        Shape("""
        opt = torch.optim.SGD([nn.Parameter(torch.randn(1))], lr=0.01)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=4, factor=0.1)
        for epoch in range(4):
            opt.step()
            sched.step()
        """, "GT531", line=5, raises=(TypeError, "metrics"))),
    # tsmatz/reinforcement-learning-tutorials (03-actor-critic): the critic's values are fit
    # and stepped, then computed again under `torch.no_grad()` before the advantage: the
    # advantage holds no graph of the critic. Twin: the advantage from the fitted values
    "advantage-from-values-recomputed-without-grad": (Shape("""
        critic, actor = nn.Linear(4, 1), nn.Linear(4, 2)
        opt1 = torch.optim.SGD(critic.parameters(), lr=0.1)
        opt2 = torch.optim.SGD(actor.parameters(), lr=0.1)
        states, returns = torch.randn(8, 4), torch.randn(8)
        actions = torch.randint(0, 2, (8,))
        opt1.zero_grad()
        values = critic(states).squeeze(1)
        F.mse_loss(values, returns).backward()
        opt1.step()
        with torch.no_grad():
            values = critic(states).squeeze(1)
        opt2.zero_grad()
        advantages = returns - values
        log_probs = -F.cross_entropy(actor(states), actions, reduction="none")
        pi_loss = -log_probs * advantages
        pi_loss.sum().backward()
        opt2.step()
        """, "GT767", holds="critic.weight.grad is not None"),
        Shape("""
        critic, actor = nn.Linear(4, 1), nn.Linear(4, 2)
        opt = torch.optim.SGD([*critic.parameters(), *actor.parameters()], lr=0.1)
        states, returns = torch.randn(8, 4), torch.randn(8)
        actions = torch.randint(0, 2, (8,))
        opt.zero_grad()
        values = critic(states).squeeze(1)
        vf_loss = F.mse_loss(values, returns)
        advantages = returns - values
        log_probs = -F.cross_entropy(actor(states), actions, reduction="none")
        pi_loss = -log_probs * advantages
        (pi_loss.sum() + vf_loss).backward()
        opt.step()
        """, "GT767", line=8, holds="critic.weight.grad is not None")),
    # tsmatz/reinforcement-learning-tutorials (05-ddpg): the target networks are globals
    # frozen at the module level (`_ = q_target.requires_grad_(False)`, a notebook building
    # them again in a later cell and freezing them again), and the file unfreezes another
    # model's parameters only: the target value holds no graph, both critics' backwards run.
    # Twin: the target network not frozen: the second backward goes through its freed graph
    "target-network-frozen-at-the-module-level": (Shape("""
        q1, q2 = nn.Linear(4, 1), nn.Linear(4, 1)
        q_target = nn.Linear(4, 1)
        _ = q_target.requires_grad_(False)
        q_target = nn.Linear(4, 1)
        _ = q_target.requires_grad_(False)
        opt1 = torch.optim.Adam(q1.parameters())
        opt2 = torch.optim.Adam(q2.parameters())
        def optimize(states, next_states, rewards):
            q_tgt = rewards + 0.99 * q_target(next_states)
            opt1.zero_grad()
            F.mse_loss(q1(states), q_tgt).backward()
            opt1.step()
            opt2.zero_grad()
            loss2 = F.mse_loss(q2(states), q_tgt)
            loss2.backward()
            opt2.step()
            for p in q1.parameters():
                p.requires_grad = False
            (-q1(states)).sum().backward() if False else None
            for p in q1.parameters():
                p.requires_grad = True
        for _ in range(2):
            optimize(torch.randn(8, 4), torch.randn(8, 4), torch.randn(8, 1))
        """, "GT509", holds="q2.weight.grad is not None"),
        Shape("""
        q1, q2 = nn.Linear(4, 1), nn.Linear(4, 1)
        q_target = nn.Linear(4, 1)
        opt1 = torch.optim.Adam(q1.parameters())
        opt2 = torch.optim.Adam(q2.parameters())
        def optimize(states, next_states, rewards):
            q_tgt = rewards + 0.99 * q_target(next_states)
            opt1.zero_grad()
            F.mse_loss(q1(states), q_tgt).backward()
            opt1.step()
            opt2.zero_grad()
            loss2 = F.mse_loss(q2(states), q_tgt)
            loss2.backward()
            opt2.step()
        optimize(torch.randn(8, 4), torch.randn(8, 4), torch.randn(8, 1))
        """, "GT509", line=11, raises=(RuntimeError, "backward through the graph a second time"))),
    # phlippe/uvadlc_notebooks (JAX tutorial 6): `apply_resnet = jax.jit(lambda imgs: ...)`
    # named like a model, its outputs collected in a list: another array library's function
    # makes no torch graph (here NumPy's `np.vectorize`, jax is not installed). Twin: a torch
    # model's outputs collected with grad on
    "outputs-of-another-librarys-function-named-like-a-model": (Shape("""
        apply_resnet = np.vectorize(lambda v: 2.0 * v)
        def extract_features(batches):
            feats_all = []
            for imgs in batches:
                feats = apply_resnet(imgs)
                feats_all.append(feats.mean(axis=1))
            return np.concatenate(feats_all, axis=0)
        out = extract_features([np.ones((2, 3))] * 3)
        """, "GT505", holds="out.shape == (6,)"),
        Shape("""
        resnet = nn.Linear(3, 3)
        def extract_features(batches):
            feats_all = []
            for imgs in batches:
                feats = resnet(imgs)
                feats_all.append(feats.mean(dim=1))
            return torch.cat(feats_all, dim=0)
        out = extract_features([torch.ones(2, 3)] * 3)
        """, "GT505", line=6, holds="out.grad_fn is not None")),
    # dvgodoy/PyTorchStepByStep (Chapter04, Chapter11: notebooks): `torch.sigmoid(z)` as a
    # cell's last line shows a value; the next cells only show other values of `z` (or define
    # functions that never name it) before a cell makes a new `z`: nothing keeps a value an
    # update could have changed. Twin: a list keeps `z * 2` before the new `z`
    "a-cell-shows-a-value-then-the-name-is-made-again": (Shape("""
        z = torch.tensor([-3., 0., 3.])
        torch.sigmoid(z)
        nn.Sigmoid()(z)
        print(z)
        def helper(v):
            return v + 1
        z = torch.tensor([1.0, 2.0])
        got = helper(z)
        """, "GT708", holds="got.tolist() == [2.0, 3.0]"),
        Shape("""
        z = torch.tensor([-3., 0., 3.])
        torch.sigmoid(z)
        kept = [z * 2]
        z = torch.tensor([1.0, 2.0])
        """, "GT708", line=2, holds="kept[0].min() < 0")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
