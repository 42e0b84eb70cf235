"""VL fine-tuning with input gradients enabled: image features merged with out-of-place index_copy.

source: https://github.com/2U1/Qwen-VL-Series-Finetune/pull/178
kind: lookalike
verified: the vision projector gets a gradient through the merged embeddings
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
flat = flat.index_copy(0, row_idx, img)
logits = lm(flat)
loss = nn.functional.cross_entropy(logits, input_ids.view(-1))
loss.backward()
optimizer.step()
print(visual.weight.grad is not None)
