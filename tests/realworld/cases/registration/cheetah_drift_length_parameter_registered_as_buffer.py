"""Cheetah's beamline elements store their constructor arguments with `self.register_buffer("length", torch.as_tensor(length, **factory_kwargs))`: an `nn.Parameter` passed to `Drift(length=nn.Parameter(...))` becomes a buffer, so it is missing from `segment.parameters()` and the Adam optimizer built from them never moves it (it still receives a gradient), while a parameter assigned after construction (`quad.k1 = nn.Parameter(...)`) is registered and trained.

source: https://github.com/desy-ml/cheetah/issues/302
kind: bug
symptom: silent
verified: after 30 Adam steps the drift length is still 1.0 (its .grad is set but it is not among segment.parameters(): 1 parameter, k1); the look-alike lists 2 parameters and moves the drift length
"""
import torch
from torch import nn

torch.manual_seed(0)


class Element(nn.Module):
    def __init__(self, name=None):
        super().__init__()
        self.name = name

    def transfer_map(self, energy):
        raise NotImplementedError

    def track(self, beam, energy):
        return beam @ self.transfer_map(energy).transpose(-1, -2)


class Drift(Element):
    def __init__(self, length, name=None, device=None, dtype=torch.float32):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__(name=name)
        self.register_buffer("length", torch.as_tensor(length, **factory_kwargs))  # ROOT

    def transfer_map(self, energy):
        one, zero = torch.ones_like(self.length), torch.zeros_like(self.length)
        return torch.stack([torch.stack([one, self.length]), torch.stack([zero, one])])


class Quadrupole(Element):
    def __init__(self, length, k1=0.0, name=None, device=None, dtype=torch.float32):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__(name=name)
        self.register_buffer("length", torch.as_tensor(length, **factory_kwargs))
        self.register_buffer("k1", torch.as_tensor(k1, **factory_kwargs))

    def transfer_map(self, energy):
        # thin-lens approximation
        one, zero = torch.ones_like(self.k1), torch.zeros_like(self.k1)
        return torch.stack([torch.stack([one, zero]), torch.stack([-self.k1 * self.length, one])])


class Segment(Element):
    def __init__(self, elements, name=None):
        super().__init__(name=name)
        self.elements = nn.ModuleList(elements)

    def track(self, beam, energy=1e8):
        for element in self.elements:
            beam = element.track(beam, energy)
        return beam


drift = Drift(length=nn.Parameter(torch.tensor(1.0)), name="D1")
quad = Quadrupole(length=torch.tensor(0.2), name="Q1")
quad.k1 = nn.Parameter(torch.tensor(1.0))
segment = Segment([drift, quad, Drift(length=torch.tensor(0.5))])

incoming = torch.randn(256, 2) * torch.tensor([1e-3, 1e-4])
target_size = torch.tensor(0.5e-3)

print("trainable parameters:", [n for n, _ in segment.named_parameters()])
optimizer = torch.optim.Adam(segment.parameters(), lr=0.05)
for step in range(30):
    optimizer.zero_grad()
    outgoing = segment.track(incoming)
    loss = (outgoing[:, 0].std() - target_size) ** 2 * 1e6
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step}: loss {loss.item():.5f}")
print(f"drift length {drift.length.item():.3f}, k1 {quad.k1.item():.3f}")
