"""Qwen2-VL training with frozen embeddings and enable_input_require_grads(): the hook turns the embedding output into a leaf that requires grad, and the video branch writes `inputs_embeds[video_mask] = video_embeds` into it in place.

source: https://github.com/huggingface/transformers/pull/33307
kind: bug
symptom: crash
verified: a leaf Variable that requires grad is being used in an in-place operation
"""
import torch
import torch.nn as nn


class Qwen2VisionTransformer(nn.Module):
    def __init__(self, in_dim=12, hidden=16):
        super().__init__()
        self.merger = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))

    def forward(self, pixel_values, grid_thw=None):
        return self.merger(pixel_values)


class Qwen2VLForConditionalGeneration(nn.Module):
    def __init__(self, vocab=60, hidden=16, video_token_id=5):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.visual = Qwen2VisionTransformer(hidden=hidden)
        self.layers = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU())
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.video_token_id = video_token_id

    def get_input_embeddings(self):
        return self.embed_tokens

    def enable_input_require_grads(self):
        def make_inputs_require_grads(module, input, output):
            output.requires_grad_(True)
        self._require_grads_hook = self.get_input_embeddings().register_forward_hook(make_inputs_require_grads)

    def forward(self, input_ids, pixel_values_videos=None, video_grid_thw=None):
        inputs_embeds = self.embed_tokens(input_ids)
        if pixel_values_videos is not None:
            video_embeds = self.visual(pixel_values_videos, grid_thw=video_grid_thw)
            video_mask = input_ids == self.video_token_id
            inputs_embeds[video_mask] = video_embeds  # ROOT
        return self.lm_head(self.layers(inputs_embeds))


torch.manual_seed(0)
model = Qwen2VLForConditionalGeneration()
model.embed_tokens.requires_grad_(False)
model.enable_input_require_grads()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
input_ids = torch.tensor([[1, 5, 5, 7, 8, 9], [2, 3, 5, 5, 4, 6]])
pixel_values_videos = torch.randn(4, 12)
logits = model(input_ids, pixel_values_videos=pixel_values_videos)
loss = nn.functional.cross_entropy(logits.reshape(-1, 60), input_ids.reshape(-1))
loss.backward()
optimizer.step()
