"""Fails when modules of evalstream import each other in a cycle, directly or through others.

import-linter's layer contracts keep `stream -> connectors -> assertions` one way; this keeps
every package acyclic inside too (the three subpackages of `evalstream`). Imports inside functions
count: deferring an import hides a cycle from Python's loader, not from a reader.

    python scripts/check_import_cycles.py      # exit 1 and the cycles when there are any
"""

from __future__ import annotations

import sys

import grimp

PACKAGES = ("evalstream",)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, sorted(graph.find_modules_directly_imported_by(root))))
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in graph.modules:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.find_modules_directly_imported_by(nxt))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def main() -> int:
    cycles = import_cycles(grimp.build_graph(*PACKAGES))
    for cycle in cycles:
        print("import cycle: " + " <-> ".join(cycle), file=sys.stderr)
    if cycles:
        print(
            "break each cycle: move what both sides need into a module of its own",
            file=sys.stderr,
        )
        return 1
    print(f"no import cycles in {', '.join(PACKAGES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
