"""variational-continual-learning's `VCL_NN.logprob` after its fix: a small `EPSILON` (1e-8) is added to the softmax probabilities before `torch.log`, so a true class whose probability underflows to 0 gives a large finite loss instead of an infinite one, and the gradients and posterior means stay finite.

source: https://github.com/NixGD/variational-continual-learning/commit/fa83a68b80d47f32ebdbb38feb72c4dce5e0bb00
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)

EPSILON = 1e-8  # Small value to avoid divide-by-zero and log(zero) problems


class VCL_NN(nn.Module):
    """A Bayesian multi-head neural network trained by variational inference."""

    def __init__(self, input_size, out_size, layer_width, n_hidden_layers):
        super().__init__()
        self.input_size = input_size
        self.out_size = out_size
        self.n_hidden_layers = n_hidden_layers
        self.layer_width = layer_width
        self.init_variables()

    def forward(self, x):
        (w_means, w_log_vars), (b_means, b_log_vars) = self.posterior
        sampled_weights, sampled_bias = [], []
        for i in range(self.n_hidden_layers + 1):
            w_epsilons = torch.randn_like(w_means[i])
            b_epsilons = torch.randn_like(b_means[i])
            sampled_weights.append(w_means[i] + w_epsilons * torch.exp(0.5 * w_log_vars[i]))
            sampled_bias.append(b_means[i] + b_epsilons * torch.exp(0.5 * b_log_vars[i]))
        for weight, bias in zip(sampled_weights, sampled_bias):
            x = F.relu(x @ weight + bias)
        return torch.softmax(x, dim=1)

    def calculate_KL_term(self):
        ((prior_w_means, prior_w_log_vars), (prior_b_means, prior_b_log_vars)) = self.prior
        prior_means = torch.cat([w.reshape(-1) for w in prior_w_means] + prior_b_means)
        prior_log_vars = torch.cat([w.reshape(-1) for w in prior_w_log_vars] + prior_b_log_vars)
        prior_vars = torch.exp(prior_log_vars)
        ((post_w_means, post_w_log_vars), (post_b_means, post_b_log_vars)) = self.posterior
        post_means = torch.cat([w.reshape(-1) for w in post_w_means] + post_b_means)
        post_log_vars = torch.cat([w.reshape(-1) for w in post_w_log_vars] + post_b_log_vars)
        post_vars = torch.exp(post_log_vars)
        KL_elementwise = (post_vars / (prior_vars + EPSILON) + torch.pow(prior_means - post_means, 2) / (prior_vars + EPSILON)
                          - 1 + prior_log_vars - post_log_vars)
        return 0.5 * KL_elementwise.sum()

    def logprob(self, x, y):
        preds = self.forward(x)
        mask = torch.zeros(preds.size(), dtype=torch.bool)
        for i in range(preds.size()[0]):
            mask[i][y[i].item()] = True
        y_preds = torch.masked_select(preds, mask)
        return torch.sum(torch.log(y_preds + EPSILON))

    def loss(self, x, y):
        return self.calculate_KL_term() - self.logprob(x, y)

    def init_variables(self):
        sizes = [self.input_size] + [self.layer_width] * self.n_hidden_layers + [self.out_size]
        prior_w_means = [torch.zeros(a, b) for a, b in zip(sizes, sizes[1:])]
        prior_w_log_vars = [torch.zeros(a, b) for a, b in zip(sizes, sizes[1:])]
        prior_b_means = [torch.zeros(b) for b in sizes[1:]]
        prior_b_log_vars = [torch.zeros(b) for b in sizes[1:]]
        self.prior = ((prior_w_means, prior_w_log_vars), (prior_b_means, prior_b_log_vars))
        for i in range(self.n_hidden_layers + 1):
            self.register_buffer(f"prior_w_means_{i}", prior_w_means[i])
            self.register_buffer(f"prior_w_log_vars_{i}", prior_w_log_vars[i])
            self.register_buffer(f"prior_b_means_{i}", prior_b_means[i])
            self.register_buffer(f"prior_b_log_vars_{i}", prior_b_log_vars[i])

        # The first posterior is initialised to be the same as the first prior
        post = [[nn.Parameter(t.clone().detach().requires_grad_(True)) for t in group]
                for group in (prior_w_means, prior_w_log_vars, prior_b_means, prior_b_log_vars)]
        self.posterior = ((post[0], post[1]), (post[2], post[3]))
        for i in range(self.n_hidden_layers + 1):
            self.register_parameter(f"posterior_w_means_{i}", post[0][i])
            self.register_parameter(f"posterior_w_log_vars_{i}", post[1][i])
            self.register_parameter(f"posterior_b_means_{i}", post[2][i])
            self.register_parameter(f"posterior_b_log_vars_{i}", post[3][i])


# MNIST-like batches: 784 pixels in [0, 1], 10 classes.
x = torch.rand(256, 784) * (torch.rand(256, 784) < 0.2)
y = torch.randint(0, 10, (256,))

model = VCL_NN(input_size=784, out_size=10, layer_width=100, n_hidden_layers=2)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
losses = []
for step in range(5):
    for xb, yb in zip(x.split(64), y.split(64)):
        optimizer.zero_grad()
        loss = model.loss(xb, yb)
        loss.backward()
        if not losses:
            grad_nan = any(torch.isnan(p.grad).any().item() for p in model.parameters())
        optimizer.step()
        losses.append(loss.item())
means_nan = any(torch.isnan(p).any().item() for p in model.posterior[0][0])
print(f"first loss {losses[0]:.4g}, NaN in the first gradients: {grad_nan}")
print(f"NaN in the posterior means after training: {means_nan}, last loss {losses[-1]:.4g}")
