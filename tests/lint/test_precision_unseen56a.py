"""Shapes from the projects of docs/triage/unseen56a.md (session 56), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch (or NumPy)."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

# SAC's critic update: the two Q heads of one call walked by a loop, each fed to the critic's
# weightless loss module beside a target made under no_grad
CRITIC = '''
class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1, self.q2 = nn.Linear(4, 1), nn.Linear(4, 1)
        self.loss = nn.MSELoss()
    def forward(self, obs):
        return [self.q1(obs), self.q2(obs)]
critic, target_net = Critic(), Critic()
opt = torch.optim.Adam(critic.parameters())
def update(obs, rew):
    with torch.no_grad():
        target_q = rew + 0.9 * torch.min(*target_net(obs))
{heads}
    critic_loss = 0
    for head in heads:
        critic_loss += critic.loss(head, target_q)
    opt.zero_grad()
    critic_loss.backward()
    opt.step()
update(torch.randn(8, 4), torch.randn(8, 1))
'''

# a trainer method that hands back, unchanged, the label log it was given beside the loss
LOG = '''
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
def save(log, out):
    log["p"].extend(out.detach().flatten().tolist())
    return out.mean(), log
def step(x, log):
{body}
log = {start}
for _ in range(3):
    loss, log = step(torch.randn(2, 4), log)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

SHAPES = {
    "model-output-heads-walked-by-a-loop": (
        Shape(CRITIC.format(heads="    heads = critic(obs)"), "GT201",
              holds="critic.q1.weight.grad is not None"),
        Shape(CRITIC.format(heads="    with torch.no_grad():\n        heads = critic(obs)"),
              "GT201", line=13, raises=(RuntimeError, "does not require grad"))),
    "log-handed-back-as-given-beside-the-loss": (
        Shape(LOG.format(body="    loss, log = save(log, net(x))\n    return loss, log",
                         start='{"p": []}'), "GT506", holds="len(log['p']) == 6"),
        Shape(LOG.format(body="    loss = net(x).mean() + log\n    return loss, loss",
                         start="torch.zeros(())"), "GT506", line=11,
              raises=(RuntimeError, "backward through the graph a second time"))),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# a network written from scratch in NumPy, with its own `backward`, imported by its PyTorch
# twin for comparison; and a step file without torch whose helpers' file has it (still read)
NUMPY_MLP = '''
import numpy as np
def mse(pred, y):
    pred = np.clip(pred, -1e6, 1e6)
    return float(((pred - y) ** 2).mean())
class MLP:
    def __init__(self, n):
        self.w = np.zeros((n, 1))
    def forward(self, x, y):
        self.x, self.y = x, y
        return mse(x @ self.w, y)
    def backward(self):
        self.gw = 2 * self.x.T @ (self.x @ self.w - self.y) / len(self.x)
    def update(self, lr):
        self.w -= lr * self.gw
def demo():
    mlp = MLP(3)
    x, y = np.ones((4, 3)), np.ones((4, 1))
    for _ in range(5):
        loss = mlp.forward(x, y)
        mlp.backward()
        mlp.update(0.1)
demo()
'''
STEP_FILE = '''
from losses import charbonnier
def train_step(net, opt, batch):
    lr_img, hr_img = batch
    loss = charbonnier(net(lr_img), hr_img)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''
LOSSES = '''
import torch
def charbonnier(pred, target, eps=1e-3):
    diff = pred.data - target
    return torch.sqrt(diff * diff + eps * eps).mean()
'''


def test_numpy_network_with_its_own_backward(tmp_imports) -> None:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    from gradtrace.lint.prefilter import worth_checking
    files = {"numpy_mlp.py": NUMPY_MLP, "torch_ref.py": "import torch\nfrom numpy_mlp import MLP\n",
             "engine.py": STEP_FILE, "losses.py": LOSSES}
    for name, text in files.items():
        (tmp_imports / name).write_text(text)
    assert not worth_checking(str(tmp_imports / "numpy_mlp.py"), NUMPY_MLP.encode())
    assert worth_checking(str(tmp_imports / "engine.py"), STEP_FILE.encode())
    found = check_paths([str(tmp_imports)], Settings()).findings
    assert sorted({(f.path.rpartition("/")[2], f.code) for f in found}) == [("engine.py", "GT105")]
    exec(compile(NUMPY_MLP, "numpy_mlp.py", "exec"), {})


# recall: a U-Net of another file built again after the optimizer over the parameter `net`
UNET = '''
import torch.nn as nn
class UNet(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 1)
    def forward(self, x):
        return self.fc(x)
'''
TRAIN = '''
import torch
from torch import optim
from model.unet import UNet
def train_net(net, loader):
{first}
    optimizer = optim.RMSprop(net.parameters(), lr=0.01)
{second}
    before = net.fc.weight.detach().clone()
    for x, y in loader:
        loss = (net(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.equal(before, net.fc.weight)
'''


@pytest.mark.parametrize("first,second,line", [
    ("    net = UNet(4).to('cpu')", "", None),
    ("", "    net = UNet(4).to('cpu')", 8)])
def test_module_of_another_file_rebuilt_after_optimizer(tmp_imports, first: str, second: str,
                                                        line: int | None) -> None:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_imports / "model").mkdir()
    (tmp_imports / "model" / "__init__.py").write_text("")
    (tmp_imports / "model" / "unet.py").write_text(UNET)
    src = TRAIN.format(first=first, second=second)
    (tmp_imports / "train.py").write_text(src)
    found = check_paths([str(tmp_imports)], Settings(select=("GT404",))).findings
    assert [f.line for f in found] == ([] if line is None else [line])
    env: dict = {}
    exec(compile(src, "train.py", "exec"), env)
    batches = [(torch.randn(3, 4), torch.randn(3, 1))]
    assert env["train_net"](torch.nn.Linear(4, 1), batches) is (line is not None)
