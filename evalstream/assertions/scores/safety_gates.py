"""Which safety detectors can match an output, decided with few substring scans.

Each detector's gate is an AND of any-of groups of literals (`Detector.requires`, tested in
the output or its lower-cased copy, and `Detector.shape`, tested in the output's shape), all
necessary conditions of a match. Tested one detector at a time, a clean output costs one
scan per group (~11 with the default detectors). `GatePlan` shares scans by containment: if
`sk-` does not occur, neither does `sk-ant-`; if the shape holds no `AA`, it holds none of
`AAAA`, `AAaa`, `AA00`. Every detector whose gate has a one-literal group is filed under that
literal (its *primary*), each primary under the longest other primary it contains, and the
top-level primaries that share a prefix of two or more characters under that prefix (a
synthetic probe). A scan that fails skips its whole subtree, so a clean output costs one
scan per top-level probe (6 with the defaults).

The plan only filters: `candidates` returns every detector whose gate holds, in detector
order, and never one whose gate fails, exactly like testing each gate on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Where a literal is looked for (indexes into the haystacks tuple of `candidates`).
OUTPUT, LOWERED, SHAPE = 0, 1, 2
MIN_FACTOR = 2  # shorter shared prefixes (one character) are too common to prune anything

Group = tuple[int, tuple[str, ...]]  # (haystack, literals of which one must occur)
# (haystack, literal, detectors whose primary it is, probes whose literal contains it)
Probe = tuple[int, str, tuple[int, ...], tuple["Probe", ...]]


@dataclass(frozen=True, slots=True)
class GatePlan:
    """The probe tree of a list of detector gates (see the module docstring).

    `gates[i]` is detector i's groups; a detector without groups always is a candidate.
    A group whose haystack is absent in a call (`None`: a non-ASCII output has no shape)
    holds, as in `Detector.may_match`.
    """

    probes: tuple[Probe, ...]
    ungated: tuple[int, ...]  # detectors without a one-literal group: checked in full
    rest: tuple[tuple[Group, ...], ...]  # per detector, the groups besides its primary
    uses: frozenset[int]  # the haystacks any group needs
    uses_shape: bool = False  # SHAPE in uses
    uses_lowered: bool = False  # LOWERED in uses

    @classmethod
    def build(cls, gates: Sequence[Sequence[Group]]) -> GatePlan:
        primaries: dict[tuple[int, str], list[int]] = {}
        ungated: list[int] = []
        rest: list[tuple[Group, ...]] = []
        for index, groups in enumerate(gates):
            primary = _primary(groups)
            if primary is None:
                ungated.append(index)
                rest.append(tuple(groups))
                continue
            haystack, (literal,) = primary
            primaries.setdefault((haystack, literal), []).append(index)
            rest.append(tuple(g for g in groups if g is not primary))
        uses = frozenset(h for groups in gates for h, _ in groups)
        probes: list[Probe] = []
        for haystack in (OUTPUT, LOWERED, SHAPE):
            literals = {lit: tuple(ix) for (h, lit), ix in primaries.items() if h == haystack}
            probes.extend(_tree(haystack, literals))
        return cls(
            probes=tuple(probes),
            ungated=tuple(ungated),
            rest=tuple(rest),
            uses=uses,
            uses_shape=SHAPE in uses,
            uses_lowered=LOWERED in uses,
        )

    def candidates(self, haystacks: tuple[str, str | None, str | None]) -> list[int]:
        """The detectors whose gates hold on (output, lowered output, shape), ascending.

        `lowered` must be given when `LOWERED in uses`; `shape` is None for a text without
        one (every shape group then holds).
        """
        found = list(self.ungated)
        _walk(self.probes, haystacks, found)
        if not found:
            return found  # the common case: a clean output
        found.sort()
        rest = self.rest
        return [index for index in found if _holds(rest[index], haystacks)]


def _primary(groups: Sequence[Group]) -> Group | None:
    """The group a detector is filed under: the first one-literal shape group (shapes
    are the most selective gates), else the first one-literal group."""
    singles = [g for g in groups if len(g[1]) == 1]
    for group in singles:
        if group[0] == SHAPE:
            return group
    return singles[0] if singles else None


def _tree(haystack: int, literals: dict[str, tuple[int, ...]]) -> list[Probe]:
    """Probes of one haystack: each literal under the longest other literal it contains,
    then top-level literals sharing a prefix of MIN_FACTOR+ characters under that prefix."""
    order = sorted(literals, key=lambda lit: (len(lit), lit))
    parent: dict[str, str | None] = {}
    for i, literal in enumerate(order):
        inside = [other for other in order[:i] if other in literal]
        parent[literal] = max(inside, key=len) if inside else None
    roots = [lit for lit in order if parent[lit] is None]
    by_head: dict[str, list[str]] = {}
    for literal in roots:
        if len(literal) >= MIN_FACTOR:
            by_head.setdefault(literal[:MIN_FACTOR], []).append(literal)
    factors: dict[str, list[str]] = {}
    for members in by_head.values():
        if len(members) > 1:
            factor = _common_prefix(members)
            factors[factor] = members
            for literal in members:
                parent[literal] = factor

    def probe(literal: str) -> Probe:
        children = tuple(probe(lit) for lit in order if parent[lit] == literal)
        return (haystack, literal, literals.get(literal, ()), children)

    tops = [lit for lit in order if parent[lit] is None] + sorted(factors)
    return [probe(lit) for lit in tops]


def _common_prefix(literals: Sequence[str]) -> str:
    first, last = min(literals), max(literals)  # the most different pair bounds the prefix
    size = 0
    while size < len(first) and first[size] == last[size]:
        size += 1
    return first[:size]


def _walk(
    probes: tuple[Probe, ...], haystacks: tuple[str, str | None, str | None], found: list[int]
) -> None:
    for haystack, literal, detectors, children in probes:
        text = haystacks[haystack]
        if text is None or literal in text:
            if detectors:
                found.extend(detectors)
            if children:
                _walk(children, haystacks, found)


def _holds(groups: tuple[Group, ...], haystacks: tuple[str, str | None, str | None]) -> bool:
    for haystack, literals in groups:
        text = haystacks[haystack]
        if text is None:
            continue
        for literal in literals:
            if literal in text:
                break
        else:
            return False
    return True
