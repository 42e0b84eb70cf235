"""Flow-Factory's trainer first freezes every pipeline component (`_freeze_components`), then `apply_lora` adds a trainable LoRA adapter to each target component. For a component that already carried a "default" adapter (a resumed or previously fused LoRA) `apply_lora` logged "Skipping" and `continue`d, so that adapter's weights kept the `requires_grad=False` the freeze had just given them: the optimizer, built from the trainable parameters, never sees them, and the high-noise expert of this two-expert (Wan 2.2 style) pipeline does not learn, with no error.

source: https://github.com/X-GenGroup/Flow-Factory/pull/56
kind: bug
symptom: silent
verified: after 150 steps the high-noise expert's LoRA weights moved by 0 and its loss went 0.4662 -> 0.4662, while the fresh low-noise expert's went 0.4445 -> 0.1160; in the look-alike the high-noise LoRA moves by 1.125 and its loss goes 0.4662 -> 0.1268
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
DIM = 16


class LoraLinear(nn.Module):
    def __init__(self, base, rank=4):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


class LoraModel(nn.Module):
    """A component wrapped with named adapters (a stand-in for a PeftModel)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.adapters = set()

    def add_adapter(self, name):
        for i, layer in enumerate(self.model):
            if isinstance(layer, nn.Linear):
                self.model[i] = LoraLinear(layer)
        self.adapters.add(name)

    def lora_parameters(self):
        return [p for n, p in self.named_parameters() if "lora_" in n]

    def forward(self, x):
        return self.model(x)


def make_transformer():
    return nn.Sequential(nn.Linear(DIM, DIM), nn.Tanh(), nn.Linear(DIM, DIM))


class Pipeline(nn.Module):
    def __init__(self, resumed_high_noise):
        super().__init__()
        self.transformer = make_transformer()  # high-noise expert
        self.transformer_2 = make_transformer()  # low-noise expert
        if resumed_high_noise:
            self.transformer = LoraModel(self.transformer)
            self.transformer.add_adapter("default")

    def forward(self, x, t):
        high = t > 0.5
        return torch.where(high[:, None], self.transformer(x), self.transformer_2(x))


class Trainer:
    def __init__(self, pipeline, lora_targets):
        self.pipeline = pipeline
        self._freeze_components()
        self.adapted = self.apply_lora(lora_targets)
        params = [p for p in pipeline.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=1e-2)

    def _freeze_components(self):
        self.pipeline.requires_grad_(False)

    def apply_lora(self, targets, overwrite=False):
        results = {}
        for name in targets:
            component = getattr(self.pipeline, name)
            if isinstance(component, LoraModel) and "default" in component.adapters:
                if not overwrite:
                    print(f"{name} already has adapter 'default'. Skipping.")
                    continue  # ROOT
            wrapped = LoraModel(component)
            wrapped.add_adapter("default")
            setattr(self.pipeline, name, wrapped)
            results[name] = wrapped
        return results

    def step(self, x, t, target):
        pred = self.pipeline(x, t)
        err = (pred - target).pow(2).mean(-1)
        loss = err.mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        high = t > 0.5
        return err[high].mean().item(), err[~high].mean().item()


pipeline = Pipeline(resumed_high_noise=True)
teacher_shift = torch.randn(DIM, DIM) * 0.3
trainer = Trainer(pipeline, ["transformer", "transformer_2"])
before = [p.detach().clone() for p in pipeline.transformer.lora_parameters()]

x = torch.randn(256, DIM)
t = torch.rand(256)
with torch.no_grad():
    target = pipeline(x, t) + torch.tanh(x @ teacher_shift)
first = last = None
for step in range(150):
    losses = trainer.step(x, t, target)
    first = first or losses
    last = losses
moved = max((p - b).abs().max().item() for p, b in zip(pipeline.transformer.lora_parameters(), before))
print(f"high-noise LoRA moved by {moved:.4g}")
print(f"high-noise expert loss {first[0]:.4f} -> {last[0]:.4f}")
print(f"low-noise expert loss {first[1]:.4f} -> {last[1]:.4f}")
