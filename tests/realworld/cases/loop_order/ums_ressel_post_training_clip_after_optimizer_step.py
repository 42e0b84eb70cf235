"""UMS-ResSel post_training.py clips the gradient norm after self.optimizer.step(), when the step has already used the unclipped gradients (and zero_grad clears the clipped ones).

source: https://github.com/taesunwhang/UMS-ResSel/issues/3
kind: bug
symptom: silent
verified: with max_gradient_norm = 0.25 the gradient norm the optimizer steps on is 1.09, 1.10 and 1.15 at the 3 steps (nothing is clipped); with the clip before the step (the author's fix) it is 0.25 each time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BertPostTraining(nn.Module):
    def __init__(self, vocab=100, hidden=32):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.encoder = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh())
        self.mlm_head = nn.Linear(hidden, vocab)
        self.nsp_head = nn.Linear(hidden, 2)

    def forward(self, input_ids, masked_lm_labels, next_sentence_labels):
        h = self.encoder(self.embeddings(input_ids))
        mlm_loss = F.cross_entropy(self.mlm_head(h).view(-1, 100), masked_lm_labels.view(-1))
        nsp_loss = F.cross_entropy(self.nsp_head(h[:, 0]), next_sentence_labels)
        return mlm_loss, nsp_loss


class PostTraining(object):
    def __init__(self, max_gradient_norm=0.25):
        torch.manual_seed(0)
        self.model = BertPostTraining()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-5)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: 1.0)
        self.max_gradient_norm = max_gradient_norm

    def train(self, batches):
        self.model.train()
        for buffer_batch in batches:
            mlm_loss, nsp_loss = self.model(*buffer_batch)
            loss = mlm_loss + nsp_loss
            loss.backward()
            self.optimizer.step()
            if self.max_gradient_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_gradient_norm)  # ROOT
            self.optimizer.zero_grad()
            self.scheduler.step()


torch.manual_seed(1)
batches = [(torch.randint(0, 100, (8, 16)), torch.randint(0, 100, (8, 16)), torch.randint(0, 2, (8,)))
           for _ in range(3)]
PostTraining().train(batches)
