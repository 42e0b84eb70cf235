"""pytorch-original-transformer after commit 332d838: `DecoderLayer` takes one MultiHeadedAttention and deep-copies it into separate target self-attention and source (cross) attention modules, so each decoder layer trains two attentions.

source: https://github.com/gordicaleksa/pytorch-original-transformer/commit/332d8383ac6951cf3ffc730ae74beb498bd47702
kind: lookalike
"""
import copy
import math

import torch
import torch.nn as nn


def get_clones(module, num_of_deep_copies):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(num_of_deep_copies)])


class MultiHeadedAttention(nn.Module):
    def __init__(self, model_dimension, number_of_heads, dropout_probability):
        super().__init__()
        self.head_dimension = model_dimension // number_of_heads
        self.number_of_heads = number_of_heads
        self.qkv_nets = get_clones(nn.Linear(model_dimension, model_dimension), 3)
        self.out_projection_net = nn.Linear(model_dimension, model_dimension)
        self.attention_dropout = nn.Dropout(p=dropout_probability)

    def forward(self, query, key, value, mask):
        batch_size = query.shape[0]
        query, key, value = [net(x).view(batch_size, -1, self.number_of_heads, self.head_dimension).transpose(1, 2)
                             for net, x in zip(self.qkv_nets, (query, key, value))]
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.head_dimension)
        if mask is not None:
            scores = scores.masked_fill(mask == torch.tensor(False), float("-inf"))
        attention = self.attention_dropout(scores.softmax(dim=-1))
        out = torch.matmul(attention, value).transpose(1, 2).reshape(batch_size, -1, self.number_of_heads * self.head_dimension)
        return self.out_projection_net(out)


class PositionwiseFeedForwardNet(nn.Module):
    def __init__(self, model_dimension, dropout_probability, width_mult=4):
        super().__init__()
        self.linear1 = nn.Linear(model_dimension, width_mult * model_dimension)
        self.linear2 = nn.Linear(width_mult * model_dimension, model_dimension)
        self.dropout = nn.Dropout(p=dropout_probability)

    def forward(self, representations_batch):
        return self.linear2(self.dropout(torch.relu(self.linear1(representations_batch))))


class SublayerLogic(nn.Module):
    def __init__(self, model_dimension, dropout_probability):
        super().__init__()
        self.norm = nn.LayerNorm(model_dimension)
        self.dropout = nn.Dropout(p=dropout_probability)

    def forward(self, representations_batch, sublayer_module):
        return representations_batch + self.dropout(sublayer_module(self.norm(representations_batch)))


class EncoderLayer(nn.Module):
    def __init__(self, model_dimension, dropout_probability, multi_headed_attention, pointwise_net):
        super().__init__()
        self.sublayers = get_clones(SublayerLogic(model_dimension, dropout_probability), 2)
        self.multi_headed_attention = multi_headed_attention
        self.pointwise_net = pointwise_net
        self.model_dimension = model_dimension

    def forward(self, srb, src_mask):
        encoder_self_attention = lambda x: self.multi_headed_attention(query=x, key=x, value=x, mask=src_mask)
        srb = self.sublayers[0](srb, encoder_self_attention)
        return self.sublayers[1](srb, self.pointwise_net)


class Encoder(nn.Module):
    def __init__(self, encoder_layer, number_of_layers):
        super().__init__()
        self.encoder_layers = get_clones(encoder_layer, number_of_layers)
        self.norm = nn.LayerNorm(encoder_layer.model_dimension)

    def forward(self, src_embeddings_batch, src_mask):
        src_representations_batch = src_embeddings_batch
        for encoder_layer in self.encoder_layers:
            src_representations_batch = encoder_layer(src_representations_batch, src_mask)
        return self.norm(src_representations_batch)


