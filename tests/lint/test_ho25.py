"""Session 31, ho25 (held-out batch 25): the facts widened for the batch's static misses and
its look-alike alarm. Each pattern has a silent look-alike and a buggy twin."""
import textwrap

from gradtrace.lint import check_source


def found(src, code):
    return [f.line for f in check_source(textwrap.dedent(src)) if f.code == code]


# NOTE [frozen local module]: a momentum encoder frozen where it is built carries no graph, so
# a second backward through a loss that reads its output frees nothing twice.
MOMENTUM = '''\
import copy
import torch

online = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
momentum_encoder = copy.deepcopy(online).requires_grad_(False)
opt = torch.optim.SGD(online.parameters(), lr=0.1)
for step in range(3):
    x0, x1 = torch.randn(8, 10), torch.randn(8, 10)
    z_a, z_b = online(x0), momentum_encoder(x1)
    loss = (z_a - z_b).pow(2).mean()
    probe = (online(x0) * z_b).sum()
    probe.backward()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_frozen_momentum_encoder_output_shared_by_two_backwards_is_silent():
    assert found(MOMENTUM, "GT509") == []


def test_frozen_on_its_own_line_is_silent():
    src = MOMENTUM.replace("momentum_encoder = copy.deepcopy(online).requires_grad_(False)\n",
                           "momentum_encoder = copy.deepcopy(online)\nmomentum_encoder.requires_grad_(False)\n")
    assert found(src, "GT509") == []


def test_trainable_momentum_encoder_output_shared_by_two_backwards_fires():
    src = MOMENTUM.replace(".requires_grad_(False)", "")
    assert found(src, "GT509") == [12]


def test_frozen_module_fed_a_live_value_still_carries_its_graph():
    src = MOMENTUM.replace("momentum_encoder(x1)", "momentum_encoder(online(x1))")
    assert found(src, "GT509") == [12]


# NOTE [module given by a default]: `act=ReLU()` as a constructor default is `self.act`.
FILM = '''\
import torch
from torch.nn import Linear, ModuleList, ReLU, GELU


class Conv(torch.nn.Module):
    def __init__(self, c_in, c_out, act=ReLU()):
        super().__init__()
        self.act = act
        self.lin = Linear(c_in, c_out)
        self.skip = Linear(c_in, c_out)

    def forward(self, x):
        out = self.skip(x)
        if self.act is not None:
            out = self.act(out)
        out += self.lin(x)
        return out


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = ModuleList([Conv(4, 8), Conv(8, 2, act=None)])

    def forward(self, x):
        for conv in self.convs:
            x = conv(x)
        return x
'''


def test_add_in_place_to_the_output_of_a_default_relu_module_fires():
    assert found(FILM, "GT603") == [16]


def test_default_module_that_saves_no_output_is_silent():
    assert found(FILM.replace("act=ReLU()", "act=GELU()"), "GT603") == []


def test_default_overridden_by_a_construction_is_not_known():
    assert found(FILM.replace("Conv(8, 2, act=None)", "Conv(8, 2, act=GELU())"), "GT603") == []


def test_out_of_place_add_after_default_relu_is_silent():
    assert found(FILM.replace("out += self.lin(x)", "out = out + self.lin(x)"), "GT603") == []


# NOTE [parameter written in place]: a module's forward writing its input through an alias,
# handed the ReLU output of another module unnamed.
RESA = '''\
import torch
from torch import nn
import torch.nn.functional as F


