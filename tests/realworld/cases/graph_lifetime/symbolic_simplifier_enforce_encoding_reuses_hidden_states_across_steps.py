"""symbolic_simplifier's `EncoderDecoder.rl_step` encodes the sampled expression once (`hidden_states = self.encode(sample_input)`) and then calls `enforce_encoding(encoded1=hidden_states, ...)` for every equivalent and every non-equivalent expression found by beam search; each call trains through `__train`, whose `backward(retain_graph=True)` is followed by the encoder and decoder optimizer steps: the second call backpropagates again through the encoding of `sample_input`, whose saved encoder weights the first step has rewritten in place, and fails.

source: https://github.com/shihui2010/symbolic_simplifier/issues/3
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [64, 16]] is at version 3; expected version 2 instead
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, HIDDEN, SPLIT = 20, 16, 8


class EncoderDecoder(nn.Module):
    def __init__(self, l2_weight=1.0):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.encoder = nn.LSTM(HIDDEN, HIDDEN, batch_first=True)
        self.decoder = nn.Linear(HIDDEN, VOCAB)
        self.encoder_optim = torch.optim.Adam(list(self.embed.parameters()) + list(self.encoder.parameters()), 1e-3)
        self.decoder_optim = torch.optim.Adam(self.decoder.parameters(), 1e-3)
        self.l2_weight = l2_weight

    def __train(self, loss):
        self.encoder_optim.zero_grad()
        self.decoder_optim.zero_grad()
        loss.backward(retain_graph=True)
        self.encoder_optim.step()
        self.decoder_optim.step()

    def encode(self, tokens):
        outputs, (h, c) = self.encoder(self.embed(tokens))
        return outputs, h[0]

    def enforce_encoding(self, *, s1=None, s2=None, encoded1=None, positive):
        encoded1 = self.encode(s1)[1] if encoded1 is None else encoded1
        encoded2 = self.encode(s2)[1]
        loss = nn.functional.mse_loss(encoded1[:, :SPLIT], encoded2[:, :SPLIT]) * self.l2_weight
        self.__train((1.0 if positive else -1.0) * loss)
        return loss.item()

    def rl_step(self, sample_input, equivalences, unequals):
        logits = self.decoder(self.encode(sample_input)[0])
        rl_loss = nn.functional.cross_entropy(logits.transpose(1, 2), sample_input)
        self.__train(rl_loss)
        _, hidden_states = self.encode(sample_input)  # ROOT
        losses = [self.enforce_encoding(s2=e, encoded1=hidden_states, positive=True) for e in equivalences]
        losses += [self.enforce_encoding(s2=ne, encoded1=hidden_states, positive=False) for ne in unequals]
        return rl_loss.item(), losses


model = EncoderDecoder()
sample = torch.randint(0, VOCAB, (1, 7))
equivalences = [torch.randint(0, VOCAB, (1, 5)) for _ in range(2)]
unequals = [torch.randint(0, VOCAB, (1, 6)) for _ in range(2)]
rl_loss, losses = model.rl_step(sample, equivalences, unequals)
print(f"rl loss {rl_loss:.3f}, encoding losses {[round(x, 4) for x in losses]}")
