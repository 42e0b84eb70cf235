"""Qwen-VL fine-tuning only the visual encoder: to dodge an in-place error the image features are written into the text hidden states through `.data` (hidden_states.data[i][a + 1 : b] = images.data[idx]), which autograd never sees, so with the LLM and lm_head frozen the loss has no graph.

source: https://github.com/QwenLM/Qwen-VL/issues/124
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class VisionTransformer(nn.Module):
    def __init__(self, hidden=16, n_queries=3):
        super().__init__()
        self.proj = nn.Linear(12, hidden)
        self.attn_pool = nn.Linear(hidden, hidden)
        self.n_queries = n_queries

    def encode(self, images):
        return self.attn_pool(torch.tanh(self.proj(images)))[:, :self.n_queries]


class QWenModel(nn.Module):
    def __init__(self, vocab=50, hidden=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(2)])
        self.visual = VisionTransformer(hidden)

    def forward(self, input_ids, images, img_pos):
        images = self.visual.encode(images)
        hidden_states = self.wte(input_ids)
        hidden_states = self.drop(hidden_states)
        if images is not None:
            for idx, (i, a, b) in enumerate(img_pos):
                hidden_states.data[i][a + 1 : b] = images.data[idx]  # ROOT
        for block in self.h:
            hidden_states = hidden_states + torch.relu(block(hidden_states))
        return hidden_states


class QWenLMHeadModel(nn.Module):
    def __init__(self, vocab=50):
        super().__init__()
        self.transformer = QWenModel(vocab)
        self.lm_head = nn.Linear(16, vocab, bias=False)

    def forward(self, input_ids, images, img_pos, labels):
        logits = self.lm_head(self.transformer(input_ids, images, img_pos))
        return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


torch.manual_seed(0)
model = QWenLMHeadModel()
model.requires_grad_(False)
model.transformer.visual.requires_grad_(True)  # train the visual part only
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
input_ids = torch.randint(0, 50, (2, 10))
images = torch.randn(2, 4, 12)
img_pos = [(0, 1, 5), (1, 2, 6)]
loss = model(input_ids, images, img_pos, labels=input_ids)
loss.backward()  # SYMPTOM
optimizer.step()
