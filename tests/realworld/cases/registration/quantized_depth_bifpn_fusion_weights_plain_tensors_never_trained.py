"""lukasz-staniszewski/quantized-depth-estimation's `BiFPNDecoder.__init__` creates the BiFPN fast-normalised fusion weights as plain tensors (`self.p5_td_w1 = torch.tensor(1, dtype=torch.float, requires_grad=True)`). A plain tensor attribute is not registered with the module, so the weights are missing from `model.parameters()` and the optimizer built from it never updates them: backward fills their `.grad`, but every fusion keeps its initial equal weighting for the whole training, silently. The fix commit wraps each one in `nn.Parameter`.

source: https://github.com/lukasz-staniszewski/quantized-depth-estimation/commit/6dc44635dfa4a7033b73c222038c82fccbdfaeec
kind: bug
symptom: silent
verified: the optimizer holds 22 tensors and 0 of the 7 fusion weights; after 15 steps all 7 are still 1.0000 although backward gives them gradients (last norm 8.593e-08); in the look-alike the optimizer holds 29 tensors, all 7 fusion weights among them, and they move (range 0.9937 to 1.0063)
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

W = 16


def conv_block(cin):
    return nn.Sequential(nn.Conv2d(cin, W, 3, padding=1), nn.Conv2d(W, W, 3, padding=1, groups=W))


class BiFPNDecoder(nn.Module):
    """Fast-normalised BiFPN fusion over two pyramid levels (P4 at twice P5's resolution)."""

    def __init__(self, fpn_sizes):
        super().__init__()
        p4_channels, p5_channels = fpn_sizes
        self.p5_td_conv = nn.Conv2d(p5_channels, W, 3, padding=1)
        self.p5_td_w1 = torch.tensor(1, dtype=torch.float, requires_grad=True)  # ROOT
        self.p4_td_conv = nn.Conv2d(p4_channels, W, 3, padding=1)
        self.p4_td_mix = nn.Sequential(nn.Conv2d(W, W, 3, padding=1, groups=W), nn.ReLU(), nn.BatchNorm2d(W))
        self.p4_td_w1 = torch.tensor(1, dtype=torch.float, requires_grad=True)
        self.p4_td_w2 = torch.tensor(1, dtype=torch.float, requires_grad=True)
        self.p4_out_mix = nn.Sequential(nn.Conv2d(W, W, 3, padding=1, groups=W), nn.ReLU(), nn.BatchNorm2d(W))
        self.p4_out_w1 = torch.tensor(1, dtype=torch.float, requires_grad=True)
        self.p4_out_w2 = torch.tensor(1, dtype=torch.float, requires_grad=True)
        self.p5_out_mix = nn.Sequential(nn.Conv2d(W, W, 3, padding=1, groups=W), nn.ReLU(), nn.BatchNorm2d(W))
        self.p5_out_w1 = torch.tensor(1, dtype=torch.float, requires_grad=True)
        self.p5_out_w2 = torch.tensor(1, dtype=torch.float, requires_grad=True)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.down = nn.MaxPool2d(2)

    def fusion_weights(self):
        return [self.p5_td_w1, self.p4_td_w1, self.p4_td_w2, self.p4_out_w1, self.p4_out_w2,
                self.p5_out_w1, self.p5_out_w2]

    def forward(self, inputs):
        eps = 1e-4
        p4, p5 = inputs
        p5_in = self.p5_td_conv(p5)
        p5_td = (self.p5_td_w1 * p5_in) / (self.p5_td_w1 + eps)
        p4_in = self.p4_td_conv(p4)
        p4_td = self.p4_td_mix((self.p4_td_w1 * p4_in + self.p4_td_w2 * self.up(p5_td))
                               / (self.p4_td_w1 + self.p4_td_w2 + eps))
        p4_out = self.p4_out_mix((self.p4_out_w1 * p4_in + self.p4_out_w2 * p4_td)
                                 / (self.p4_out_w1 + self.p4_out_w2 + eps))
        p5_out = self.p5_out_mix((self.p5_out_w1 * p5_td + self.p5_out_w2 * self.down(p4_out))
                                 / (self.p5_out_w1 + self.p5_out_w2 + eps))
        return p4_out, p5_out


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc4 = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.enc5 = nn.Sequential(nn.Conv2d(8, 12, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = BiFPNDecoder((8, 12))
        self.head = nn.Conv2d(W, 1, 1)

    def forward(self, img):
        p4 = self.enc4(img)
        p4_out, p5_out = self.decoder((p4, self.enc5(p4)))
        fused = p4_out + self.decoder.up(p5_out)
        return nn.functional.interpolate(self.head(fused), scale_factor=2, mode="bilinear")


def main():
    model = DepthNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    fusion = model.decoder.fusion_weights()
    print(f"optimizer holds {len(in_optimizer)} tensors, "
          f"{sum(id(w) in in_optimizer for w in fusion)} of {len(fusion)} fusion weights")
    gen = torch.Generator().manual_seed(1)
    img = torch.rand(4, 3, 16, 16, generator=gen)
    depth = img.mean(1, keepdim=True) * 10
    for step in range(15):
        for w in fusion:
            w.grad = None
        loss = nn.functional.l1_loss(model(img), depth)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    grad_norm = torch.stack([w.grad for w in fusion]).norm().item()
    values = [w.item() for w in fusion]
    print(f"after 15 steps: loss {loss.item():.4f}, fusion weights range {min(values):.4f} to "
          f"{max(values):.4f}, last fusion-weight gradient norm {grad_norm:.3e}")


if __name__ == "__main__":
    main()
