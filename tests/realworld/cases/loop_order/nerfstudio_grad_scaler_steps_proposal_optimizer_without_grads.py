"""NeRF trainer with one optimizer per param group and a GradScaler; the proposal network is skipped on some iterations.

source: https://github.com/nerfstudio-project/nerfstudio/pull/1919
kind: bug
symptom: crash
verified: AssertionError: No inf checks were recorded for this optimizer.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Optimizers:
    def __init__(self, param_groups):
        self.parameters = param_groups
        self.optimizers = {name: torch.optim.Adam(params, lr=1e-3) for name, params in param_groups.items()}

    def zero_grad_all(self):
        for optimizer in self.optimizers.values():
            optimizer.zero_grad()

    def optimizer_scaler_step_all(self, grad_scaler):
        for param_group, optimizer in self.optimizers.items():
            grad_scaler.step(optimizer)  # ROOT


field = nn.Linear(3, 4)
proposal_network = nn.Linear(3, 1)
optimizers = Optimizers({'fields': list(field.parameters()),
                         'proposal_networks': list(proposal_network.parameters())})
grad_scaler = torch.amp.GradScaler('cpu')
for step in range(4):
    rays = torch.randn(16, 3)
    use_proposal = step % 2 == 0
    weights = torch.sigmoid(proposal_network(rays)) if use_proposal else torch.ones(16, 1)
    loss = (field(rays) * weights).pow(2).mean()
    optimizers.zero_grad_all()
    grad_scaler.scale(loss).backward()
    optimizers.optimizer_scaler_step_all(grad_scaler)
    grad_scaler.update()
