"""What a value is: the kinds the analysis layer assigns to names, attribute chains and calls."""
from __future__ import annotations

import ast
from dataclasses import dataclass

MODULE = "module"          # an nn.Module instance (``cls``: its class, qualified or of this file)
PARAMETER = "parameter"    # an nn.Parameter
BUFFER = "buffer"          # a registered buffer
TENSOR = "tensor"          # a plain tensor made by a factory (``requires_grad``: asked for?)
PARAMS = "params"          # an iterable of parameters (``model.parameters()``; ``over``)
OPTIMIZER = "optimizer"    # a torch.optim optimizer (``over``: dotted owners of its parameters)
SCHEDULER = "scheduler"    # a learning-rate scheduler
LOADER = "loader"          # a DataLoader (or a dataset)
NUMBER = "number"          # a Python number
CONTAINER = "container"    # a plain list/tuple/dict of modules or parameters (not registered)
OBJECT = "object"          # an instance of a plain (non-module) class of this file (``cls``),
#                            or another value known not to be an nn.Module (a Lua-torch object)
KINDS = (MODULE, PARAMETER, BUFFER, TENSOR, PARAMS, OPTIMIZER, SCHEDULER, LOADER, NUMBER,
         CONTAINER, OBJECT)
# kinds an nn.Module registers when assigned to one of its attributes
REGISTERED = frozenset({MODULE, PARAMETER, BUFFER})


@dataclass(frozen=True)
class Kind:
    """What a value is, and the little the analysis knows about it."""

    what: str
    cls: str | None = None             # MODULE/OBJECT: the class (``torch.nn.Linear``, ``Net``)
    requires_grad: bool | None = None  # TENSOR: made with ``requires_grad=True``
    over: frozenset[str] = frozenset()  # PARAMS/OPTIMIZER: owners (``model``, ``self.enc``)
    node: ast.AST | None = None        # where it was made (the constructing call)

    @property
    def is_module(self) -> bool:
        return self.what == MODULE


def is_torch_loss(qual: str | None) -> bool:
    """``torch.nn.<Something>Loss``: a torch loss class, by its qualified name."""
    return bool(qual) and qual.startswith("torch.nn.") and qual.endswith("Loss")  # type: ignore
