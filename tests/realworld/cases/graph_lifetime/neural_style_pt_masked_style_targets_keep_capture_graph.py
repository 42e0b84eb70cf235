"""neural-style-pt's `MaskedStyleLoss` captures its per-colour target Gram matrices in 'capture' mode without detaching them (`self.target_grams.append(masked_gram.mul(self.blend_weight))`), while the network's weights still require grad (they are frozen only after the capture passes). Every style loss computed in 'loss' mode is therefore connected to the capture pass's graph; the first `loss.backward()` in the optimizer's closure frees it, and the second evaluation fails. The repository had hidden this with `loss.backward(retain_graph=True)`, which the same fix commit removed once the targets were detached.

source: https://github.com/ProGamerGov/neural-style-pt/commit/dc7ec2efb38980f3303959cb1d3b66392430001f
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class GramMatrix(nn.Module):
    def forward(self, x):
        _, c, h, w = x.shape
        flat = x.view(c, h * w)
        return flat @ flat.t()


class ContentLoss(nn.Module):
    def __init__(self, strength):
        super().__init__()
        self.strength, self.mode, self.crit = strength, "none", nn.MSELoss()

    def forward(self, x):
        if self.mode == "capture":
            self.target = x.detach()
        elif self.mode == "loss":
            self.loss = self.crit(x, self.target) * self.strength
        return x


class MaskedStyleLoss(nn.Module):
    def __init__(self, strength, style_masks, content_masks):
        super().__init__()
        self.strength, self.mode, self.blend_weight = strength, "none", 1.0
        self.style_masks, self.content_masks = style_masks, content_masks
        self.gram, self.crit = GramMatrix(), nn.MSELoss()
        self.target_grams = []

    def forward(self, x):
        if self.mode == "none":
            return x
        masks = self.style_masks if self.mode == "capture" else self.content_masks
        loss = 0
        for j, mask in enumerate(masks):
            mask = nn.functional.interpolate(mask[None, None], size=x.shape[-2:])[0, 0]
            mean = mask.mean()
            gram = self.gram(x * mask) / (x.nelement() * mean)
            if self.mode == "capture":
                if j >= len(self.target_grams):
                    self.target_grams.append(gram.mul(self.blend_weight))  # ROOT
                else:
                    self.target_grams[j] = self.target_grams[j] + gram.detach().mul(self.blend_weight)
            else:
                loss = loss + self.crit(gram, self.target_grams[j]) * mean * self.strength
        self.loss = loss
        return x


def build_net(style_masks, content_masks):
    layers, content_losses, style_losses = [], [], []
    chans = [3, 8, 16]
    for i in range(2):
        layers += [nn.Conv2d(chans[i], chans[i + 1], 3, padding=1), nn.ReLU()]
        sl = MaskedStyleLoss(100.0, style_masks, content_masks)
        layers.append(sl)
        style_losses.append(sl)
        if i == 1:
            cl = ContentLoss(1.0)
            layers.append(cl)
            content_losses.append(cl)
        layers.append(nn.AvgPool2d(2))
    return nn.Sequential(*layers), content_losses, style_losses


def main():
    size = 16
    content_image, style_image = torch.rand(1, 3, size, size), torch.rand(1, 3, size, size)
    left = torch.zeros(size, size)
    left[:, : size // 2] = 1.0
    style_masks = content_masks = [left, 1.0 - left]
    net, content_losses, style_losses = build_net(style_masks, content_masks)

    for m in content_losses:
        m.mode = "capture"
    net(content_image)
    for m in content_losses:
        m.mode = "none"
    for m in style_losses:
        m.mode = "capture"
    net(style_image)
    for m in content_losses + style_losses:
        m.mode = "loss"
    for param in net.parameters():
        param.requires_grad = False

    img = content_image.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([img], max_iter=5)
    calls = [0]

    def feval():
        calls[0] += 1
        optimizer.zero_grad()
        net(img)
        loss = sum(m.loss for m in content_losses) + sum(m.loss for m in style_losses)
        loss.backward()
        print(f"evaluation {calls[0]} loss {loss.item():.3e}")
        return loss

    for _ in range(2):
        optimizer.step(feval)


if __name__ == "__main__":
    main()
