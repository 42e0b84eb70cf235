"""prob_mbrl's `GaussianMixtureDensity.forward` picks a mixture component with a straight-through Gumbel-softmax, but writes `k = ((k_hard - k_soft).detach() + k_hard)`: the expression's value is the hard one-hot and its only differentiable term is `k_hard` (a scatter of constants), so no gradient reaches the mixture logits; policy optimisation through sampled model rollouts silently ignores how the policy's actions change which dynamics mode is selected. As upstream (examples/deep_pilco_*.py: `opt1 = torch.optim.Adam(dyn.parameters(), ...)`, fitted by `utils.train_regressor` before each `mc_pilco`), the dynamics model has its own optimizer and a fitting step each iteration (added in session 42: the cut-down case had left it out, so the rollout's gradients into the dynamics model were in no optimizer).

source: https://github.com/mcgillmrl/prob_mbrl/commit/294e963839699363ee9a101d8b97eff1e62a8c8f
kind: bug
symptom: silent
verified: the rollout cost's gradient reaching the mixture logits is exactly 0.0 at every policy step (gradient into logit_pi: 0.000000); the look-alike's is non-zero
"""
import torch
from torch.nn.functional import log_softmax

torch.manual_seed(0)


class StochasticModule(torch.nn.Module):
    def resample(self, *args, **kwargs):
        pass


class GaussianMixtureDensity(StochasticModule):
    def __init__(self, output_dims, n_components, **kwargs):
        super(GaussianMixtureDensity, self).__init__(**kwargs)
        self.n_components = n_components
        self.output_dims = output_dims
        self.register_buffer('z_normal', torch.ones([1, 1]))
        self.register_buffer('z_pi', torch.ones([1, 1]))

    def forward(self, x, return_samples=False, output_noise=True, resample_output_noise=True,
                sampling_temperature=0.1, **kwargs):
        D = int(self.output_dims)
        nD = D * self.n_components
        mean, log_std, extras = x.split(nD, -1)
        logit_pi, log_temperature = extras.split(self.n_components, -1)
        mean = mean.view(-1, D, self.n_components)
        log_std = log_std.view(-1, D, self.n_components)
        temp = 1e-1 + torch.nn.functional.softplus(log_temperature)
        logit_pi = logit_pi / temp
        if return_samples:
            if (logit_pi.shape != self.z_pi.shape) or resample_output_noise:
                u = torch.distributions.utils.clamp_probs(torch.rand_like(logit_pi))
                self.z_pi.data = -(-u.log()).log()
            z1 = self.z_pi
            # sample from gumbel softmax
            k_soft = ((log_softmax(logit_pi, -1) + z1) / sampling_temperature).softmax(-1)
            k_idx = k_soft.argmax(-1).view(-1, 1)
            k_hard = torch.zeros_like(k_soft).scatter(1, k_idx, 1)
            # get hard max (but backprop through softmax)
            k = ((k_hard - k_soft).detach() + k_hard)[:, None, :]  # ROOT
            samples = (mean * k).sum(-1)
            if output_noise:
                if (mean[:-1].shape != self.z_pi.shape) or resample_output_noise:
                    self.z_normal.data = torch.randn(*mean.shape[:-1], device=mean.device)
                z2 = self.z_normal
                noise = z2 * (log_std * k).sum(-1).clamp(-15, 15).exp()
                return samples, noise
            return samples
        return mean, log_std, logit_pi


D, A, K, H = 2, 1, 3, 32
dyn_body = torch.nn.Sequential(torch.nn.Linear(D + A, H), torch.nn.Tanh())
dyn_head = torch.nn.Linear(H, 2 * D * K + 2 * K)
density = GaussianMixtureDensity(D, K)
policy = torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.Tanh(), torch.nn.Linear(H, A), torch.nn.Tanh())
policy_opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
dyn_opt = torch.optim.Adam([*dyn_body.parameters(), *dyn_head.parameters()], lr=1e-3)
logit_rows = slice(2 * D * K, 2 * D * K + K)

for it in range(4):
    xu = torch.randn(64, D + A)  # fit the dynamics model to transitions (upstream's train_regressor with opt1)
    dyn_opt.zero_grad()
    fit = ((dyn_head(dyn_body(xu))[:, :D] - 0.1 * xu[:, :D]) ** 2).mean()
    fit.backward()
    dyn_opt.step()
    policy_opt.zero_grad()
    dyn_head.zero_grad()
    x = torch.randn(64, D) * 0.5
    cost = 0.0
    for t in range(10):  # rollout through the learned mixture dynamics
        a = policy(x)
        delta, noise = density(dyn_head(dyn_body(torch.cat([x, a], -1))), return_samples=True)
        x = x + delta + 0.01 * noise
        cost = cost + (x ** 2).sum(-1).mean()
    cost.backward()
    policy_opt.step()
    logit_grad = dyn_head.weight.grad[logit_rows].norm().item()  # measurement only
    print(f"iteration {it}: rollout cost {cost.item():.3f}  gradient into logit_pi: {logit_grad:.6f}")
