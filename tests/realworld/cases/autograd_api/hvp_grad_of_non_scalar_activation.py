"""GAN geometry Hessian-vector product: autograd.grad of a batch of activations, not a scalar.

source: https://github.com/Animadversio/GAN-Geometry/issues/4
kind: bug
symptom: crash
verified: RuntimeError: grad can be implicitly created only for scalar outputs
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GANForwardHVPOperator:
    def __init__(self, model, objective):
        self.model, self.objective = model, objective

    def apply(self, perturb_vecs):
        perturb_vecs = perturb_vecs.detach().requires_grad_(True)
        img = self.model(perturb_vecs)
        activs = self.objective(img)
        ftgrad_both = torch.autograd.grad(activs, perturb_vecs, retain_graph=False,  # ROOT
                                          create_graph=False, only_inputs=True)[0]
        return ftgrad_both


G = nn.Sequential(nn.Linear(6, 12), nn.Tanh())
objective = nn.Linear(12, 1)
op = GANForwardHVPOperator(G, objective)
print(op.apply(torch.randn(3, 6)).shape)
