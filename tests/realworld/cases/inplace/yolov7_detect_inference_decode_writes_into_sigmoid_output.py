"""WongKinYiu/yolov7's `Detect.forward`, outside training mode, decodes the boxes by writing into the sigmoid output itself (`y = x[i].sigmoid()`, then `y[..., 0:2] = ...` and `y[..., 2:4] = ...`). Sigmoid saves its output for backward, so once these slice assignments bump its version any gradient through the inference output fails: an adversarial attack that backpropagates an objectness loss from the eval-mode model to the input perturbation crashes in `loss.backward()`, far from the head that did the write. The fix in the thread removes the in-place writes from `Detect.forward`; the look-alike decodes out of place (split the sigmoid output, compute xy and wh, concatenate).

source: https://github.com/WongKinYiu/yolov7/issues/1527
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Detect(nn.Module):
    stride = None
    export = False

    def __init__(self, nc=3, anchors=(), ch=()):
        super().__init__()
        self.nc, self.no = nc, nc + 5
        self.nl, self.na = len(anchors), len(anchors[0]) // 2
        self.grid = [torch.zeros(1)] * self.nl
        a = torch.tensor(anchors).float().view(self.nl, -1, 2)
        self.register_buffer("anchors", a)
        self.register_buffer("anchor_grid", a.clone().view(self.nl, 1, -1, 1, 1, 2))
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)

    def forward(self, x):
        z = []
        self.training |= self.export
        for i in range(self.nl):
            x[i] = self.m[i](x[i])
            bs, _, ny, nx = x[i].shape
            x[i] = x[i].view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            if not self.training:
                if self.grid[i].shape[2:4] != x[i].shape[2:4]:
                    self.grid[i] = self._make_grid(nx, ny)
                y = x[i].sigmoid()
                y[..., 0:2] = (y[..., 0:2] * 2.0 - 0.5 + self.grid[i]) * self.stride[i]  # ROOT
                y[..., 2:4] = (y[..., 2:4] * 2) ** 2 * self.anchor_grid[i]
                z.append(y.view(bs, -1, self.no))
        return x if self.training else (torch.cat(z, 1), x)

    @staticmethod
    def _make_grid(nx=20, ny=20):
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        return torch.stack((xv, yv), 2).view((1, 1, ny, nx, 2)).float()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU())
        self.p3 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.SiLU())
        self.p4 = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.SiLU())
        self.detect = Detect(nc=3, anchors=((10, 13, 16, 30), (30, 61, 62, 45)), ch=(16, 16))
        self.detect.stride = torch.tensor([4.0, 8.0])

    def forward(self, img):
        p3 = self.p3(self.stem(img))
        return self.detect([p3, self.p4(p3)])


def attack(model, img, steps=3, eps=8 / 255, alpha=2 / 255):
    delta = torch.zeros_like(img, requires_grad=True)
    for step in range(steps):
        pred, _ = model(img + delta)
        loss = pred[..., 4].max()
        loss.backward()
        with torch.no_grad():
            delta -= alpha * delta.grad.sign()
            delta.clamp_(-eps, eps)
        delta.grad.zero_()
        print(f"attack step {step} max objectness {loss.item():.4f}")
    return delta.detach()


def main():
    model = Model().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    img = torch.rand(1, 3, 32, 32)
    attack(model, img)


if __name__ == "__main__":
    main()
