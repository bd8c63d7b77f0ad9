"""A third-party library as transformers is one: it registers its types with torch only.

Imported by test_torch_registry_follow.py (in this process and in fresh ones,
before and after cpytree) to check that `import cpytree as pytree` gives
torch's results on these objects without install().
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import torch.utils._pytree as _torch_pytree


class ModelOutput(collections.OrderedDict):
    """A transformers-style output: an OrderedDict subclass registered as a node."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)


def _output_flatten(out: ModelOutput) -> tuple[list[Any], Any]:
    return list(out.values()), list(out.keys())


def _output_unflatten(values: Any, context: Any) -> ModelOutput:
    return ModelOutput(**dict(zip(context, values)))


def _output_flatten_with_keys(out: ModelOutput) -> tuple[list[Any], Any]:
    values, keys = _output_flatten(out)
    return [(_torch_pytree.MappingKey(k), v) for k, v in zip(keys, values)], keys


_torch_pytree.register_pytree_node(
    ModelOutput,
    _output_flatten,
    _output_unflatten,
    serialized_type_name="thirdparty_models.ModelOutput",
    flatten_with_keys_fn=_output_flatten_with_keys,
)


@dataclasses.dataclass
class Cache:
    """Registered with torch's register_dataclass; a None field goes to the context."""

    keys: Any
    values: Any
    note: Any = None


_torch_pytree.register_dataclass(Cache, serialized_type_name="thirdparty_models.Cache")


@dataclasses.dataclass(frozen=True)
class Config:
    """Registered with torch's register_constant."""

    name: str


_torch_pytree.register_constant(Config)

Pair = collections.namedtuple("Pair", "first second")
_torch_pytree._register_namedtuple(Pair, serialized_type_name="thirdparty_models.Pair")


class Scaled:
    """Registered with dumpable-context hooks: the context is a (scale, unit) tuple."""

    def __init__(self, value: Any, scale: float, unit: str) -> None:
        self.value, self.scale, self.unit = value, scale, unit


_torch_pytree.register_pytree_node(
    Scaled,
    lambda s: ([s.value], (s.scale, s.unit)),
    lambda values, context: Scaled(values[0], *context),
    serialized_type_name="thirdparty_models.Scaled",
    to_dumpable_context=lambda context: {"scale": context[0], "unit": context[1]},
    from_dumpable_context=lambda d: (d["scale"], d["unit"]),
    flatten_with_keys_fn=lambda s: (
        [(_torch_pytree.GetAttrKey("value"), s.value)],
        (s.scale, s.unit),
    ),
)


def sample(constant: bool = True) -> Any:
    """A tree mixing every type above with builtin containers.

    `constant=False` leaves out the constant, which torch cannot serialize.
    """
    tree = {
        "out": ModelOutput(logits=1, hidden=[2, 3]),
        "cache": Cache(keys=(4, 5), values=[6]),
        "pair": Pair(7, {"x": 8}),
        "scaled": Scaled([9, 10], 0.5, "m"),
    }
    if constant:
        tree["cfg"] = Config("tiny")
    return tree
