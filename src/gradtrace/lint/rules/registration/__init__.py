"""GT4xx: registration and optimizer wiring (what `parameters()` and the optimizer really hold).

The rules live in :mod:`.containers` (GT401-GT403), :mod:`.identity` (GT404-GT406),
:mod:`.freezing` (GT407-GT410), :mod:`.attributes` (GT411-GT412), :mod:`.plain_holder`
(GT413), :mod:`.global_walk` (GT414), :mod:`.setattr_errors` (GT415-GT416), :mod:`.groups` (GT442), :mod:`.eval_reset` (GT443), :mod:`.frozen_norm` (GT461), :mod:`.listed_parts` (GT462), :mod:`.decay_names` (GT463), :mod:`.frozen` (GT430-GT433),
:mod:`.wiring` (GT435-GT437), :mod:`.outside` (GT438-GT439), :mod:`.fixed` (GT434,
GT440-GT441), :mod:`.construction` (GT420-GT421), :mod:`.listed_generator` (GT488), :mod:`.discarded_flag` (GT489); shared facts in
:mod:`._modules` and the analysis layer (``ctx.analysis``).
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("a model, submodule or parameter replaced in a different function from the one that "
     "builds or steps the optimizer (beyond a helper of the file that builds or steps it, and "
     "a method re-creating what `__init__` built the optimizer over)",
     "parameter identity across calls is only visible at run time (compare the ids in "
     "`optimizer.param_groups` with `model.parameters()`); see runtime: gradtrace run"),
    ("a freeze or unfreeze done in a helper (`freeze(model)`) relative to the optimizer or the "
     "new head",
     "which parameters end up trainable depends on the helper's body; see runtime: gradtrace run"),
    ("layers kept in a plain list/dict built outside the module's class",
     "whether the container is later wrapped in `nn.ModuleList` cannot be followed statically; "
     "see runtime: gradtrace run"),
]
