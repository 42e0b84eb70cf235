"""open-rl's trainer keeps one base model with several LoRA adapters and switches between them with `set_adapter`, which marks only the active adapter's weights trainable. `optim_step(model_id)` built that run's optimizer from `[p for p in model.parameters() if p.requires_grad]`, i.e. from whichever adapter happened to be active: when requests interleave (`forward_backward(A)`, `forward_backward(B)`, `optim_step(A)`), run A's optimizer owns adapter B's weights, A's gradients are never applied, and run A stops learning with no error.

source: https://github.com/gke-labs/open-rl/pull/80
kind: bug
symptom: silent
verified: after 40 interleaved steps adapter A's weights moved by 0 and run A's loss stayed at 1.5507 -> 1.5507 while run B's went 1.6014 -> 0.0598; in the look-alike adapter A moves by 0.846 and run A's loss goes 1.5507 -> 0.1412
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear):
        super().__init__()
        self.base = base
        self.lora_A = nn.ParameterDict()
        self.lora_B = nn.ParameterDict()
        self.active = None

    def add(self, name, rank=4):
        self.lora_A[name] = nn.Parameter(torch.randn(rank, self.base.in_features) * 0.1)
        self.lora_B[name] = nn.Parameter(torch.zeros(self.base.out_features, rank))

    def forward(self, x):
        out = self.base(x)
        if self.active is not None:
            out = out + x @ self.lora_A[self.active].t() @ self.lora_B[self.active].t()
        return out


class PeftModel(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.layers = nn.ModuleList([LoraLinear(nn.Linear(dim, dim)) for _ in range(2)])
        self.head = nn.Linear(dim, 1)
        self.requires_grad_(False)

    def add_adapter(self, name):
        for layer in self.layers:
            layer.add(name)
        self.set_adapter(name)

    def set_adapter(self, name):
        """Like PEFT: only the active adapter's weights are trainable."""
        for layer in self.layers:
            layer.active = name
            for key in layer.lora_A:
                layer.lora_A[key].requires_grad_(key == name)
                layer.lora_B[key].requires_grad_(key == name)

    def adapter_parameters(self, name):
        return [p for layer in self.layers for p in (layer.lora_A[name], layer.lora_B[name])]

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x).squeeze(-1)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizers = {}

    def create_adapter(self, model_id):
        self.model.add_adapter(model_id)

    def forward_backward(self, model_id, x, y):
        self.model.set_adapter(model_id)
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss.item()

    def optim_step(self, model_id, lr=5e-2):
        if model_id not in self.optimizers:
            params = [p for p in self.model.parameters() if p.requires_grad]  # ROOT
            self.optimizers[model_id] = torch.optim.Adam(params, lr=lr)
        opt = self.optimizers[model_id]
        opt.step()
        opt.zero_grad()


model = PeftModel()
trainer = Trainer(model)
trainer.create_adapter("A")
trainer.create_adapter("B")
start_A = [p.detach().clone() for p in model.adapter_parameters("A")]

xa, xb = torch.randn(64, 16), torch.randn(64, 16)
ya, yb = torch.sin(xa[:, 0]) + xa[:, 1], torch.cos(xb[:, 2]) - xb[:, 3]
history = {"A": [], "B": []}
for step in range(40):
    history["A"].append(trainer.forward_backward("A", xa, ya))
    history["B"].append(trainer.forward_backward("B", xb, yb))
    trainer.optim_step("A")
    trainer.optim_step("B")

moved = max((p - s).abs().max().item() for p, s in zip(model.adapter_parameters("A"), start_A))
print(f"adapter A moved by {moved:.4g}")
for name in "AB":
    print(f"run {name}: loss {history[name][0]:.4f} -> {history[name][-1]:.4f}")
