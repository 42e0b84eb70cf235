"""SpyTorch tutorial 4 adds recurrent hidden weights v1 to the spiking network of tutorial 2, but train() still builds its optimizer from params = [w1,w2]: v1 receives a gradient through the recurrence yet is never stepped, so the recurrent weights keep their initial values.

source: https://github.com/fzenke/spytorch/issues/7
kind: bug
symptom: silent
verified: after 5 Adamax steps v1 moved 0.0 although its .grad norm is 0.6515, while w1 moved 0.3681; with params = [w1,w2,v1] (the fix) v1 moves 0.3381
"""
import numpy as np
import torch
import torch.nn as nn

nb_inputs, nb_hidden, nb_outputs = 20, 16, 4
time_step, nb_steps, batch_size = 1e-3, 20, 8
dtype, device = torch.float, torch.device("cpu")
tau_mem, tau_syn = 10e-3, 5e-3
alpha = float(np.exp(-time_step / tau_syn))
beta = float(np.exp(-time_step / tau_mem))

torch.manual_seed(0)
weight_scale = 0.2
w1 = torch.empty((nb_inputs, nb_hidden), device=device, dtype=dtype, requires_grad=True)
torch.nn.init.normal_(w1, mean=0.0, std=weight_scale / np.sqrt(nb_inputs))
w2 = torch.empty((nb_hidden, nb_outputs), device=device, dtype=dtype, requires_grad=True)
torch.nn.init.normal_(w2, mean=0.0, std=weight_scale / np.sqrt(nb_hidden))
v1 = torch.empty((nb_hidden, nb_hidden), device=device, dtype=dtype, requires_grad=True)
torch.nn.init.normal_(v1, mean=0.0, std=weight_scale / np.sqrt(nb_hidden))


class SurrGradSpike(torch.autograd.Function):
    scale = 100.0

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        out = torch.zeros_like(input)
        out[input > 0] = 1.0
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output.clone() / (SurrGradSpike.scale * torch.abs(input) + 1.0) ** 2


spike_fn = SurrGradSpike.apply


def run_snn(inputs):
    syn = torch.zeros((batch_size, nb_hidden), device=device, dtype=dtype)
    mem = torch.zeros((batch_size, nb_hidden), device=device, dtype=dtype)
    mem_rec, spk_rec = [mem], [mem]
    h1 = torch.zeros((batch_size, nb_hidden), device=device, dtype=dtype)
    h1_from_input = torch.einsum("abc,cd->abd", (inputs, w1))
    for t in range(nb_steps):
        h1 = h1_from_input[:, t] + torch.einsum("ab,bc->ac", (h1, v1))
        mthr = mem - 1.0
        out = spike_fn(mthr)
        rst = torch.zeros_like(mem)
        c = (mthr > 0)
        rst[c] = torch.ones_like(mem)[c]
        new_syn = alpha * syn + h1
        new_mem = beta * mem + syn - rst
        mem, syn = new_mem, new_syn
        mem_rec.append(mem)
        spk_rec.append(out)
    mem_rec, spk_rec = torch.stack(mem_rec, dim=1), torch.stack(spk_rec, dim=1)
    h2 = torch.einsum("abc,cd->abd", (spk_rec, w2))
    flt = torch.zeros((batch_size, nb_outputs), device=device, dtype=dtype)
    out = torch.zeros((batch_size, nb_outputs), device=device, dtype=dtype)
    out_rec = [out]
    for t in range(nb_steps):
        new_flt = alpha * flt + h2[:, t]
        new_out = beta * out + flt
        flt, out = new_flt, new_out
        out_rec.append(out)
    return torch.stack(out_rec, dim=1), [mem_rec, spk_rec]


def train(x_data, y_data, lr=1e-2, nb_epochs=5):
    params = [w1,w2]  # ROOT
    optimizer = torch.optim.Adamax(params, lr=lr, betas=(0.9, 0.999))
    log_softmax_fn, loss_fn = nn.LogSoftmax(dim=1), nn.NLLLoss()
    for e in range(nb_epochs):
        output, recs = run_snn(x_data)
        _, spks = recs
        m, _ = torch.max(output, 1)
        reg_loss = 2e-6 * torch.sum(spks) + 2e-6 * torch.mean(torch.sum(torch.sum(spks, dim=0), dim=0) ** 2)
        loss_val = loss_fn(log_softmax_fn(m), y_data) + reg_loss
        optimizer.zero_grad()
        loss_val.backward()
        optimizer.step()


x_data = (torch.rand(batch_size, nb_steps, nb_inputs) < 0.3).float() * 5.0
y_data = torch.randint(0, nb_outputs, (batch_size,))
w1_start, v1_start = w1.detach().clone(), v1.detach().clone()
train(x_data, y_data)
print("v1 moved", (v1 - v1_start).norm().item(), "v1 grad", v1.grad.norm().item(),
      "w1 moved", (w1 - w1_start).norm().item())
