"""`gradtrace run` names the cause's line, not the symptom's (issue 13 §2, held-out batch 5
development cases), each mechanism in a spelling of its own (another public report) with a
correct look-alike that stays silent. Real torch, through `gradtrace run`:

- grad mode turned off by a switch on the stack when a module ran (NOTE [grad off on the
  stack]): a `@torch.no_grad()` optimizer `step` running the closure (HeavyBall#10's PaLM-SOAP
  step, SOAP#21: the closure call), a decorated `forward` or a decorated helper method called
  by `forward` (the decorator);
- a Parameter made anew while the module runs, after the optimizer was built (the assignment);
- `nn.Parameter(<tensor with history>)` assigned over a layer's weight (a hypernetwork's output):
  the rewrap, not the optimizer (NOTE [rewrapped parameter]);
- parameters unfrozen after a filtered optimizer was built (the unfreeze);
- an optimizer built over another instance of the trained model's class (its line);
- a value computed once in `__init__` through the object's own layers, reused every step (the
  assignment in `__init__`), for the freed-graph error;
- a helper's non-leaf result whose `.grad` is read (the call that returned it);
- `backward(gradient=g)` on a `.mean()` of a tensor of `g`'s shape (the backward line);
- a `.data` copy that cuts the only trainable branch (the `.data`, not the freeze of the rest);
- a second pass added onto the loss a backward() already went through (the accumulation).
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    "palm_soap_step_runs_closure_under_no_grad": ("GT201", """
class PaLMSOAP(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        if closure is None:
            loss = None
        else:
            loss = closure()  # C
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return loss

net = nn.Linear(3, 1)
opt = PaLMSOAP(net.parameters())
x, y = torch.randn(8, 3), torch.randn(8, 1)
for _ in range(2):
    def closure():
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        return loss
    opt.step(closure)
"""),
    "encoder_forward_decorated_then_unfrozen": ("GT201", """
class TextEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.proj = nn.Linear(8, 8)

    @torch.no_grad  # C
    def forward(self, ids):
        return self.proj(self.emb(ids)).mean(1)

class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.text = TextEncoder()
        self.head = nn.Linear(8, 2)

    def forward(self, ids):
        return self.head(self.text(ids))

model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    ids, y = torch.randint(0, 20, (4, 5)), torch.randint(0, 2, (4,))
    loss = F.cross_entropy(model(ids), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    "encoder_helper_method_decorated": ("GT201", """
class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(5, 8)
        self.out = nn.Linear(8, 1)

    @torch.no_grad()  # C
    def encode(self, x):
        return torch.relu(self.embed(x))

    def forward(self, x):
        return self.out(self.encode(x))

tower = Tower()
tower.out.requires_grad_(False)
loss = tower(torch.randn(4, 5)).pow(2).mean()
loss.backward()
"""),
    "layer_scale_registered_in_forward": ("GT821", """
class LayerScale(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.d = d

    def forward(self, x):
        self.register_parameter("gamma", nn.Parameter(1e-4 * torch.ones(self.d)))  # C
        return x + self.gamma * self.fc(x)

model = nn.Sequential(LayerScale(4), nn.Linear(4, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(3):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    "hypernetwork_output_rewrapped_as_weight": ("GT107", """
class HyperLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.hyper = nn.Linear(3, 16)
        self.target = nn.Linear(4, 4, bias=False)

    def forward(self, x, z):
        w = self.hyper(z).view(4, 4)
        self.target.weight = nn.Parameter(w)  # C
        return self.target(x)

model = HyperLinear()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
z = torch.randn(3)
for _ in range(3):
    loss = model(torch.randn(6, 4), z).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    "backbone_unfrozen_by_requires_grad_method": ("GT410", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.backbone(x))

model = Net()
model.backbone.requires_grad_(False)
opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
for epoch in range(4):
    if epoch == 2:
        model.backbone.requires_grad_(True)  # C
    loss = F.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 2, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    "trainer_optimizer_over_other_instance": ("GT404", """
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 2)

    def forward(self, x):
        return self.body(x)

class Trainer:
    def __init__(self, pretrained):
        self.model = Policy()
        self.model.load_state_dict(pretrained.state_dict())
        self.opt = torch.optim.SGD(pretrained.parameters(), lr=0.1)  # C

    def fit(self, steps):
        for _ in range(steps):
            loss = self.model(torch.randn(3, 4)).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

Trainer(Policy()).fit(3)
"""),
    "position_table_embedded_in_init": ("GT507", """
class Tagger(nn.Module):
    def __init__(self, n=5, d=8):
        super().__init__()
        self.pos_embed = nn.Embedding(n, d)
        self.pos = self.pos_embed(torch.arange(n))  # C
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        return self.out(x + self.pos)

model = Tagger()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(2, 5, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    "gru_state_on_self_made_in_init_and_rebound": ("GT506", """
class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 4, batch_first=True)
        self.h = self.initial_state()

    def initial_state(self):
        return torch.zeros(1, 2, 4)

    def forward(self, x):
        out, self.h = self.gru(x, self.h)  # C
        return out[:, -1]

model = Tracker()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(2, 5, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    "saliency_input_normalized_by_helper": ("GT307", """
MEAN, STD = torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0.2, 0.2, 0.2])

def normalize(image):
    return (image - MEAN.view(3, 1, 1)) / STD.view(3, 1, 1)

net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5))
image = torch.rand(3, 4, 4, requires_grad=True)
inp = normalize(image).unsqueeze(0)  # C
net(inp)[0, 2].backward()
saliency = inp.grad.abs().amax(1)
"""),
    "per_element_gradient_given_to_mean": ("GT830", """
net = nn.Linear(4, 3)
x = torch.randn(5, 4)
pred = net(x)
weights = torch.rand(5, 3)
loss = (pred * weights).pow(2).mean()
loss.backward(torch.ones_like(pred))  # C
"""),
    "adapter_output_copied_through_data": ("GT105", """
lm = nn.Embedding(30, 6)
adapter = nn.Linear(4, 6)
head = nn.Linear(6, 30)
lm.requires_grad_(False)
head.requires_grad_(False)
opt = torch.optim.Adam(adapter.parameters(), lr=1e-3)
ids, feats = torch.randint(0, 30, (2, 7)), torch.randn(2, 4)
hidden = lm(ids)
hidden.data[:, 0].copy_(adapter(feats).data)  # C
loss = F.cross_entropy(head(hidden).flatten(0, 1), ids.flatten())
loss.backward()
opt.step()
"""),
    "second_pass_added_onto_backpropagated_total": ("GT505", """
net = nn.Linear(3, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(4, 3)
total = net(x).pow(2).mean()
total.backward()
opt.step()
opt.zero_grad()
total = total + net(x).abs().mean()  # C
total.backward()
opt.step()
"""),
}

LOOKALIKES = {
    "soap_step_enables_grad_for_closure": """
class SOAP(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return loss

net = nn.Linear(3, 1)
opt = SOAP(net.parameters())
x, y = torch.randn(8, 3), torch.randn(8, 1)
for _ in range(2):
    def closure():
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        return loss
    opt.step(closure)
""",
    "evaluate_helper_decorated_no_grad": """
@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    evaluate(model, x, y)
""",
    "layer_scale_made_lazily_before_optimizer": """
class LayerScale(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        if not hasattr(self, "gamma"):
            self.gamma = nn.Parameter(1e-4 * torch.ones(x.shape[-1]))
        return x + self.gamma * self.fc(x)

model = nn.Sequential(LayerScale(4), nn.Linear(4, 1))
model(torch.randn(1, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(3):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "orthogonal_weight_rewrapped_at_init": """
class Ortho(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4, bias=False)
        q, _ = torch.linalg.qr(torch.randn(4, 4))
        self.fc.weight = nn.Parameter(q)

    def forward(self, x):
        return self.fc(x)

model = Ortho()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "backbone_unfrozen_and_added_as_group": """
backbone = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
head = nn.Linear(8, 2)
backbone.requires_grad_(False)
opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
for epoch in range(4):
    if epoch == 2:
        backbone.requires_grad_(True)
        opt.add_param_group({"params": backbone.parameters()})
    loss = F.cross_entropy(head(backbone(torch.randn(4, 6))), torch.randint(0, 2, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "teacher_copy_and_student_optimizer": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 2)

    def forward(self, x):
        return self.body(x)

teacher = Net()
student = Net()
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for _ in range(3):
    x = torch.randn(3, 4)
    with torch.no_grad():
        target = teacher(x)
    loss = F.mse_loss(student(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "positions_kept_as_ids_in_init": """
class Tagger(nn.Module):
    def __init__(self, n=5, d=8):
        super().__init__()
        self.pos_embed = nn.Embedding(n, d)
        self.ids = torch.arange(n)
        self.scale = self.pos_embed.embedding_dim ** -0.5
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        return self.out(x * self.scale + self.pos_embed(self.ids))

model = Tagger()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(2, 5, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "saliency_on_the_leaf_given_to_helper": """
MEAN, STD = torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0.2, 0.2, 0.2])

def normalize(image):
    return ((image - MEAN.view(3, 1, 1)) / STD.view(3, 1, 1)).detach().requires_grad_()

net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5))
inp = normalize(torch.rand(3, 4, 4)).unsqueeze(0)
inp.retain_grad()
net(inp)[0, 2].backward()
saliency = inp.grad.abs().amax(1)
""",
    "per_element_gradient_given_to_unreduced": """
net = nn.Linear(4, 3)
pred = net(torch.randn(5, 4))
pred.backward(torch.ones_like(pred))
""",
    "adapter_output_written_differentiably": """
lm = nn.Embedding(30, 6)
adapter = nn.Linear(4, 6)
head = nn.Linear(6, 30)
lm.requires_grad_(False)
head.requires_grad_(False)
opt = torch.optim.Adam(adapter.parameters(), lr=1e-3)
ids, feats = torch.randint(0, 30, (2, 7)), torch.randn(2, 4)
hidden = lm(ids).clone()
hidden[:, 0] = adapter(feats)
loss = F.cross_entropy(head(hidden).flatten(0, 1), ids.flatten())
loss.backward()
opt.step()
""",
    "second_pass_from_a_fresh_total": """
net = nn.Linear(3, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(4, 3)
total = net(x).pow(2).mean()
total.backward()
opt.step()
opt.zero_grad()
total = net(x).abs().mean()
total.backward()
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
