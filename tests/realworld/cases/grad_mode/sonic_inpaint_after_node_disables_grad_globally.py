"""SONIC's inpainting optimizes the initial noise of a diffusion sampler with Adam. Run inside a ComfyUI workflow, another node had switched gradient tracking off globally (`torch.set_grad_enabled(False)` in its execute method, never restored), so every later node runs in no-grad mode: SONIC's loss has no grad_fn and its `backward()` raises. The cause is in a different node than the failing one.

source: https://github.com/ubc-vision/sonic/issues/2
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class TinyDenoiser(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, 32), nn.SiLU(), nn.Linear(32, dim))

    def forward(self, x, t):
        return self.net(torch.cat([x, t.expand(x.shape[0], 1)], dim=1))


class Pipe:
    """A deterministic few-step sampler: the image is a differentiable function of the initial noise."""

    def __init__(self, denoiser, steps=4):
        self.denoiser = denoiser.requires_grad_(False)
        self.steps = steps

    def __call__(self, noise):
        x = noise
        for i in range(self.steps, 0, -1):
            t = torch.tensor([[i / self.steps]])
            x = x - self.denoiser(x, t) / self.steps
        return x


class LoadImageNode:
    def execute(self):
        return torch.randn(2, 16)


class ColorMatchNode:
    """An unrelated node earlier in the workflow."""

    def execute(self, image):
        torch.set_grad_enabled(False)  # ROOT
        mean, std = image.mean(dim=1, keepdim=True), image.std(dim=1, keepdim=True)
        return (image - mean) / std


def sonic_inpaint(pipe, image, mask, num_steps=30, lr=0.05):
    epsilon = torch.randn_like(image, requires_grad=True)
    optimizer = torch.optim.Adam([epsilon], lr=lr)
    for _ in range(num_steps):
        optimizer.zero_grad()
        out = pipe(epsilon)
        loss = ((out - image) * mask).pow(2).mean()
        loss.backward()
        optimizer.step()
    return pipe(epsilon).detach(), loss.item()


class SonicInpaintNode:
    def execute(self, pipe, image, mask):
        return sonic_inpaint(pipe, image, mask)


def run_workflow():
    pipe = Pipe(TinyDenoiser())
    image = LoadImageNode().execute()
    image = ColorMatchNode().execute(image)
    mask = (torch.rand_like(image) > 0.3).float()
    result, final_loss = SonicInpaintNode().execute(pipe, image, mask)
    print("inpainted:", tuple(result.shape), "final masked loss:", round(final_loss, 4))


if __name__ == "__main__":
    run_workflow()
