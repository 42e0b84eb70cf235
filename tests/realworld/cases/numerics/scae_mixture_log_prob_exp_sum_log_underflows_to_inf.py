"""scae-pytorch's image likelihood `MixtureDistribution.log_prob` mixes the per-pixel Gaussian log-likelihoods of the capsule templates by computing `logits.exp().sum(dim=1).log()` (and the mixing log-probabilities with `.exp().sum().log()`): with a small pixel scale the per-pixel log-likelihoods are far below -104, `exp` underflows to 0 in float32 for every template, the log gives -inf, the loss is inf and its backward is 0/0 = NaN, so the first optimizer step turns every parameter of the decoder into NaN, with no error.

source: https://github.com/mlberkeley/scae-pytorch/commit/6a41748de91568a798cba8907e55241d2e1d2d2e
kind: bug
symptom: silent
verified: the first loss is inf and the template gradient holds NaN (True); after 20 steps the loss is nan and the templates are all NaN (True); the look-alike's loss falls from 6.01e+03 to 1.93e+03 with finite templates
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

K, H, W, CODE = 4, 8, 8, 6


class MixtureDistribution(torch.distributions.Distribution):
    arg_constraints = {}

    def __init__(self, mixing_logits, means, scale):
        super().__init__(validate_args=False)
        self._mixing_logits = mixing_logits
        self._distributions = torch.distributions.Normal(means, scale, validate_args=False)

    @property
    def mixing_log_prob(self):
        return self._mixing_logits - self._mixing_logits.exp().sum(dim=1, keepdim=True).log()

    def log_prob(self, value):
        logits = self._distributions.log_prob(value.unsqueeze(1))
        logits = logits.sum(dim=2) + self.mixing_log_prob.sum(dim=2)
        return logits.exp().sum(dim=1).log()  # ROOT


class TemplateImageDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.templates = nn.Parameter(torch.rand(K, 1, H, W))
        self.presence = nn.Linear(CODE, K)

    def forward(self, code):
        logits = self.presence(code)[:, :, None, None, None].expand(-1, K, 1, H, W)
        means = self.templates.unsqueeze(0).expand(code.shape[0], -1, -1, -1, -1)
        return MixtureDistribution(logits, means, scale=0.02)


decoder = TemplateImageDecoder()
opt = torch.optim.Adam(decoder.parameters(), lr=1e-2)
images = (torch.rand(16, 1, H, W) > 0.5).float()
codes = torch.randn(16, CODE)
for step in range(20):
    loss = -decoder(codes).log_prob(images).sum((1, 2)).mean()
    opt.zero_grad()
    loss.backward()
    if step == 0:
        first, grad_nan = loss.item(), decoder.templates.grad.isnan().any().item()
    opt.step()
print(f"first loss {first:.3g}, template grad has NaN: {grad_nan}")
print(f"loss after 20 steps {loss.item():.3g}, templates all NaN: {decoder.templates.isnan().all().item()}")
