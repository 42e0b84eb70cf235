"""pytorch-pretrained-BERT after the hotfix: run_swag.py keeps every named parameter in the optimizer (`param_optimizer = [n for n in param_optimizer]`), so the pooler that BertForMultipleChoice classifies through is trained with the encoder and the classifier.

source: https://github.com/huggingface/transformers/commit/e02ce4dc7935582bf614eef0a480d3cb609ca062
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss

torch.manual_seed(0)


class BertPooler(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module):
    def __init__(self, vocab=100, hidden=32):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.LayerNorm = nn.LayerNorm(hidden)
        self.encoder = nn.TransformerEncoderLayer(hidden, 4, 64, dropout=0.0, batch_first=True)
        self.pooler = BertPooler(hidden)

    def forward(self, input_ids, token_type_ids, attention_mask):
        h = self.LayerNorm(self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        return h, self.pooler(h)


class BertForMultipleChoice(nn.Module):
    def __init__(self, num_choices=4, hidden=32):
        super().__init__()
        self.num_choices = num_choices
        self.bert = BertModel(hidden=hidden)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(hidden, 1)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        flat_input_ids = input_ids.view(-1, input_ids.size(-1))
        flat_token_type_ids = token_type_ids.view(-1, token_type_ids.size(-1))
        flat_attention_mask = attention_mask.view(-1, attention_mask.size(-1))
        _, pooled_output = self.bert(flat_input_ids, flat_token_type_ids, flat_attention_mask)
        logits = self.classifier(self.dropout(pooled_output))
        reshaped_logits = logits.view(-1, self.num_choices)
        return CrossEntropyLoss()(reshaped_logits, labels)


model = BertForMultipleChoice()

# Prepare optimizer
param_optimizer = list(model.named_parameters())
# hack to remove pooler, which is not used
# thus it produce None grad that break apex
param_optimizer = [n for n in param_optimizer]
no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']
optimizer_grouped_parameters = [
    {'params': [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)], 'weight_decay': 0.01},
    {'params': [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], 'weight_decay': 0.0}
]
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=1e-3)  # stands in for BertAdam

pooler_before = model.bert.pooler.dense.weight.detach().clone()
classifier_before = model.classifier.weight.detach().clone()
model.train()
for step in range(8):
    input_ids = torch.randint(1, 100, (2, 4, 10))
    segment_ids = torch.cat([torch.zeros(2, 4, 5), torch.ones(2, 4, 5)], -1).long()
    input_mask = torch.ones(2, 4, 10, dtype=torch.long)
    label_ids = torch.randint(0, 4, (2,))
    loss = model(input_ids, segment_ids, input_mask, label_ids)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)

# one more backward to show the pooler does receive a gradient
model(input_ids, segment_ids, input_mask, label_ids).backward()
print(f"loss {loss.item():.4f}; pooler grad norm {model.bert.pooler.dense.weight.grad.norm().item():.4f}; "
      f"pooler moved {(model.bert.pooler.dense.weight - pooler_before).abs().max().item():.6f}; "
      f"classifier moved {(model.classifier.weight - classifier_before).abs().max().item():.6f}")
