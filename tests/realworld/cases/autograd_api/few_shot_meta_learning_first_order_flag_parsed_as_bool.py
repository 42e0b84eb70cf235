"""few_shot_meta_learning reads --first-order with type=bool, so "--first-order False" parses as bool('False') == True: the inner-loop gradients are taken with retain_graph only, never create_graph, and the meta-gradient silently drops MAML's second-order terms.

source: https://github.com/cnguyen10/few_shot_meta_learning/issues/6
kind: bug
symptom: silent
verified: with "--first-order False" config['first_order'] is True and the meta-gradient of the first weight has norm 0.680; with action='store_true' (no flag, second order) it has norm 0.564, a difference of 0.074 (max abs) or 39% of its norm
"""
import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser(description='Setup variables for MAML')
parser.add_argument('--first-order', type=bool, default=False, help='First order approximation')  # ROOT
parser.add_argument('--inner-lr', type=float, default=0.4)
parser.add_argument('--num-inner-updates', type=int, default=2)
args = parser.parse_args(['--first-order', 'False'])
config = {'first_order': args.first_order, 'train_flag': True, 'inner_lr': args.inner_lr,
          'num_inner_updates': args.num_inner_updates}


def net_forward(x, params):
    h = torch.tanh(F.linear(x, params[0], params[1]))
    return F.linear(h, params[2], params[3])


def adapt_to_task(x, y, meta_params):
    q_params = meta_params
    for _ in range(config['num_inner_updates']):
        loss = F.cross_entropy(net_forward(x, q_params), y)
        if config['first_order']:
            all_grads = torch.autograd.grad(outputs=loss, inputs=q_params, retain_graph=config['train_flag'])
        else:
            all_grads = torch.autograd.grad(outputs=loss, inputs=q_params, create_graph=config['train_flag'])
        q_params = [q - config['inner_lr'] * g for q, g in zip(q_params, all_grads)]
    return q_params


torch.manual_seed(0)
meta_params = [torch.randn(16, 8) * 0.3, torch.zeros(16), torch.randn(5, 16) * 0.3, torch.zeros(5)]
meta_params = [p.requires_grad_() for p in meta_params]
meta_opt = torch.optim.Adam(meta_params, lr=1e-3)
x_t, y_t, x_v, y_v = torch.randn(10, 8), torch.randint(0, 5, (10,)), torch.randn(10, 8), torch.randint(0, 5, (10,))
q_params = adapt_to_task(x_t, y_t, meta_params)
meta_loss = F.cross_entropy(net_forward(x_v, q_params), y_v)
meta_opt.zero_grad()
meta_loss.backward()
meta_opt.step()
print(config['first_order'], meta_loss.item())
