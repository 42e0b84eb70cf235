"""run_openai_gpt.py fine-tuning loop updates parameters but never zeroes gradients between minibatches.

source: https://github.com/huggingface/transformers/issues/340
kind: bug
symptom: silent
verified: model.lm_head.weight.grad holds the sum of the gradients of every minibatch
"""
import torch
import torch.nn as nn


class OpenAIGPTDoubleHeadsModel(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab)
        self.mc_head = nn.Linear(dim, 1)

    def forward(self, input_ids, mc_labels, lm_labels):
        h = self.embed(input_ids)
        lm_loss = nn.functional.cross_entropy(self.lm_head(h).flatten(0, 2), lm_labels.flatten())
        mc_loss = nn.functional.cross_entropy(self.mc_head(h.mean(2)).squeeze(-1), mc_labels)
        return lm_loss, mc_loss


torch.manual_seed(0)
model = OpenAIGPTDoubleHeadsModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=6.25e-5, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / 10)
input_ids = torch.randint(0, 16, (2, 2, 5))
mc_labels, lm_labels = torch.tensor([0, 1]), torch.randint(0, 16, (2, 2, 5))
train_dataloader = [(input_ids, mc_labels, lm_labels)] * 4
lm_coef = 0.9
model.train()
for step, batch in enumerate(train_dataloader):
    input_ids, mc_labels, lm_labels = batch
    losses = model(input_ids, mc_labels, lm_labels)
    loss = lm_coef * losses[0] + losses[1]
    loss.backward()  # ROOT
    optimizer.step()
    scheduler.step()
