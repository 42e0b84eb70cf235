"""Supervised contrastive fine-tuning: the contrastive term is computed in numpy on hiden_state.cpu().detach().numpy(), so only the cross-entropy trains.

source: https://github.com/sl-93/SUPERVISED-CONTRASTIVE-LEARNING-FOR-PRE-TRAINED-LANGUAGE-MODEL-FINE-TUNING/issues/2
kind: bug
symptom: silent
verified: on the first batch (lam=0.9) the loss is 17.75, of which 0.9 * 19.65 is the contrastive term, yet the encoder embedding gradient equals that of 0.1 * cross-entropy alone (difference 0.0); the torch port of the same loss (same value 17.75) gives a gradient that differs from it by 0.074 (max abs)
"""
import numpy as np
import torch
from torch import nn


class Model_Classifier(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, num_labels, dropout):
        super().__init__()
        self.bert = nn.Sequential(nn.EmbeddingBag(200, embedding_dim), nn.Tanh())
        self.classifier = nn.Sequential(nn.Linear(embedding_dim, hidden_dim), nn.Dropout(dropout),
                                        nn.Linear(hidden_dim, num_labels))

    def forward(self, input_ids, attention_mask):
        last_hidden_state_cls = self.bert(input_ids * attention_mask)
        logits = self.classifier(last_hidden_state_cls)
        return logits, last_hidden_state_cls


def cosine_similarity(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def contrastive_loss(temp, embedding, label):
    cosine_sim = cosine_similarity(embedding, embedding)
    dis = cosine_sim[~np.eye(cosine_sim.shape[0], dtype=bool)].reshape(cosine_sim.shape[0], -1)
    dis = np.exp(dis / temp)
    row_sum = [sum(dis[i]) for i in range(len(embedding))]
    contrastive_loss = 0
    for i in range(len(embedding)):
        n_i = label.tolist().count(label[i]) - 1
        inner_sum = 0
        for j in range(len(embedding) - 1):
            if label[i] == label[j]:
                inner_sum = inner_sum + np.log(dis[i][j] / row_sum[i])
        if n_i != 0:
            contrastive_loss += (inner_sum / (-n_i))
    return contrastive_loss


torch.manual_seed(40)
model = Model_Classifier(32, 20, 2, dropout=0.1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, eps=1e-8)
loss_fn = nn.CrossEntropyLoss()
tem, lam = 0.3, 0.9
train_dataloader = [(torch.randint(1, 200, (8, 12)), torch.ones(8, 12, dtype=torch.long), torch.randint(0, 2, (8,)))
                    for _ in range(3)]
model.train()
for step, batch in enumerate(train_dataloader):
    b_input_ids, b_attn_mask, b_labels = batch
    model.zero_grad()
    logits, hiden_state = model(b_input_ids, b_attn_mask)
    cross_loss = loss_fn(logits, b_labels)
    contrastive_l = contrastive_loss(tem, hiden_state.cpu().detach().numpy(), b_labels)  # ROOT
    loss = (lam * contrastive_l) + (1 - lam) * (cross_loss)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
