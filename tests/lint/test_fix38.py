"""Session 38 (fix38): false alarms sessions 35-37's unseen projects left (docs/triage/fix38.md),
each in another spelling than the project's, next to a buggy twin that is still reported. Every
snippet runs on real torch. Facts that need the project (every caller, other files included)
are checked on small projects in ``tmp_path``."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from imports_as_found import imports_as_found

torch = pytest.importorskip("torch")


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _found(root: Path, *codes: str) -> list[tuple[str, str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(root)], Settings()).findings
    return sorted((f.code, Path(f.path).name, f.line) for f in got if f.code in codes)


def _run(root: Path, script: str, modules: tuple[str, ...]) -> dict:
    """The project's script as `__main__`; its ``modules`` (and any other it wrote) are gone
    from sys.modules afterwards (tests/imports_as_found.py)."""
    import runpy
    with imports_as_found(root):
        return runpy.run_path(str(root / script), run_name="__main__")


# -- GT751: predictions unpacked from a tuple under no_grad (RAD-NeRF's shape) -----------------
# A tuple unpacked under `torch.no_grad()` holds no graph, as a name bound there does; a
# resampling's `size=(H, W)` is a shape, not a value of the graph. So the sRGB curve's only
# caller hands it data (NOTE [parameters given data]) and its discarded `**` branch is never
# differentiated. The twin also applies the curve to the training loss: NaN gradients.

_RENDER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_srgb(x):
    return torch.where(x < 0.0031308, 12.92 * x, 1.055 * x ** 0.41666 - 0.055)


class Renderer:
    def __init__(self):
        self.net = nn.Linear(3, 3)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, rays):
        rgb = self.net(rays)
        return rgb, rgb.sum(-1)

    def train_step(self, rays, gt):
        rgb, depth = self.step(rays)
        loss = ((LOSS_INPUT - gt) ** 2).mean() + depth.mean() * 0.0
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss

    def render(self, rays, H, W):
        with torch.no_grad():
            rgb, depth = self.step(rays)
        img = rgb.reshape(1, 2, 2, 3).permute(0, 3, 1, 2)
        img = F.interpolate(img, size=(H, W), mode="bilinear").permute(0, 2, 3, 1)
        return to_srgb(img).cpu().numpy()
'''

_RENDER_MAIN = '''
import torch
from render import Renderer

torch.manual_seed(0)
r = Renderer()
rays, gt = torch.randn(4, 3), torch.rand(4, 3)
for _ in range(3):
    r.train_step(rays, gt)
image = r.render(rays, 4, 4)
finite = all(bool(torch.isfinite(p.grad).all()) for p in r.net.parameters())
'''


def test_curve_on_predictions_unpacked_under_no_grad_is_silent(tmp_path: Path) -> None:
    root = _project(tmp_path, {"render.py": _RENDER.replace("LOSS_INPUT", "rgb"),
                               "main.py": _RENDER_MAIN})
    assert _found(root, "GT751") == []
    assert _run(root, "main.py", ("render",))["finite"] is True


def test_curve_also_in_the_training_loss_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path, {"render.py": _RENDER.replace("LOSS_INPUT", "to_srgb(rgb)"),
                               "main.py": _RENDER_MAIN})
    assert _found(root, "GT751") == [("GT751", "render.py", 7)]
    assert _run(root, "main.py", ("render",))["finite"] is False


def _trace(src: str, fn_name: str, name: str, line: int) -> bool:
    import ast
    from gradtrace.lint.analysis.origins import origins
    from gradtrace.lint.context import Context
    from gradtrace.lint.names import Imports
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    ctx = Context("t.py", src, tree, imports)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn_name)
    use = next(s for s in ast.walk(fn) if isinstance(s, ast.stmt) and s.lineno == line)
    return origins(ctx, fn).trace(ast.Name(name, ast.Load()), use, line).live


_UNPACK = '''
import torch

def show(model, x, H, W):
    GUARD
        out, aux = model(x)
    img = torch.nn.functional.interpolate(out, size=(H, W))
    return img
'''


def test_tuple_unpacked_under_no_grad_holds_no_graph() -> None:
    src = _UNPACK.replace("GUARD", "with torch.no_grad():")
    assert _trace(src, "show", "img", 8) is False
    assert _trace(src, "show", "aux", 8) is False


def test_tuple_unpacked_with_grad_on_holds_one() -> None:
    src = _UNPACK.replace("GUARD", "if True:")
    assert _trace(src, "show", "img", 8) is True
    assert _trace(src, "show", "aux", 8) is True


# -- GT609: a twin-Q critic's two heads, each cleared and stepped apart (replication-mbpo) ------
# NOTE [heads a step skips]: `zero_grad()` sets the grads to None and the step skips those
# parameters, so the step after `loss_a.backward()` changes only the first head's layers, which
# `loss_b`'s graph never saved. Twins: `zero_grad(set_to_none=False)` (every parameter gets a
# zero grad and Adam moves it: 'modified by an inplace operation'), and heads sharing a trunk.

_TWIN_Q = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class TwinQ(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.q1_in = nn.Linear(obs_dim + act_dim, hidden)
        self.q1_out = nn.Linear(hidden, 1)
        self.q2_in = nn.Linear(obs_dim + act_dim, hidden)
        self.q2_out = nn.Linear(hidden, 1)

    def forward(self, obs, act):
        sa = torch.cat([obs, act], 1)
        h1 = F.relu(self.q1_in(sa))
        h2 = F.relu(self.q2_in(sa))
        return self.q1_out(h1), SECOND
'''

_AGENT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from nets import TwinQ


class Agent:
    def __init__(self):
        self.critic = TwinQ(3, 2, 16).to("cpu")
        self.actor = nn.Linear(3, 2)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3)

    def update(self, obs, act, target):
        q_a, q_b = self.critic(obs, act)
        loss_a = F.mse_loss(q_a, target)
        loss_b = F.mse_loss(q_b, target)
        self.critic_opt.zero_grad(CLEAR)
        loss_a.backward()
        self.critic_opt.step()
        self.critic_opt.zero_grad(CLEAR)
        loss_b.backward()
        self.critic_opt.step()
        pi_a, pi_b = self.critic(obs, self.actor(obs))
        actor_loss = -torch.min(pi_a, pi_b).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        return loss_a.item() + loss_b.item()
'''

_AGENT_MAIN = '''
import torch
from agent import Agent

torch.manual_seed(0)
agent = Agent()
obs, act, target = torch.randn(8, 3), torch.randn(8, 2), torch.randn(8, 1)
try:
    for _ in range(3):
        agent.update(obs, act, target)
    error = None
except RuntimeError as e:
    error = str(e)
'''


def _twin_q(root: Path, clear: str, second: str) -> Path:
    return _project(root, {"nets.py": _TWIN_Q.replace("SECOND", second),
                           "agent.py": _AGENT.replace("CLEAR", clear),
                           "main.py": _AGENT_MAIN})


def test_heads_cleared_and_stepped_apart_are_silent(tmp_path: Path) -> None:
    root = _twin_q(tmp_path, "", "self.q2_out(h2)")
    assert _found(root, "GT609", "GT509", "GT601") == []
    assert _run(root, "main.py", ("nets", "agent"))["error"] is None


def test_heads_cleared_to_zero_are_reported(tmp_path: Path) -> None:
    root = _twin_q(tmp_path, "set_to_none=False", "self.q2_out(h2)")
    assert _found(root, "GT609") == [("GT609", "agent.py", 20)]
    assert "modified by an inplace operation" in _run(root, "main.py", ("nets", "agent"))["error"]


def test_heads_sharing_a_trunk_are_reported(tmp_path: Path) -> None:
    root = _twin_q(tmp_path, "", "self.q2_out(h2) + self.q1_out(h1)")  # a layer of both
    assert _found(root, "GT609") == [("GT609", "agent.py", 20)]
    assert "modified by an inplace operation" in _run(root, "main.py", ("nets", "agent"))["error"]


# -- GT541: a phase parameter every caller sets to 'train' (OpenDialog's agents) ---------------
# NOTE [argument fixed by every caller]: the only call passes mode='train', so the `if mode ==
# 'train':` test has one arm and no evaluation phase runs in train mode. The twin also calls it
# for validation: the batch norm's running statistics move toward the validation data.

_PHASE_AGENT = '''
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.criterion = nn.MSELoss()

    def train_model(self, loader, mode='train'):
        self.model.train()
        total = 0.0
        for x, y in loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            if mode == 'train':
                loss.backward()
                self.optimizer.step()
            total += loss.item()
        return total
'''

_PHASE_MAIN = '''
import torch
from agent import Agent

torch.manual_seed(0)
agent = Agent()
train = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(3)]
valid = [(torch.randn(16, 4) + 5.0, torch.randn(16, 1)) for _ in range(3)]
for epoch in range(2):
    agent.train_model(train, mode='train')
    before = agent.model[1].running_mean.clone()
    VALIDATE
moved = not torch.equal(before, agent.model[1].running_mean)
'''


def test_phase_parameter_fixed_by_every_caller_is_silent(tmp_path: Path) -> None:
    root = _project(tmp_path, {"agent.py": _PHASE_AGENT,
                               "main.py": _PHASE_MAIN.replace("VALIDATE", "pass")})
    assert _found(root, "GT541") == []
    assert _run(root, "main.py", ("agent",))["moved"] is False


def test_phase_parameter_also_given_val_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path, {"agent.py": _PHASE_AGENT, "main.py": _PHASE_MAIN.replace(
        "VALIDATE", "agent.train_model(valid, mode='val')")})
    assert _found(root, "GT541") == [("GT541", "agent.py", 12)]
    assert _run(root, "main.py", ("agent",))["moved"] is True


# -- GT401: `Module` re-exported by the project's package from another framework (xuance) ------
# The class's base is `Module` imported from the project's own package, whose `__init__` binds
# it by `from tensorflow.keras import Model as Module`: a Keras model, which tracks the layers
# of a dict attribute itself (the file also mentions torch, as xuance's does). TensorFlow is not
# installed here: the look-alike is checked only.
# The twin re-exports torch's `nn.Module`: the dict's layers are missing from `parameters()`.

_POLICY = '''
import torch
from agents import Module
from agents.layers import MLPBlock


class Policy(Module):
    def __init__(self, keys):
        super().__init__()
        self.heads = {}
        for k in keys:
            self.heads[k] = MLPBlock(4, 2)

    def forward(self, x, key):
        return self.heads[key](x)
'''

_LAYERS = '''
IMPORT
from agents import Module


class MLPBlock(Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc = LAYER

    def forward(self, x):
        return self.fc(x)
'''


def test_dict_of_layers_in_another_frameworks_model_is_silent(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "agents/__init__.py": "from tensorflow.keras import Model as Module\n",
        "agents/layers.py": _LAYERS.replace("LAYER", "tensorflow.keras.layers.Dense(o)").replace(
            "IMPORT", "import tensorflow"),
        "agents/policy.py": _POLICY})
    assert _found(root, "GT401") == []


def test_dict_of_layers_in_a_reexported_torch_module_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "agents/__init__.py": "from torch.nn import Module\n",
        "agents/layers.py": _LAYERS.replace("LAYER", "torch.nn.Linear(i, o)").replace(
            "IMPORT", "import torch"),
        "agents/policy.py": _POLICY})
    assert _found(root, "GT401") == [("GT401", "policy.py", 9)]
    with imports_as_found(root):
        from agents.policy import Policy
        p = Policy(["a", "b"])
        assert list(p.children()) == [] and len(p.heads) == 2  # the heads are not registered



# -- GT507: each pass's own entry of a per-agent output, picked in a comprehension (MADDPG) ----
# `{k: actions_eval[k] if k == key else actions[k] for k in keys}` reads only the pass's own
# agent's entry of the output computed before the loop; each pass backpropagates through
# another agent's actor. The twin reads every agent's entry: the second pass raises.

_MADDPG = '''
import torch
import torch.nn as nn


class Agents(nn.Module):
    def __init__(self, keys):
        super().__init__()
        self.actors = nn.ModuleDict({k: nn.Linear(3, 2) for k in keys})
        self.critics = nn.ModuleDict({k: nn.Linear(3 + 2 * len(keys), 1) for k in keys})

    def forward(self, obs):
        return {k: torch.tanh(self.actors[k](obs[k])) for k in self.actors}


def update(model, optimizers, obs, actions, keys):
    actions_eval = model(obs)
    joint_obs = obs[keys[0]]
    for key in keys:
        a_joint = {k: SELECTED for k in keys}
        act = torch.cat([a_joint[k] for k in keys], dim=-1)
        q = model.critics[key](torch.cat([joint_obs, act], dim=-1))
        loss_a = -q.mean()
        optimizers[key].zero_grad()
        loss_a.backward()
        optimizers[key].step()


torch.manual_seed(0)
keys = ["adversary", "agent"]
model = Agents(keys)
optimizers = {k: torch.optim.Adam(model.actors[k].parameters(), lr=1e-3) for k in keys}
obs = {k: torch.randn(4, 3) for k in keys}
actions = {k: torch.randn(4, 2) for k in keys}
try:
    update(model, optimizers, obs, actions, keys)
    error = None
except RuntimeError as e:
    error = str(e)
'''


def test_own_entry_picked_in_a_comprehension_is_silent(tmp_path: Path) -> None:
    root = _project(tmp_path, {"maddpg.py": _MADDPG.replace(
        "SELECTED", "actions_eval[k] if k == key else actions[k]")})
    assert _found(root, "GT507") == []
    assert _run(root, "maddpg.py", ("maddpg",))["error"] is None


def test_every_entry_read_in_a_comprehension_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path, {"maddpg.py": _MADDPG.replace("SELECTED", "actions_eval[k]")})
    assert _found(root, "GT507") == [("GT507", "maddpg.py", 16)]
    error = _run(root, "maddpg.py", ("maddpg",))["error"]
    assert "backward through the graph a second time" in error


# -- GT402: a requires-grad tensor another file puts into a parameter group (auto_LiRPA) -------
# NOTE [parameter group built elsewhere]: the layer keeps its output-constraint multipliers out
# of `parameters()`; the optimizing file collects them into their own group. The twin's other
# file only reads them for a log: they never train.

_BOUND_LAYER = '''
import torch
import torch.nn as nn


class BoundRelu(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.gammas = torch.full((2, n), 0.1, requires_grad=True)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.gammas[0] + self.gammas[1]
'''

_BOUND_OPT = '''
import torch
from layer import BoundRelu


def collect(nodes, groups):
    gammas = []
    for node in nodes:
        gammas.append(node.gammas)
    GROUP


torch.manual_seed(0)
nodes = [BoundRelu(3), BoundRelu(3)]
groups = [{"params": [p for n in nodes for p in n.parameters()]}]
collect(nodes, groups)
opt = torch.optim.SGD(groups, lr=0.5)
before = nodes[0].gammas.detach().clone()
x = torch.randn(4, 3)
loss = nodes[1](nodes[0](x)).pow(2).sum()
opt.zero_grad()
loss.backward()
opt.step()
trained = not torch.equal(before, nodes[0].gammas.detach())
'''


def test_tensor_grouped_by_another_file_is_silent(tmp_path: Path) -> None:
    root = _project(tmp_path, {"layer.py": _BOUND_LAYER, "opt.py": _BOUND_OPT.replace(
        "GROUP", "groups.append({'params': gammas, 'lr': 0.1})")})
    assert _found(root, "GT402") == []
    assert _run(root, "opt.py", ("layer",))["trained"] is True


def test_tensor_only_logged_by_another_file_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path, {"layer.py": _BOUND_LAYER, "opt.py": _BOUND_OPT.replace(
        "GROUP", "print(sum(float(g.detach().sum()) for g in gammas))")})
    assert _found(root, "GT402") == [("GT402", "layer.py", 9)]
    assert _run(root, "opt.py", ("layer",))["trained"] is False
