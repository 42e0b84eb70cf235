"""ACE's compute_layer_thickness after PR #724: the interface pressure is clamped to 1 Pa before the log, `torch.log(torch.clamp(pressure_at_interface, min=1.0))`, so the 0.0 Pa top-of-atmosphere interface of ERA5 gives log(1) = 0 with a zero, finite gradient and the energy term trains.

source: https://github.com/ai2cm/ace/pull/724
kind: lookalike
"""
import torch
from torch import nn

RDGAS, RVGAS, GRAVITY = 287.05, 461.5, 9.80665
SPECIFIC_HEAT_OF_DRY_AIR_CONST_VOLUME, LATENT_HEAT_OF_VAPORIZATION = 717.6, 2.5e6


def compute_layer_thickness(pressure_at_interface, air_temperature, specific_total_water):
    """Computes vertical thickness of each layer assuming hydrostatic equilibrium."""
    tv = air_temperature * (1 + (RVGAS / RDGAS - 1.0) * specific_total_water)
    # Clamp the minimum pressure to 1 Pa to ensure that log(p) is finite and
    # greater than or equal to 0.0. The ERA5 data has a TOA pressure of 0.0 Pa.
    dlogp = torch.log(torch.clamp(pressure_at_interface, min=1.0)).diff(dim=-1)
    return dlogp * RDGAS * tv / GRAVITY


def _height_at_interface(layer_thickness, surface_height):
    cumulative_thickness = torch.cumsum(layer_thickness.flip(dims=(-1,)), dim=-1).flip(dims=(-1,))
    hsfc = torch.where(surface_height < 0.0, 0, surface_height).reshape(*surface_height.shape, 1)
    return torch.concat([cumulative_thickness + hsfc.broadcast_to(cumulative_thickness.shape), hsfc], dim=-1)


class HybridSigmaPressureCoordinate:  # ERA5-like: the first interface is the top of the atmosphere, ak = bk = 0
    def __init__(self, ak, bk):
        self.ak, self.bk = ak, bk

    def interface_pressure(self, surface_pressure):
        return self.ak + surface_pressure.unsqueeze(-1) * self.bk

    def vertical_integral(self, field, surface_pressure):
        dp = self.interface_pressure(surface_pressure).diff(dim=-1)
        return (field * dp).sum(dim=-1) / GRAVITY


class AtmosphereData:
    def __init__(self, air_temperature, specific_total_water, surface_pressure, surface_height, vertical_coordinate):
        self.air_temperature, self.specific_total_water = air_temperature, specific_total_water
        self.surface_pressure, self.surface_height = surface_pressure, surface_height
        self._vertical_coordinate = vertical_coordinate

    @property
    def height_at_midpoint(self):
        interface_pressure = self._vertical_coordinate.interface_pressure(self.surface_pressure)
        layer_thickness = compute_layer_thickness(
            pressure_at_interface=interface_pressure,
            air_temperature=self.air_temperature,
            specific_total_water=self.specific_total_water,
        )
        height_at_interface = _height_at_interface(layer_thickness, self.surface_height)
        return 0.5 * (height_at_interface[..., :-1] + height_at_interface[..., 1:])

    @property
    def total_energy_ace2_path(self):
        total_energy = (self.air_temperature * SPECIFIC_HEAT_OF_DRY_AIR_CONST_VOLUME
                        + self.specific_total_water * LATENT_HEAT_OF_VAPORIZATION
                        + self.height_at_midpoint * GRAVITY)
        return self._vertical_coordinate.vertical_integral(total_energy, self.surface_pressure)


class Stepper(nn.Module):  # predicts surface pressure and the temperature of each layer for every grid column
    def __init__(self, n_in=6, n_levels=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 32), nn.Tanh(), nn.Linear(32, 1 + n_levels))

    def forward(self, x):
        out = self.net(x)
        return 1.0e5 + 1.0e3 * out[..., 0], 260.0 + 10.0 * out[..., 1:]


torch.manual_seed(0)
n_levels = 4
coord = HybridSigmaPressureCoordinate(ak=torch.tensor([0.0, 5000.0, 10000.0, 5000.0, 0.0]),
                                      bk=torch.tensor([0.0, 0.0, 0.2, 0.6, 1.0]))
stepper = Stepper(n_levels=n_levels)
optimizer = torch.optim.Adam(stepper.parameters(), lr=1e-3)
x = torch.randn(16, 6)
target_ps, target_t = 1.0e5 + 500.0 * torch.randn(16), 260.0 + 5.0 * torch.randn(16, n_levels)
q = torch.full((16, n_levels), 1e-3)
zs = torch.rand(16) * 500.0
target = AtmosphereData(target_t, q, target_ps, zs, coord)

ps, t = stepper(x)
gen = AtmosphereData(t, q, ps, zs, coord)
loss = (nn.functional.mse_loss(ps / 1e3, target_ps / 1e3) + nn.functional.mse_loss(t, target_t)
        + nn.functional.mse_loss(gen.total_energy_ace2_path / 1e9, target.total_energy_ace2_path / 1e9))
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss:", loss.item())
print("all parameters finite after the step:", all(bool(torch.isfinite(p).all()) for p in stepper.parameters()))
