"""VL fine-tuning with input gradients enabled: image features copied into the text embeddings in place.

source: https://github.com/2U1/Qwen-VL-Series-Finetune/pull/178
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
embed_tokens = nn.Embedding(20, 8)
embed_tokens.weight.requires_grad_(False)
visual = nn.Linear(6, 8)
lm = nn.Linear(8, 20)
optimizer = torch.optim.AdamW(list(visual.parameters()) + list(lm.parameters()), lr=1e-3)

input_ids = torch.randint(0, 20, (2, 5))
pixel_values = torch.randn(3, 6)
inputs_embeds = embed_tokens(input_ids).requires_grad_(True)
img = visual(pixel_values)
row_idx = torch.tensor([1, 2, 6])
flat = inputs_embeds.view(-1, inputs_embeds.shape[-1])
flat.index_copy_(0, row_idx, img)  # ROOT
logits = lm(flat)
loss = nn.functional.cross_entropy(logits, input_ids.view(-1))
loss.backward()
optimizer.step()
