"""The pricing table: model -> USD per million input / output / cache tokens.

Shipped as data (`evalstream/assertions/data/pricing.json`) and overridable by the user. Lookup is
by longest model-id prefix, so dated ids (`claude-sonnet-4-5-20250929`) find their family.
An entry without cache prices gets Anthropic's prompt-caching multipliers of its input price
(reads 0.1x, writes 1.25x), so cache tokens are never counted as free by omission.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from evalstream.assertions.errors import PricingError

CACHE_READ_MULTIPLIER = 0.1
CACHE_WRITE_MULTIPLIER = 1.25


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

    def worst_case_cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """The most a call can cost: every input token at the dearest input rate (plain,
        cache write or cache read) and `output_tokens` of output; None without a price."""
        price = self.price_of(model)
        if price is None:
            return None
        dearest_input = max(price.input, price.cache_write, price.cache_read)
        return (input_tokens * dearest_input + output_tokens * price.output) / 1_000_000

    def cache_saving(self, model: str | None, usage: Usage) -> float:
        """USD the prompt cache saved on one call: cache reads at the input price minus what
        they cost, less the write surcharge (negative when only writes happened)."""
        price = self.price_of(model) if model else None
        if price is None:
            return 0.0
        return (
            usage.cache_read_tokens * (price.input - price.cache_read)
            - usage.cache_write_tokens * (price.cache_write - price.input)
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
            fields = {k: float(v) for k, v in entry.items() if k in ModelPrice.__slots__}
            fields.setdefault("cache_read", fields["input"] * CACHE_READ_MULTIPLIER)
            fields.setdefault("cache_write", fields["input"] * CACHE_WRITE_MULTIPLIER)
            prices[name.lower()] = ModelPrice(**fields)
        except (TypeError, ValueError) as exc:
            raise PricingError(f"{origin}: model {name!r}: {exc}") from exc
    return PricingTable(prices)


@functools.cache
def default_pricing() -> PricingTable:
    text = resources.files("evalstream.assertions").joinpath("data/pricing.json").read_text("utf-8")
    return _parse(json.loads(text), "built-in pricing table")


def load_pricing(path: Path) -> PricingTable:
    """The built-in table overridden by the user's file."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PricingError(f"{path}: cannot read pricing table: {exc}") from exc
    return default_pricing().merged(_parse(data, str(path)))
