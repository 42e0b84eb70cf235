"""Supervised contrastive fine-tuning with the contrastive loss ported to torch (the fix in the thread), so both terms train the encoder.

source: https://github.com/sl-93/SUPERVISED-CONTRASTIVE-LEARNING-FOR-PRE-TRAINED-LANGUAGE-MODEL-FINE-TUNING/issues/2
kind: lookalike
"""
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


def sim_matrix(a, b, eps=1e-8):
    a_n, b_n = a.norm(dim=1)[:, None], b.norm(dim=1)[:, None]
    a_norm = a / torch.clamp(a_n, min=eps)
    b_norm = b / torch.clamp(b_n, min=eps)
    return torch.mm(a_norm, b_norm.transpose(0, 1))


def contrastive_loss(temp, embedding, label):
    cosine_sim = sim_matrix(embedding, embedding)
    n = cosine_sim.shape[0]
    dis = cosine_sim.masked_select(~torch.eye(n, dtype=torch.bool)).view(n, n - 1)
    dis = torch.exp(dis / temp)
    row_sum = dis.sum(dim=1)
    contrastive_loss = 0
    for i in range(n):
        n_i = label.tolist().count(label[i]) - 1
        inner_sum = 0
        for j in range(n - 1):
            if label[i] == label[j]:
                inner_sum = inner_sum + torch.log(dis[i][j] / row_sum[i])
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
    contrastive_l = contrastive_loss(tem, hiden_state, b_labels)
    loss = (lam * contrastive_l) + (1 - lam) * (cross_loss)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
