"""GT860, GT861, GT863, GT864, GT867, GT868, GT869, GT896-GT899: silent bugs of
:mod:`gradtrace.code_tables.trace_silent` seen across calls and modules (a derivative that skips
values computed under no_grad, a random weight kept as a buffer, a reward weight not detached, an
optimizer state holding the gradient, values reduced before they were paired with their weights, a
resumed optimizer back at the saved learning rate, a running total no backward() runs through, the
values of a graph tensor rewritten from themselves through `.data`, an optimizer cleared and never
stepped, a parameter frozen by a library call's default flag);
GT863, a crash whose cause is a module attribute (a plain tensor `.to()` left behind);
``trace_silent.CODES`` ends with them."""
from __future__ import annotations

from gradtrace.code_tables import Code

ACROSS_CODES = (
    Code("GT896", "derivative-skips-no-grad-path",
         "autograd.grad differentiates an output that also uses values computed from the input "
         "with grad mode off",
         "Values computed inside `with torch.no_grad():` from a tensor that requires grad have "
         "no graph. When they still feed an output that `torch.autograd.grad` then "
         "differentiates with respect to that tensor (forces as `-dE/dpos`, an input "
         "gradient), autograd treats them as constants: the result is not the derivative of "
         "the output, every path through them is missing. Nothing fails. The run sees the "
         "input of the call (not a Parameter, in no optimizer) reached by the output's graph "
         "and, on the same graph, a value cut off by a grad-off block of user code from that "
         "input, and names the block.",
         """
         bond_vec = pos[dst] - pos[src]
         with torch.no_grad():
             lg_vec = bond_vec[edge_ids]
         energy = model(bond_vec, angles(lg_vec))
         forces = -torch.autograd.grad(energy, pos)[0]
         """,
         """
         bond_vec = pos[dst] - pos[src]
         with torch.no_grad():
             edge_ids = (bond_vec.norm(dim=1) < cutoff).nonzero().squeeze(1)
         energy = model(bond_vec, angles(bond_vec[edge_ids]))
         forces = -torch.autograd.grad(energy, pos)[0]
         """,
         "Compute the values outside the grad-off block; keep only integer work (indices, "
         "masks) under no_grad.",
         "gradtrace.runtime.trace.events", severity="warning"),
    Code("GT897", "random-weight-as-buffer",
         "a tensor drawn by a random weight initialiser is registered as a buffer and never "
         "changes while the module around it trains",
         "`register_buffer` keeps a tensor with the module (saved, moved with `.to()`), but a "
         "buffer is no parameter: `model.parameters()` leaves it out, so no optimizer ever "
         "updates it. A prior or a projection drawn like a weight (`nn.init.xavier_uniform_`, "
         "`normal_`) and registered as a buffer keeps its random initial values for the whole "
         "training. Nothing fails. The run sees the random fill, the registration, the buffer "
         "still unchanged at the end, in a module whose own parameters an optimizer stepped, "
         "and names the registration.",
         """
         self.register_buffer("slots_mu", nn.init.xavier_uniform_(torch.zeros(1, 1, d)))
         """,
         """
         self.slots_mu = nn.Parameter(nn.init.xavier_uniform_(torch.zeros(1, 1, d)))
         """,
         "Make it an `nn.Parameter` if it should be learned.",
         "gradtrace.runtime.trace.random_buffer", severity="warning"),
    Code("GT898", "reward-weight-not-detached",
         "a policy-gradient loss weighs log-probabilities by a reward computed with a graph "
         "from another network",
         "A score-function (REINFORCE) loss `-(log_prob * reward)` treats the reward (a return, "
         "an advantage, a distance to a target) as a number. When it is computed with a graph "
         "from another network (a regression head, a critic), backward() also sends the policy "
         "loss into that network, which is pushed to change the reward instead of the policy, "
         "and its own training is disturbed. Nothing fails. The run walks the first loss "
         "graphs and sees a product of a log-probability (a log_softmax, a Categorical's "
         "normalised logits) and a weight whose graph reaches parameters the log-probabilities "
         "do not depend on, and names the product.",
         """
         reward = prev_dist - feat_dist          # from the feature regression
         loss = -(dist.log_prob(action) * reward).mean()
         """,
         """
         reward = (prev_dist - feat_dist).detach()
         loss = -(dist.log_prob(action) * reward).mean()
         """,
         "Detach the reward (or compute it under torch.no_grad()).",
         "gradtrace.runtime.trace.score_weight", severity="warning"),
    Code("GT860", "optimizer-state-aliases-gradient",
         "an optimizer keeps the gradient tensor itself in its state, and the next backward "
         "overwrites it",
         "A hand-written optimizer that stores `state['previous_grad'] = grad` with `grad = "
         "p.grad.data` keeps the gradient's own memory. When the loop clears gradients in place "
         "(`zero_grad(set_to_none=False)`, the default before torch 2.0) the next backward() "
         "writes the new gradient into it, so the stored 'previous' gradient is always the "
         "current one (DiffGrad's friction term becomes a constant). Nothing fails. The run "
         "sees, as a step starts, a state tensor of an optimizer class that is not torch's "
         "sharing its memory with `p.grad`, and names the assignment in `step`.",
         """
         state['previous_grad'] = grad
         ...
         optimizer.zero_grad(set_to_none=False)
         """,
         """
         state['previous_grad'] = grad.clone()
         ...
         optimizer.zero_grad(set_to_none=False)
         """,
         "Store a copy of the gradient, or set gradients to None between steps.",
         "gradtrace.runtime.trace.events", severity="warning"),
    Code("GT861", "reduced-before-paired",
         "values are reduced to one number and then multiplied by per-element weights of "
         "their own shape",
         "`(values.mean() * weights).sum()` is `values.mean() * weights.sum()`: each weight "
         "(a per-step return, a per-sample advantage) multiplies the reduced value, not its own "
         "element, so the loss is not the weighted sum it was meant to be (a REINFORCE loss "
         "whose every step is weighted by the total return). Nothing fails. The run walks the "
         "first loss graphs and sees a sum or mean of a product of a full reduction and a "
         "constant of exactly the reduced tensor's shape, and names the reduction.",
         """
         log_prob_mean = torch.stack(log_probs).mean()
         loss = -torch.sum(log_prob_mean * returns)
         """,
         """
         loss = -torch.sum(torch.stack(log_probs) * returns)
         """,
         "Multiply element by element first, then reduce.",
         "gradtrace.runtime.trace.paired_mean", severity="warning"),
    Code("GT863", "tensor-attribute-left-behind",
         "a tensor kept on a module as a plain attribute is not converted by `.to()`/`.half()`, "
         "and the forward mixing it with the converted parameters fails",
         "`Module.to()`, `.half()`, `.double()`, `.cuda()` convert parameters and buffers only. "
         "A tensor stored on the module as a plain attribute (a bias table cached for "
         "inference, a positional encoding, a mask made in `__init__`) keeps its dtype and "
         "device; the forward that reads it raises a dtype or device mismatch at the op that "
         "meets the two, far from the attribute. After the crash the run reads the traceback: "
         "a module method that reads a plain floating tensor attribute whose dtype (device) "
         "differs from the one dtype (device) of the module's parameters and buffers, and names "
         "the `self.<name> = ...` assignment.",
         """
         self.ab = self.attention_biases[:, self.idx]
         ...
         encoder.half()
         """,
         """
         self.register_buffer('ab', self.attention_biases[:, self.idx], persistent=False)
         ...
         encoder.half()
         """,
         "Register the tensor as a buffer (`persistent=False` keeps it out of the checkpoint), "
         "or rebuild it from the parameters in forward.",
         "gradtrace.runtime.trace.left_behind"),
    Code("GT899", "learning-rate-restored-by-load",
         "`optimizer.load_state_dict` puts back the checkpoint's learning rate over the one the "
         "optimizer was just built with",
         "`Optimizer.load_state_dict` replaces the param groups with the saved ones, "
         "hyper-parameters included. A run resumed with a new learning rate builds the "
         "optimizer with it, loads the checkpoint, and then trains at the checkpoint's rate: "
         "the new value is silently dropped. The run reads both rates while the state is "
         "loaded and names the load when a saved group's `lr` differed from the built one, no "
         "scheduler had written `initial_lr` into the saved groups, the optimizer stepped "
         "after the load, and the group still held the saved `lr`.",
         """
         optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9)
         optimizer.load_state_dict(checkpoint['optimizer'])
         """,
         """
         optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9)
         optimizer.load_state_dict(checkpoint['optimizer'])
         for group in optimizer.param_groups:
             group['lr'] = args.lr
         """,
         "Set each group's `lr` again after the load (or drop it from the saved groups).",
         "gradtrace.runtime.trace.restored_lr", severity="warning"),
    Code("GT868", "total-never-backpropagated",
         "a running total collects tensors with their autograd graph and no backward() ever "
         "runs through it",
         "`total += loss` without `.item()` in a loop that never calls backward() on the total "
         "(a validation loop run without `torch.no_grad()`) keeps every term's forward graph, "
         "with the activations it saved for a backward that never comes: memory grows with "
         "every batch, and nothing fails. The run sees eight or more in-place adds of graph "
         "tensors into one total, on one line outside any module's forward, with no backward() "
         "between them and none through the total afterwards, in a program that trains; it "
         "names the add. The static GT505 names the training loop's twin (a total kept across "
         "backward() calls, whose terms' saved tensors were freed).",
         """
         for x, y in val_loader:
             val_loss += criterion(model(x), y)
         """,
         """
         for x, y in val_loader:
             val_loss += criterion(model(x), y).item()
         """,
         "Add `.item()` (or `.detach()`) to the total, or run the loop under `torch.no_grad()`.",
         "gradtrace.runtime.trace.unused_total", severity="warning"),
    Code("GT864", "graph-values-rewritten-through-data",
         "the values of an intermediate tensor of the autograd graph are rewritten from "
         "themselves through `.data`",
         "`t.data[:, c] = (t.data[:, c] - mean[c]) / std[c]` (or `t.data.mul_(k)`) on a tensor "
         "`t` that an op of the graph made changes what every later op reads, but autograd "
         "never sees the write: backward() runs the derivative of the unmodified computation, "
         "so the gradients through `t` miss the rewrite's own derivative (a normalisation's "
         "`1/std`). Nothing fails. The run sees a `.data` read of a non-leaf tensor with a "
         "graph, an arithmetic in-place op (or a `__setitem__`/`copy_` of a value computed from "
         "the same `.data`) on that alias with grad mode on, and a backward() through the "
         "tensor's node afterwards; it names the write. Writes of constants (`masked_fill_` "
         "before a softmax), `clamp_`, and writes through `.data` of parameters or other leaves "
         "are not reported.",
         """
         delta = generator(noise) * 0.5
         for c in range(3):
             delta.data[:, c] = (delta.data[:, c] - mean[c]) / std[c]
         """,
         """
         delta = generator(noise) * 0.5
         delta = (delta - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)
         """,
         "Write the operation out of place on the tensor itself, not through `.data`.",
         "gradtrace.runtime.trace.data_rewrite", severity="warning"),
    Code("GT869", "optimizer-cleared-never-stepped",
         "an optimizer's gradients are cleared pass after pass and its step() never runs, "
         "while another optimizer steps",
         "A program with several optimizers (one per level of an architecture search, an "
         "encoder's and a head's) zeroes one of them and backpropagates a loss into its "
         "parameters, but never calls that optimizer's `step()`: the parameters get gradients "
         "at every batch and never change, and nothing fails. The run sees an optimizer built "
         "while tracing that never stepped while another stepped twice or more, none of its "
         "tensors held by an optimizer that stepped, some of them given a gradient, and that "
         "gradient cleared at least twice with no step between; it names the first "
         "`backward()` after the clearing line in the same loop (where the step belongs).",
         """
         for level in range(levels):
             alpha_optim[level].zero_grad()
             loss = criterion(model(val_x), val_y)
             loss.backward()
         """,
         """
         for level in range(levels):
             alpha_optim[level].zero_grad()
             loss = criterion(model(val_x), val_y)
             loss.backward()
             alpha_optim[level].step()
         """,
         "Call the optimizer's `step()` after the backward() whose gradients it should apply "
         "(or drop the optimizer).",
         "gradtrace.runtime.trace.never_stepped", severity="warning"),
    Code("GT867", "frozen-by-library-default",
         "a library call made a parameter with `requires_grad=False` by a default flag, and an "
         "optimizer holds it while it never trains",
         "`nn.Embedding.from_pretrained(weights)` freezes the embedding unless `freeze=False` "
         "is passed: its weight is made with `requires_grad=False`. Handed to an optimizer "
         "with the rest of `model.parameters()`, it never gets a gradient and keeps the "
         "pretrained values while everything else trains. Nothing fails. The run sees the "
         "Parameter registered frozen inside a library function called from the user's line, "
         "with boolean parameters that call leaves at their defaults, the parameter still "
         "frozen at the end and never thawed, and an optimizer holding it that stepped with "
         "gradients on its other parameters; it names the call.",
         """
         self.item_embedding = nn.Embedding.from_pretrained(pretrained)
         optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
         """,
         """
         self.item_embedding = nn.Embedding.from_pretrained(pretrained, freeze=False)
         optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
         """,
         "Pass the flag that keeps it trainable (`freeze=False`), or leave the parameter out "
         "of the optimizer if it should stay fixed.",
         "gradtrace.runtime.trace.default_freeze", severity="warning"),
)
