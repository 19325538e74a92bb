"""The pricing table: model -> USD per million input / output / cache tokens.

Shipped as data (`assertions/data/pricing.json`) and overridable by the user. Lookup is by
longest model-id prefix, so dated ids (`claude-sonnet-4-5-20250929`) find their family.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from assertions.errors import PricingError


@dataclass(frozen=True, slots=True)
class ModelPrice:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class PricingTable:
    def __init__(self, prices: dict[str, ModelPrice]) -> None:
        self._prices = prices
        self._by_length = sorted(prices, key=len, reverse=True)
        self._lookup = functools.lru_cache(maxsize=1024)(self._find)

    def price_of(self, model: str) -> ModelPrice | None:
        return self._lookup(model)

    def _find(self, model: str) -> ModelPrice | None:
        key = model.rsplit("/", 1)[-1].lower()
        for prefix in self._by_length:
            if key.startswith(prefix):
                return self._prices[prefix]
        return None

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """USD for one call, or None when the model has no price."""
        price = self.price_of(model) if model else None
        if price is None:
            return None
        return (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
        ) / 1_000_000

    def merged(self, other: PricingTable) -> PricingTable:
        return PricingTable({**self._prices, **other._prices})

    def models(self) -> dict[str, ModelPrice]:
        return dict(self._prices)


def _parse(data: Any, origin: str) -> PricingTable:
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise PricingError(f"{origin}: expected an object with a `models` object")
    prices: dict[str, ModelPrice] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict) or not {"input", "output"} <= entry.keys():
            raise PricingError(
                f"{origin}: model {name!r} needs at least `input` and `output` "
                "(USD per million tokens)"
            )
        try:
            prices[name.lower()] = ModelPrice(
                **{k: float(v) for k, v in entry.items() if k in ModelPrice.__slots__}
            )
        except (TypeError, ValueError) as exc:
            raise PricingError(f"{origin}: model {name!r}: {exc}") from exc
    return PricingTable(prices)


@functools.cache
def default_pricing() -> PricingTable:
    text = resources.files("assertions").joinpath("data/pricing.json").read_text("utf-8")
    return _parse(json.loads(text), "built-in pricing table")


def load_pricing(path: Path) -> PricingTable:
    """The built-in table overridden by the user's file."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PricingError(f"{path}: cannot read pricing table: {exc}") from exc
    return default_pricing().merged(_parse(data, str(path)))
