"""What the stages after extraction know about the agents, taken from their declarations (`extractors.registry`):
nothing here, nor in sinks or flows, names an agent.

Sinks read the agents' facts through this module (sinks -> transforms -> extractors): their pricing rules are
declarations, not readers; no extractor's reader is called.
"""

from __future__ import annotations

from extractors.registry import agents, specs


def names() -> tuple[str, ...]:
    """Every agent's name (the `agent` column's values), in the order lists use."""
    return agents()


def provider_hints() -> dict[str, str | None]:
    """The `genai-prices` provider each agent's model names are looked up under first (None: any provider)."""
    return {spec.name: spec.price_provider for spec in specs()}


def reasoning_billed_separately() -> tuple[str, ...]:
    """The agents whose `output_tokens` leave out the reasoning tokens, which are billed as output on top."""
    return tuple(spec.name for spec in specs() if spec.reasoning_billed_separately)
