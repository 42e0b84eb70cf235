"""SmoothInv's DiffusionRobustModel.diffusion_denoise runs the diffusion model's denoising step inside with torch.no_grad(); the classifier then sees a denoised image with no history, so the synthesis loss never reaches the perturbation delta and delta.grad is None after loss.backward().

source: https://github.com/locuslab/smoothinv/issues/1
kind: bug
symptom: crash
verified: 'NoneType' object has no attribute 'view'
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class GaussianDiffusion:  # the guided_diffusion pieces diffusion_denoise uses: q_sample and p_sample's pred_xstart
    def __init__(self, steps=100):
        betas = torch.linspace(1e-4, 0.02, steps)
        alphas_cumprod = torch.cumprod(1 - betas, dim=0)
        self.sqrt_alphas_cumprod = alphas_cumprod.sqrt()
        self.sqrt_one_minus_alphas_cumprod = (1 - alphas_cumprod).sqrt()

    def q_sample(self, x_start, t, noise):
        a = self.sqrt_alphas_cumprod[t].view(-1, 1, 1, 1)
        b = self.sqrt_one_minus_alphas_cumprod[t].view(-1, 1, 1, 1)
        return a * x_start + b * noise

    def p_sample(self, model, x, t, clip_denoised=True):
        eps = model(x)
        a = self.sqrt_alphas_cumprod[t].view(-1, 1, 1, 1)
        b = self.sqrt_one_minus_alphas_cumprod[t].view(-1, 1, 1, 1)
        pred_xstart = (x - b * eps) / a
        return {"pred_xstart": pred_xstart.clamp(-1, 1) if clip_denoised else pred_xstart}


class DiffusionRobustModel(nn.Module):
    def __init__(self, classifier, noise_sd, num_noise_vec=4):
        super().__init__()
        self.model = nn.Conv2d(3, 3, 3, padding=1).eval()  # stands for the 256x256 unconditional diffusion UNet
        self.diffusion = GaussianDiffusion()
        self.classifier = classifier
        self.num_noise_vec = num_noise_vec
        real_sigma, t = 0, 0
        while real_sigma < noise_sd * 2:
            t += 1
            real_sigma = self.diffusion.sqrt_one_minus_alphas_cumprod[t] / self.diffusion.sqrt_alphas_cumprod[t]
        self.sigma, self.t = noise_sd, t

    def forward(self, x):
        x = x.repeat((self.num_noise_vec, 1, 1, 1))
        x = x * 2 - 1
        x = self.diffusion_denoise(x, self.t)
        x = (x + 1) / 2
        out = F.softmax(self.classifier(x), dim=1)
        return torch.mean(out, dim=0, keepdims=True)

    def diffusion_denoise(self, x_start, t, multistep=False):
        t_batch = torch.tensor([t] * len(x_start))
        noise = torch.randn_like(x_start)
        x_t_start = self.diffusion.q_sample(x_start=x_start, t=t_batch, noise=noise)
        with torch.no_grad():  # ROOT
            out = self.diffusion.p_sample(self.model, x_t_start, t_batch, clip_denoised=True)['pred_xstart']
        return out


class SmoothInv():
    def __init__(self, max_steps, step_size, max_norm=None):
        self.max_steps, self.step_size, self.max_norm = max_steps, step_size, max_norm

    def synthesize(self, model, inputs, labels):
        batch_size = labels.shape[0]
        delta = torch.zeros((len(labels), *inputs.shape[1:]), dtype=inputs.dtype, requires_grad=True)
        optimizer = optim.SGD([delta], lr=self.step_size, momentum=0.9)
        for i in range(self.max_steps):
            adv = inputs + delta
            y_prob = model(adv)
            loss = F.nll_loss(torch.log(y_prob.clamp(min=1e-20)), labels)
            optimizer.zero_grad()
            loss.backward()
            grad_norms = delta.grad.view(batch_size, -1).norm(p=2, dim=1)  # SYMPTOM
            delta.grad.div_(grad_norms.view(-1, 1, 1, 1))
            optimizer.step()
            delta.data.add_(inputs)
            delta.data.clamp_(0, 1).sub_(inputs)
            delta.data.renorm_(p=2, dim=0, maxnorm=self.max_norm)
            print("iter %d loss %.6f" % (i, loss.item()))
        return inputs + delta


torch.manual_seed(0)
classifier = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
model = DiffusionRobustModel(classifier, noise_sd=0.25)
inputs, labels = torch.rand(1, 3, 16, 16), torch.tensor([3])
adv = SmoothInv(max_steps=3, step_size=0.5, max_norm=10.0).synthesize(model, inputs, labels)
