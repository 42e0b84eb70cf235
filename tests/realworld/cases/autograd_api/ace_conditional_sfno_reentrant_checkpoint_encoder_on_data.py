"""ACE's conditional SFNO checkpoints its encoder with checkpoint(self.encoder, x) and no use_reentrant argument, so the reentrant implementation runs: the encoder's input is data that does not require grad, the checkpoint's output then has no grad_fn, and with checkpointing >= 1 the encoder's parameters keep grad None and are never trained (only a UserWarning is printed).

source: https://github.com/ai2cm/ace/pull/1493
kind: bug
symptom: silent
verified: after 5 steps with checkpointing=1 encoder.0.weight, encoder.0.bias and encoder.2.weight have grad None and are unchanged (max change 0.0) while the blocks and the decoder train
"""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class FourierNeuralOperatorBlock(nn.Module):  # stands for the SFNO block (spectral filter + MLP); the context is unused here
    def __init__(self, embed_dim):
        super().__init__()
        self.filter = nn.Conv2d(embed_dim, embed_dim, 3, padding=1)
        self.mlp = nn.Sequential(nn.Conv2d(embed_dim, embed_dim, 1), nn.GELU())

    def forward(self, x, context):
        return x + self.mlp(self.filter(x))


class SphericalFourierNeuralOperatorNet(nn.Module):  # LoRAConv2d -> nn.Conv2d (lora_rank=0), big skip and filters left out
    def __init__(self, in_chans=3, out_chans=3, embed_dim=8, num_layers=2, encoder_layers=1, checkpointing=0):
        super().__init__()
        self.checkpointing = checkpointing
        current_dim, encoder_modules = in_chans, []
        for i in range(encoder_layers):
            encoder_modules.append(nn.Conv2d(current_dim, embed_dim, 1, bias=True))
            encoder_modules.append(nn.GELU())
            current_dim = embed_dim
        encoder_modules.append(nn.Conv2d(current_dim, embed_dim, 1, bias=False))
        self.encoder = nn.Sequential(*encoder_modules)
        self.blocks = nn.ModuleList(FourierNeuralOperatorBlock(embed_dim) for _ in range(num_layers))
        decoder_modules = [nn.Conv2d(embed_dim, embed_dim, 1, bias=True), nn.GELU(), nn.Conv2d(embed_dim, out_chans, 1, bias=False)]
        self.decoder = nn.Sequential(*decoder_modules)

    def _forward_features(self, x, context):
        for blk in self.blocks:
            if self.checkpointing >= 3:
                x = checkpoint(blk, x, context)
            else:
                x = blk(x, context)
        return x

    def forward(self, x, context):
        if self.checkpointing >= 1:
            x = checkpoint(self.encoder, x)  # ROOT
        else:
            x = self.encoder(x)
        x = self._forward_features(x, context)
        if self.checkpointing >= 1:
            x = checkpoint(self.decoder, x)
        else:
            x = self.decoder(x)
        return x


torch.manual_seed(0)
model = SphericalFourierNeuralOperatorNet(checkpointing=1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
before = {n: p.detach().clone() for n, p in model.named_parameters()}
for step in range(5):
    x, target = torch.randn(4, 3, 8, 16), torch.randn(4, 3, 8, 16)  # the atmosphere state: data, no grad
    loss = nn.functional.mse_loss(model(x, context=None), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
for name, p in model.named_parameters():
    print(name, "grad None" if p.grad is None else "grad ok",
          "max change", round((p.detach() - before[name]).abs().max().item(), 6))
