"""TechQA layer-weighted BERT: forward overwrites the layer_weights Parameter with its softmax.

source: https://github.com/pytorch/pytorch/issues/44022
kind: bug
symptom: crash
verified: TypeError: cannot assign 'torch.FloatTensor' as parameter 'layer_weights' (torch.nn.Parameter or None expected)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BertForTechQALayer(nn.Module):
    def __init__(self, hidden_size=8, num_layers=3, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(30, hidden_size)
        self.layers = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
        self.layer_weights = nn.Parameter(torch.ones(num_layers))
        self.qa_outputs = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids, start_positions):
        hidden, all_layers = self.embeddings(input_ids), []
        for layer in self.layers:
            hidden = torch.tanh(layer(hidden))
            all_layers.append(hidden)
        self.layer_weights = F.softmax(self.layer_weights, dim=0)  # ROOT
        sequence_output = sum(w * h for w, h in zip(self.layer_weights, all_layers))
        start_logits = self.qa_outputs(sequence_output)[..., 0]
        return F.cross_entropy(start_logits, start_positions)


torch.manual_seed(0)
model = BertForTechQALayer()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
inputs = {"input_ids": torch.randint(0, 30, (2, 6)), "start_positions": torch.tensor([1, 4])}
loss = model(**inputs)
loss.backward()
optimizer.step()
