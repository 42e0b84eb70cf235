"""diffusers textual_inversion.py: only the new token's embedding should train, so the other rows' gradients are zeroed, but AdamW's weight decay still shrinks them.

source: https://github.com/huggingface/diffusers/issues/1009
kind: bug
symptom: silent
verified: after 20 steps the pretrained (supposedly frozen) token embeddings moved by 3.4e-4 (max abs) although their gradients were zeroed at every step; restoring them after each step (the later fix) leaves them unchanged (0.0)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CLIPTextModel(nn.Module):
    def __init__(self, vocab_size=20, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.encoder = nn.Linear(hidden, hidden)

    def get_input_embeddings(self):
        return self.embeddings

    def forward(self, input_ids):
        return self.encoder(self.embeddings(input_ids))


def freeze_params(params):
    for param in params:
        param.requires_grad = False


torch.manual_seed(0)
tokenizer_len, placeholder_token_id, initializer_token_id = 20, 19, 3
text_encoder = CLIPTextModel(tokenizer_len)
unet = nn.Linear(16, 16)
token_embeds = text_encoder.get_input_embeddings().weight.data
token_embeds[placeholder_token_id] = token_embeds[initializer_token_id]
freeze_params(unet.parameters())
freeze_params(text_encoder.encoder.parameters())
orig_embeds_params = text_encoder.get_input_embeddings().weight.data.clone()

optimizer = torch.optim.AdamW(text_encoder.get_input_embeddings().parameters(), lr=5e-4,  # ROOT
                              betas=(0.9, 0.999), weight_decay=1e-2, eps=1e-8)
for step in range(20):
    input_ids = torch.tensor([[1, 5, placeholder_token_id, 2]])
    encoder_hidden_states = text_encoder(input_ids)
    noise_pred = unet(encoder_hidden_states)
    loss = F.mse_loss(noise_pred, torch.randn_like(noise_pred))
    loss.backward()
    grads = text_encoder.get_input_embeddings().weight.grad
    index_grads_to_zero = torch.arange(tokenizer_len) != placeholder_token_id
    grads.data[index_grads_to_zero, :] = grads.data[index_grads_to_zero, :].fill_(0)
    optimizer.step()
    optimizer.zero_grad()
weights = text_encoder.get_input_embeddings().weight.data
print((weights[:placeholder_token_id] - orig_embeds_params[:placeholder_token_id]).abs().max().item())