class DecoderLayer(nn.Module):
    def __init__(self, model_dimension, dropout_probability, multi_headed_attention, pointwise_net):
        super().__init__()
        self.sublayers = get_clones(SublayerLogic(model_dimension, dropout_probability), 3)
        self.tgt_multi_headed_attention = copy.deepcopy(multi_headed_attention)
        self.src_multi_headed_attention = copy.deepcopy(multi_headed_attention)
        self.pointwise_net = pointwise_net
        self.model_dimension = model_dimension

    def forward(self, trb, srb, tgt_mask, src_mask):
        decoder_tgt_self_attention = lambda x: self.tgt_multi_headed_attention(query=x, key=x, value=x, mask=tgt_mask)
        decoder_src_self_attention = lambda x: self.src_multi_headed_attention(query=x, key=srb, value=srb, mask=src_mask)
        trb = self.sublayers[0](trb, decoder_tgt_self_attention)
        trb = self.sublayers[1](trb, decoder_src_self_attention)
        return self.sublayers[2](trb, self.pointwise_net)


class Decoder(nn.Module):
    def __init__(self, decoder_layer, number_of_layers):
        super().__init__()
        self.decoder_layers = get_clones(decoder_layer, number_of_layers)
        self.norm = nn.LayerNorm(decoder_layer.model_dimension)

    def forward(self, tgt_embeddings_batch, src_representations_batch, tgt_mask, src_mask):
        tgt_representations_batch = tgt_embeddings_batch
        for decoder_layer in self.decoder_layers:
            tgt_representations_batch = decoder_layer(tgt_representations_batch, src_representations_batch, tgt_mask, src_mask)
        return self.norm(tgt_representations_batch)


class Transformer(nn.Module):
    def __init__(self, model_dimension, src_vocab_size, tgt_vocab_size, number_of_heads, number_of_layers, dropout_probability):
        super().__init__()
        self.src_embedding = nn.Embedding(src_vocab_size, model_dimension)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, model_dimension)

        # All of these will get deep-copied internally
        mha = MultiHeadedAttention(model_dimension, number_of_heads, dropout_probability)
        pwn = PositionwiseFeedForwardNet(model_dimension, dropout_probability)
        encoder_layer = EncoderLayer(model_dimension, dropout_probability, mha, pwn)
        decoder_layer = DecoderLayer(model_dimension, dropout_probability, mha, pwn)

        self.encoder = Encoder(encoder_layer, number_of_layers)
        self.decoder = Decoder(decoder_layer, number_of_layers)
        self.decoder_generator = nn.Sequential(nn.Linear(model_dimension, tgt_vocab_size), nn.LogSoftmax(dim=-1))

    def forward(self, src_token_ids_batch, tgt_token_ids_batch, src_mask, tgt_mask):
        src_representations_batch = self.encoder(self.src_embedding(src_token_ids_batch), src_mask)
        tgt_representations_batch = self.decoder(self.tgt_embedding(tgt_token_ids_batch), src_representations_batch, tgt_mask, src_mask)
        return self.decoder_generator(tgt_representations_batch)


torch.manual_seed(0)
model = Transformer(model_dimension=16, src_vocab_size=12, tgt_vocab_size=12, number_of_heads=2, number_of_layers=2, dropout_probability=0.1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
src = torch.randint(1, 12, (4, 7))
tgt_in, tgt_out = src[:, :-1], src[:, 1:]
tgt_mask = torch.tril(torch.ones(6, 6, dtype=torch.bool))
for step in range(5):
    log_probs = model(src, tgt_in, None, tgt_mask)
    loss = nn.functional.nll_loss(log_probs.reshape(-1, 12), tgt_out.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
for i, layer in enumerate(model.decoder.decoder_layers):
    print(f"decoder layer {i}: self-attention is cross-attention: {layer.tgt_multi_headed_attention is layer.src_multi_headed_attention}")
print("trainable parameters:", sum(p.numel() for p in model.parameters() if p.requires_grad))
print("cross-attention in named_parameters:", any("src_multi_headed_attention" in n for n, _ in model.named_parameters()))
