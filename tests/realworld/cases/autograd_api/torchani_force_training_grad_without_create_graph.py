"""TorchANI's force-training example computes the forces with torch.autograd.grad(chunk_energies.sum(), chunk_coordinates, retain_graph=True) and no create_graph=True: the returned forces are constants, so the force loss it adds to the energy loss carries no gradient and the network is trained on the energies only.

source: https://github.com/aiqm/torchani/pull/238
kind: bug
symptom: silent
verified: chunk_force_loss.requires_grad is False, and over 80 Adam steps the force MSE goes 0.0476 -> 0.0122 (energy MSE 2.0486 -> 0.0037) from the energy loss alone; with create_graph=True (the fix) the force loss requires grad and the force MSE goes 0.0476 -> 0.0013 (energy MSE -> 0.0025)
"""
import torch

Rcr = 5.2
EtaR = torch.tensor([1.6])
ShfR = torch.linspace(0.9, 4.9, 8)


def aev_computer(species_coordinates):  # torchani.AEVComputer reduced to the radial terms of one species
    species, coordinates = species_coordinates
    d = coordinates[:, :, None, :] - coordinates[:, None, :, :]
    n = coordinates.shape[1]
    r = (d.pow(2).sum(-1) + torch.eye(n)).sqrt()  # the diagonal is masked below
    fc = 0.5 * torch.cos(torch.pi * r / Rcr) + 0.5
    terms = 0.25 * torch.exp(-EtaR * (r[..., None] - ShfR) ** 2) * fc[..., None]
    terms = terms * (1 - torch.eye(n))[None, :, :, None]
    return species, terms.sum(2)


class ANIModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.CELU(0.1), torch.nn.Linear(32, 1))

    def forward(self, species_aev):
        species, aev = species_aev
        return species, self.net(aev).squeeze(-1).sum(1)


def make_model():
    nn = ANIModel()
    return nn, lambda species_coordinates: nn(aev_computer(species_coordinates))


torch.manual_seed(0)
reference, reference_model = make_model()
with torch.no_grad():
    for p in reference.parameters():
        p.mul_(3)
species = torch.zeros(16, 5, dtype=torch.long)
coordinates = torch.randn(16, 5, 3)
coordinates.requires_grad_(True)
_, true_energies = reference_model((species, coordinates))
true_forces = -torch.autograd.grad(true_energies.sum(), coordinates)[0]
true_energies = true_energies.detach()
coordinates = coordinates.detach()

nn, model = make_model()
optimizer = torch.optim.Adam(nn.parameters(), lr=1e-2)
mse = torch.nn.MSELoss(reduction='none')
force_coefficient = 1.0
for step in range(81):
    chunk_species, chunk_coordinates, chunk_true_forces = species, coordinates.clone(), true_forces
    chunk_num_atoms = (chunk_species >= 0).sum(dim=1).to(true_energies.dtype)
    chunk_coordinates.requires_grad_(True)
    _, chunk_energies = model((chunk_species, chunk_coordinates))
    chunk_forces = -torch.autograd.grad(chunk_energies.sum(), chunk_coordinates, retain_graph=True)[0]  # ROOT
    chunk_force_loss = mse(chunk_true_forces, chunk_forces).sum(dim=(1, 2)) / chunk_num_atoms
    energy_loss = (mse(chunk_energies, true_energies) / chunk_num_atoms).mean()
    force_loss = chunk_force_loss.mean()
    loss = energy_loss + force_coefficient * force_loss
    if step in (0, 80):
        print("step", step, "force loss requires grad", chunk_force_loss.requires_grad,
              "force MSE", round((chunk_forces - chunk_true_forces).pow(2).mean().item(), 4),
              "energy MSE", round((chunk_energies - true_energies).pow(2).mean().item(), 4))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
