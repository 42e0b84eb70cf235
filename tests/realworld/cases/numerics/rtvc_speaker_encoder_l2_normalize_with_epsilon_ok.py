"""Real-Time-Voice-Cloning's SpeakerEncoder after PR 678: the L2 normalization of the embeddings and of both centroids divides by (norm + 1e-5), so an utterance whose ReLU output is all zeros gets a zero embedding instead of NaN and the GE2E loss and every weight stay finite.

source: https://github.com/CorentinJ/Real-Time-Voice-Cloning/pull/678
kind: lookalike
"""
import numpy as np
import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_

mel_n_channels = 40
model_hidden_size = 16  # 256 upstream
model_embedding_size = 4  # 256 upstream
model_num_layers = 1  # 3 upstream
speakers_per_batch, utterances_per_speaker = 4, 5


class SpeakerEncoder(nn.Module):
    def __init__(self, device, loss_device):
        super().__init__()
        self.loss_device = loss_device
        self.lstm = nn.LSTM(input_size=mel_n_channels, hidden_size=model_hidden_size,
                            num_layers=model_num_layers, batch_first=True).to(device)
        self.linear = nn.Linear(in_features=model_hidden_size, out_features=model_embedding_size).to(device)
        self.relu = torch.nn.ReLU().to(device)
        self.similarity_weight = nn.Parameter(torch.tensor([10.])).to(loss_device)
        self.similarity_bias = nn.Parameter(torch.tensor([-5.])).to(loss_device)
        self.loss_fn = nn.CrossEntropyLoss().to(loss_device)

    def do_gradient_ops(self):
        self.similarity_weight.grad *= 0.01
        self.similarity_bias.grad *= 0.01
        clip_grad_norm_(self.parameters(), 3, norm_type=2)

    def forward(self, utterances, hidden_init=None):
        out, (hidden, cell) = self.lstm(utterances, hidden_init)
        embeds_raw = self.relu(self.linear(hidden[-1]))
        self.n_dead = int((embeds_raw.detach().abs().sum(dim=1) == 0).sum())  # measurement only
        embeds = embeds_raw / (torch.norm(embeds_raw, dim=1, keepdim=True) + 1e-5)
        return embeds

    def similarity_matrix(self, embeds):
        speakers_per_batch, utterances_per_speaker = embeds.shape[:2]
        centroids_incl = torch.mean(embeds, dim=1, keepdim=True)
        centroids_incl = centroids_incl.clone() / (torch.norm(centroids_incl, dim=2, keepdim=True) + 1e-5)
        centroids_excl = (torch.sum(embeds, dim=1, keepdim=True) - embeds)
        centroids_excl /= (utterances_per_speaker - 1)
        centroids_excl = centroids_excl.clone() / (torch.norm(centroids_excl, dim=2, keepdim=True) + 1e-5)
        sim_matrix = torch.zeros(speakers_per_batch, utterances_per_speaker, speakers_per_batch).to(self.loss_device)
        mask_matrix = 1 - np.eye(speakers_per_batch, dtype=int)
        for j in range(speakers_per_batch):
            mask = np.where(mask_matrix[j])[0]
            sim_matrix[mask, :, j] = (embeds[mask] * centroids_incl[j]).sum(dim=2)
            sim_matrix[j, :, j] = (embeds[j] * centroids_excl[j]).sum(dim=1)
        sim_matrix = sim_matrix * self.similarity_weight + self.similarity_bias
        return sim_matrix

    def loss(self, embeds):
        speakers_per_batch, utterances_per_speaker = embeds.shape[:2]
        sim_matrix = self.similarity_matrix(embeds)
        sim_matrix = sim_matrix.reshape((speakers_per_batch * utterances_per_speaker, speakers_per_batch))
        ground_truth = np.repeat(np.arange(speakers_per_batch), utterances_per_speaker)
        target = torch.from_numpy(ground_truth).long().to(self.loss_device)
        return self.loss_fn(sim_matrix, target)


torch.manual_seed(7)
device = loss_device = torch.device("cpu")
model = SpeakerEncoder(device, loss_device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(1, 6):
    inputs = torch.randn(speakers_per_batch * utterances_per_speaker, 20, mel_n_channels)
    embeds = model(inputs)
    embeds_loss = embeds.view((speakers_per_batch, utterances_per_speaker, -1))
    loss = model.loss(embeds_loss)
    model.zero_grad()
    loss.backward()
    model.do_gradient_ops()
    optimizer.step()
    n_nan = sum(bool(torch.isnan(p).any()) for p in model.parameters())
    print("step", step, "dead utterances", model.n_dead, "loss", round(loss.item(), 4), "parameters with NaN", n_nan, "of", len(list(model.parameters())))
