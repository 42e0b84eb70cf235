import torch
from loop import train_step
from state import make_state

state = make_state()
before = state.model.proj.weight.clone()
for _ in range(3):
    state = train_step(state, (torch.randn(8, 12), torch.randint(0, 2, (8,))))
print("model moved:", not torch.equal(before, state.model.proj.weight))
