import torch
import torch.nn as nn
import torch.nn.functional as F


class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.cls = nn.Conv2d(8, 2, 1)

    @torch.inference_mode()  # ROOT
    def features(self, img):
        return F.relu(self.stem(img))

    def forward(self, img):
        return self.cls(self.features(img))


class LitSeg:
    def __init__(self):
        self.net = Segmenter()
        self.opt = torch.optim.Adam(self.net.parameters(), 1e-3)

    def training_step(self, batch):
        img, mask = batch
        loss = F.cross_entropy(self.net(img), mask)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss


LitSeg().training_step((torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2, 8, 8))))
