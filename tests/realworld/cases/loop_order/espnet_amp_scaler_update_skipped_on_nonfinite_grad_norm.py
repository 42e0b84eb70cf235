"""ESPnet2 trainer with AMP: when the clipped grad norm is not finite the step is skipped, and scaler.update() is skipped with it, so the next iteration's scaler.unscale_() finds the optimizer already unscaled.

source: https://github.com/espnet/espnet/pull/2362
kind: bug
symptom: crash
verified: unscale_() has already been called on this optimizer since the last update()
"""
import logging

import torch
import torch.nn as nn


class ESPnetASRModel(nn.Module):
    def __init__(self, idim=8, odim=6):
        super().__init__()
        self.encoder = nn.LSTM(idim, 16, batch_first=True)
        self.ctc_lo = nn.Linear(16, odim)
        self.ctc = nn.CTCLoss(reduction="sum", zero_infinity=False)

    def forward(self, speech, speech_lengths, text, text_lengths):
        hs, _ = self.encoder(speech)
        log_probs = self.ctc_lo(hs).log_softmax(-1).transpose(0, 1)
        return self.ctc(log_probs, text, speech_lengths, text_lengths) / speech.shape[0]


def train_one_epoch(model, iterator, optimizers, schedulers, scaler, grad_clip=5.0):
    for iiter, batch in enumerate(iterator):
        with torch.autocast("cpu", enabled=scaler is not None, dtype=torch.bfloat16):
            loss = model(**batch)
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        for optim in optimizers:
            if scaler is not None:
                scaler.unscale_(optim)  # SYMPTOM
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
        if not torch.isfinite(grad_norm):
            logging.warning(f"The grad norm is {grad_norm}. Skipping updating the model.")
        else:
            for iopt, (optimizer, scheduler) in enumerate(zip(optimizers, schedulers)):
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()  # ROOT
                else:
                    optimizer.step()
        for optimizer in optimizers:
            optimizer.zero_grad()


torch.manual_seed(0)
model = ESPnetASRModel()
optimizers = [torch.optim.Adam(model.parameters(), lr=1e-3)]
schedulers = [None]
scaler = torch.amp.GradScaler("cpu")
iterator = [
    # an utterance shorter than its transcript: CTC loss is inf
    dict(speech=torch.randn(2, 3, 8), speech_lengths=torch.tensor([3, 3]),
         text=torch.tensor([[1, 2, 3, 4], [1, 2, 0, 0]]), text_lengths=torch.tensor([4, 2])),
    dict(speech=torch.randn(2, 10, 8), speech_lengths=torch.tensor([10, 10]),
         text=torch.tensor([[1, 2, 3], [4, 5, 1]]), text_lengths=torch.tensor([3, 3])),
]
train_one_epoch(model, iterator, optimizers, schedulers, scaler)
