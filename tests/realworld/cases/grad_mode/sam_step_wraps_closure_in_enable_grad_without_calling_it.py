"""SAM.step (davda54/sam) writes `torch.enable_grad()(closure)` to run the closure with gradients enabled inside the @torch.no_grad() step, but that only builds the decorated function and never calls it: after first_step has moved the weights to w + e(w) and zeroed the gradients there is no second forward-backward, second_step skips every parameter (grad None), never moves back to w and the base optimizer does not update, so each step only climbs the loss.

source: https://github.com/davda54/sam/commit/3a6c392b2e0eeecba939c38fa7f4cd30575a04dd
kind: bug
symptom: silent
verified: the closure runs 0 times and the training loss rises over 30 steps (from about 1.1 to about 106; it falls to about 0.7 with the fix)
"""
import torch


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"

        defaults = dict(rho=rho, **kwargs)
        super(SAM, self).__init__(params, defaults)

        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)

            for p in group["params"]:
                if p.grad is None: continue
                e_w = p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"
                self.state[p]["e_w"] = e_w

        if zero_grad: self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None: continue
                p.sub_(self.state[p]["e_w"])  # get back to "w" from "w + e(w)"

        self.base_optimizer.step()  # do the actual "sharpness-aware" update

        if zero_grad: self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"

        self.first_step(zero_grad=True)
        torch.enable_grad()(closure)  # ROOT
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        norm = torch.norm(
                    torch.stack([
                        p.grad.norm(p=2).to(shared_device)
                        for group in self.param_groups for p in group["params"]
                        if p.grad is not None
                    ]),
                    p=2
               )
        return norm


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.5, lr=0.1, momentum=0.9)
inputs, targets = torch.randn(64, 10), torch.randint(0, 3, (64,))
loss_function = torch.nn.CrossEntropyLoss()
calls = 0


def closure():
    global calls
    calls += 1
    loss = loss_function(model(inputs), targets)
    loss.backward()
    return loss


for step in range(30):
    loss = loss_function(model(inputs), targets)
    loss.backward()
    optimizer.step(closure)
    optimizer.zero_grad()
    if step in (0, 29):
        print(f"step {step}: loss {loss.item():.3f}")
print("closure calls:", calls)
