"""fairseq2's Wav2Vec2Model.run_frontend after PR 731: the contrastive targets are targets = seqs.clone(), a copy that stays in the graph, so the loss through the quantized targets also trains the convolutional feature extractor.

source: https://github.com/facebookresearch/fairseq2/pull/731
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn


class GumbelVectorQuantizer(nn.Module):
    def __init__(self, input_dim, output_dim, num_codebooks=2, num_codebook_entries=8):
        super().__init__()
        self.num_codebooks, self.num_codebook_entries = num_codebooks, num_codebook_entries
        self.entry_proj = nn.Linear(input_dim, num_codebooks * num_codebook_entries)
        self.entries = nn.Parameter(torch.randn(1, num_codebooks * num_codebook_entries, output_dim // num_codebooks))
        self.output_dim = output_dim

    def forward(self, x):
        bsz, tsz, _ = x.shape
        x = self.entry_proj(x).view(bsz * tsz * self.num_codebooks, -1)
        x = F.gumbel_softmax(x.float(), tau=2.0, hard=True).type_as(x)
        x = x.view(bsz * tsz, -1)
        x = x.unsqueeze(-1) * self.entries
        x = x.view(bsz * tsz, self.num_codebooks, self.num_codebook_entries, -1).sum(-2)
        return x.view(bsz, tsz, -1)


class Wav2Vec2Model(nn.Module):  # frontend, masker, encoder and quantizer reduced to a few layers
    def __init__(self, model_dim=16, final_dim=8, num_distractors=4):
        super().__init__()
        self.feature_extractor = nn.Conv1d(1, model_dim, kernel_size=10, stride=5)
        self.mask_embed = nn.Parameter(torch.rand(model_dim))
        self.encoder = nn.TransformerEncoderLayer(model_dim, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.final_proj = nn.Linear(model_dim, final_dim)
        self.quantizer = GumbelVectorQuantizer(model_dim, 16)
        self.final_target_proj = nn.Linear(self.quantizer.output_dim, final_dim)
        self.num_distractors = num_distractors

    def run_frontend(self, seqs):
        seqs = self.feature_extractor(seqs.unsqueeze(1)).transpose(1, 2)
        # We use the extracted features as context network targets after masking and quantization.
        targets = seqs.clone()
        self.unmasked_targets = targets  # measurement only
        if targets.requires_grad:
            targets.retain_grad()
        n, s = seqs.shape[:2]  # the masker: half of the time steps of every sequence
        temporal_mask = torch.zeros(n, s, dtype=torch.bool).scatter(1, torch.rand(n, s).argsort(1)[:, :s // 2], True)
        seqs = torch.where(temporal_mask.unsqueeze(-1), self.mask_embed, seqs)
        targets = targets[temporal_mask].view(seqs.shape[0], -1, seqs.shape[-1])
        return seqs, targets, temporal_mask

    def forward(self, seqs):
        seqs, targets, temporal_mask = self.run_frontend(seqs)
        encoder_output = self.encoder(seqs)
        seqs = self.final_proj(encoder_output[temporal_mask].view(targets.shape[0], -1, encoder_output.shape[-1]))
        targets = self.final_target_proj(self.quantizer(targets))
        n, s, m = targets.shape
        rand_indices = torch.randint(0, s, (n, s * self.num_distractors))
        distractors = targets[torch.arange(n).unsqueeze(1), rand_indices].view(n, s, self.num_distractors, m)
        candidates = torch.cat([targets.unsqueeze(2), distractors], dim=2)
        logits = torch.cosine_similarity(seqs.unsqueeze(2), candidates, dim=-1) / 0.1
        return F.cross_entropy(logits.reshape(-1, self.num_distractors + 1), torch.zeros(n * s, dtype=torch.long))


torch.manual_seed(0)
model = Wav2Vec2Model()
loss = model(torch.randn(4, 1005))  # 4 waveforms of 200 frames
loss.backward()
grad = model.unmasked_targets.grad
print("targets require grad", model.unmasked_targets.requires_grad, "gradient reaching them", None if grad is None else round(grad.norm().item(), 4))
print("feature extractor weight grad norm", round(model.feature_extractor.weight.grad.norm().item(), 4))
