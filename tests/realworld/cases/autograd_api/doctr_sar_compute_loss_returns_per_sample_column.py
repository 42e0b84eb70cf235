"""docTR SAR recognition (PyTorch): compute_loss returns ce_loss.unsqueeze(1), one masked cross-entropy per word, and the training script calls backward on it, which needs a scalar.

source: https://github.com/mindee/doctr/pull/379
kind: bug
symptom: crash
verified: grad can be implicitly created only for scalar outputs
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SAR(nn.Module):
    def __init__(self, vocab_size=10, max_length=6, hidden=16):
        super().__init__()
        self.vocab_size, self.max_length = vocab_size, max_length
        self.feat = nn.Sequential(nn.Conv2d(3, hidden, 3, padding=1), nn.AdaptiveAvgPool2d((1, max_length + 1)))
        self.decoder = nn.Linear(hidden, vocab_size + 1)

    def forward(self, x, gt, seq_len):
        feats = self.feat(x).squeeze(2).transpose(1, 2)
        logits = self.decoder(feats)
        return {"loss": self.compute_loss(logits, gt, seq_len)}

    @staticmethod
    def compute_loss(model_output, gt, seq_len):
        input_len = model_output.shape[1]
        seq_len = seq_len + 1
        cce = F.cross_entropy(model_output.permute(0, 2, 1), gt, reduction="none")
        mask_2d = torch.arange(input_len)[None, :] >= seq_len[:, None]
        cce[mask_2d] = 0
        ce_loss = cce.sum(1) / seq_len.to(dtype=torch.float32)
        return ce_loss.unsqueeze(1)  # ROOT


torch.manual_seed(0)
model = SAR()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.randn(4, 3, 8, 32)
gt = torch.randint(0, 11, (4, 7))
seq_len = torch.tensor([3, 5, 2, 6])
out = model(images, gt, seq_len)
optimizer.zero_grad()
out["loss"].backward()  # SYMPTOM
optimizer.step()
