"""Lofi training: the per-batch chord/melody losses are appended as graph tensors, averaged into epoch losses and handed to matplotlib.

source: https://github.com/jacbz/Lofi/issues/14
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plot
import torch
from torch import nn

NUM_EPOCHS, CHORD_PREDICTION_LENGTH, NOTE_TYPES = 2, 6, 12


class Model(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.encoder = nn.GRU(8, hidden, batch_first=True)
        self.mu, self.logvar = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.chords_out = nn.Linear(hidden, NOTE_TYPES)
        self.melody_out = nn.Linear(hidden, NOTE_TYPES)

    def forward(self, embeddings):
        h = self.encoder(embeddings)[1][-1]
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        steps = z.unsqueeze(1).repeat(1, CHORD_PREDICTION_LENGTH, 1)
        return self.chords_out(steps), self.melody_out(steps), kl


def compute_loss(data):
    embeddings, chords_gt, notes_gt = data
    pred_chords, pred_notes, kl = model(embeddings)
    loss_chords = ce_loss(pred_chords.permute(0, 2, 1), chords_gt).mean()
    loss_melody = ce_loss(pred_notes.permute(0, 2, 1), notes_gt).mean()
    loss_kl = kl * 1e-2
    loss_total = loss_chords + loss_kl + loss_melody
    return loss_total, loss_chords, loss_kl, loss_melody


torch.manual_seed(42)
ce_loss = nn.CrossEntropyLoss(reduction='none')
model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
train_dataloader = [(torch.randn(4, 5, 8), torch.randint(0, NOTE_TYPES, (4, CHORD_PREDICTION_LENGTH)),
                     torch.randint(0, NOTE_TYPES, (4, CHORD_PREDICTION_LENGTH))) for _ in range(3)]
epochs, training_losses_chords, training_losses_melodies = [], [], []
for epoch in range(NUM_EPOCHS):
    epochs.append(epoch)
    epoch_training_losses_chords = []
    epoch_training_losses_melodies = []
    model.train()
    for batch, data in enumerate(train_dataloader):
        loss, loss_chords, kl_loss, loss_melody = compute_loss(data)
        epoch_training_losses_chords.append(loss_chords)  # ROOT
        epoch_training_losses_melodies.append(loss_melody)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss = loss.item()
        print(f"\tBatch {batch}:\tLoss {loss:.3f} (C: {loss_chords:.3f} + KL: {kl_loss:.3f} + M: {loss_melody:.3f})")
    epoch_training_loss_chord = sum(epoch_training_losses_chords) / len(epoch_training_losses_chords)
    epoch_training_loss_melody = sum(epoch_training_losses_melodies) / len(epoch_training_losses_melodies)
    training_losses_chords.append(epoch_training_loss_chord)
    training_losses_melodies.append(epoch_training_loss_melody)

    fig, axs = plot.subplots(1, 2, figsize=(8, 4.5))
    axs[0].set_title('Chords loss')
    axs[0].plot(epochs, training_losses_chords, label='Train', color='royalblue')  # SYMPTOM
    axs[1].set_title('Melody loss')
    axs[1].plot(epochs, training_losses_melodies, label='Train', color='royalblue')
    plot.close(fig)