class Shift(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        y = x
        for i in range(2):
            y.add_(F.relu(self.conv(y.roll(1, dims=2))))
        return y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.shift = Shift(4)

    def forward(self, x):
        return self.shift(self.backbone(x))


net = Net()
loss = net(torch.randn(2, 3, 8, 8)).sum()
loss.backward()
'''


def test_module_forward_writing_its_input_handed_a_relu_output_fires():
    assert found(RESA, "GT603") == [14]


def test_module_forward_writing_a_copy_is_silent():
    assert found(RESA.replace("y = x\n", "y = x.clone()\n"), "GT603") == []


def test_module_forward_handed_an_output_that_is_not_saved_is_silent():
    src = RESA.replace("nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()", "nn.ReLU(), nn.Conv2d(3, 4, 3, padding=1)")
    assert found(src, "GT603") == []


# NOTE [one view, several writes]
BIAS = '''\
import math
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        self.conv = nn.Conv2d(c, 3 * (5 + classes), 1)
        self.init_bias(classes)

    def init_bias(self, classes):
        b = self.conv.bias.view(3, -1)
        b[:, 4] += math.log(8 / 640 ** 2)
        b[:, 5:] += math.log(0.6 / (classes - 0.99))
        self.conv.bias = nn.Parameter(b.view(-1), requires_grad=True)

    def forward(self, x):
        return self.conv(x)


head = Head(8, 4)
head(torch.randn(1, 8, 4, 4)).sum().backward()
'''


def test_two_writes_through_one_view_of_a_bias_are_reported_at_the_view_and_first_write():
    assert found(BIAS, "GT302") == [13, 14]


def test_one_write_through_the_view_is_reported_at_the_write():
    src = BIAS.replace("        b[:, 5:] += math.log(0.6 / (classes - 0.99))\n", "")
    assert found(src, "GT302") == [14]


def test_view_of_a_detached_bias_is_silent():
    src = BIAS.replace("self.conv.bias.view(3, -1)", "self.conv.bias.detach().view(3, -1)")
    assert found(src, "GT302") == []


# NOTE [loss built after the step from a value before]
SAC = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o))


class Agent:
    def __init__(self):
        self.actor, self.critic, self.value = mlp(3, 1), mlp(4, 1), mlp(3, 1)
        self.actor_opt = torch.optim.Adam(self.actor.parameters())
        self.critic_opt = torch.optim.Adam(self.critic.parameters())

    def update(self, s, a, y):
        new_a = torch.tanh(self.actor(s))
        q_pred = self.critic(torch.cat((s, new_a), -1))
        q_loss = F.mse_loss(self.critic(torch.cat((s, a), -1)), y)
        self.critic_opt.zero_grad()
        q_loss.backward()
        self.critic_opt.step()
        advantage = q_pred - self.value(s).detach()
        actor_loss = -advantage.mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()


Agent().update(torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1))
'''


def test_actor_loss_built_after_the_critic_step_from_a_critic_output_before_it_fires():
    assert found(SAC, "GT609") == [22]


def test_critic_output_computed_after_the_step_is_silent():
    src = SAC.replace("        q_pred = self.critic(torch.cat((s, new_a), -1))\n", "").replace(
        "        advantage = q_pred", "        advantage = self.critic(torch.cat((s, new_a), -1))")
    assert found(src, "GT609") == []


def test_critic_output_detached_before_the_step_is_silent():
    src = SAC.replace("advantage = q_pred - ", "advantage = q_pred.detach() * new_a - ")
    assert found(src, "GT609") == []


def test_loss_summed_after_its_own_backward_and_step_is_not_gt609():
    src = '''\
import torch
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0
for i in range(3):
    opt.zero_grad()
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    running += loss
running.backward()
'''
    assert found(src, "GT609") == []


# NOTE [reduced in place inside a loss]
BARLOW = '''\
import torch
import torch.distributed as dist


class BarlowLoss(torch.nn.Module):
    def forward(self, z_a, z_b):
        c = z_a.T @ z_b
        c.div_(z_a.size(0))
        if dist.is_initialized():
            c = c / dist.get_world_size()
            dist.all_reduce(c)
        on_diag = torch.diagonal(c).add(-1).pow(2).sum()
        return on_diag + 5e-3 * c.pow(2).sum()


def step(model, crit, opt, x0, x1):
    loss = crit(model(x0), model(x1))
    loss.backward()
    opt.step()
'''


def test_cross_correlation_reduced_in_place_inside_a_loss_forward_fires():
    assert found(BARLOW, "GT466") == [11]


def test_differentiable_all_reduce_is_silent():
    src = BARLOW.replace("            dist.all_reduce(c)\n",
                         "            c = torch.distributed.nn.all_reduce(c)\n")
    assert found(src, "GT466") == []


def test_count_reduced_in_place_inside_a_forward_is_silent():
    src = BARLOW.replace("            c = c / dist.get_world_size()\n            dist.all_reduce(c)\n",
                         "            n = (z_a > 0).sum()\n            dist.all_reduce(n)\n            c = c / n\n")
    assert found(src, "GT466") == []


def test_detached_copy_reduced_for_logging_is_silent():
    src = BARLOW.replace("            c = c / dist.get_world_size()\n            dist.all_reduce(c)\n",
                         "            logged = c.detach() / dist.get_world_size()\n            dist.all_reduce(logged)\n")
    assert found(src, "GT466") == []


# NOTE [forward input rebound under no_grad]
SPEAKER = '''\
import torch
from torch import nn


class SpeakerEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.spec = nn.Conv1d(1, 8, 16, stride=8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        with torch.no_grad():
            x = self.spec(x)
            x = (x.abs() + 1e-6).log()
        return self.fc(x.mean(-1))


encoder = SpeakerEncoder()
for p in encoder.parameters():
    p.requires_grad = False
decoder = nn.Sequential(nn.ConvTranspose1d(8, 1, 16, stride=8, padding=4), nn.Tanh())
z, real = torch.randn(2, 8, 16), torch.randn(2, 1, 128)
fake = decoder(z)
emb = encoder.forward(torch.cat((real, fake)))
real_emb, fake_emb = emb.chunk(2)
loss = -torch.nn.functional.cosine_similarity(real_emb, fake_emb).mean() + (fake - real).abs().mean()
loss.backward()
'''


def test_forward_input_processed_under_no_grad_for_a_generated_input_fires():
    assert found(SPEAKER, "GT216") == [12]


def test_forward_input_processed_under_no_grad_for_data_only_is_silent():
    src = SPEAKER.replace("emb = encoder.forward(torch.cat((real, fake)))",
                          "emb = encoder.forward(torch.cat((real, real)))")
    assert found(src, "GT216") == []


def test_forward_input_processed_with_grad_is_silent():
    src = SPEAKER.replace("        with torch.no_grad():\n            x = self.spec(x)\n            x = (x.abs() + 1e-6).log()\n",
                          "        x = self.spec(x)\n        x = (x.abs() + 1e-6).log()\n")
    assert found(src, "GT216") == []
