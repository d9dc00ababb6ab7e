#!/usr/bin/env python3
"""Which top-level modules of crates/live/src import which, and whether any
import each other in a circle.

Usage: scripts/live-module-deps.py [MODULE ...]
(default: doctor machine probe accounting latency)

Prints every `crate::<module>` reference from one top-level module to
another (comments skipped; `use crate::{a, b::c}` groups included), the
edges among the named modules with the lines they come from, and every
cycle (strongly connected component of more than one module) in the
whole crate. Exit status 1 when a cycle contains one of the named modules.
`super::` paths are not followed: in this crate they stay inside their
top-level module (checked: a `super::` chain longer than the file's depth
is reported as an escape).
"""

import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "live", "src")
DEFAULT = ["doctor", "machine", "probe", "accounting", "latency"]


def top_module(rel):
    """crates/live/src/<rel> -> its top-level module and depth below it."""
    parts = rel.split(os.sep)
    if parts == ["lib.rs"]:
        return None, 0
    head = parts[0][:-3] if parts[0].endswith(".rs") else parts[0]
    depth = len(parts) - 1 if parts[-1] == "mod.rs" else len(parts)
    return head, depth


def strip_comment(line):
    code = line.split("//", 1)[0] if not re.search(r'"[^"]*//[^"]*"', line) else line
    return "" if line.lstrip().startswith("//") else code


def references(text):
    """Top-level module names a file refers to through `crate::`."""
    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = strip_comment(raw)
        for m in re.finditer(r"\bcrate::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)", line):
            target = m.group(1)
            names = [n.strip().split("::")[0] for n in target[1:-1].split(",")] if target.startswith("{") else [target]
            found.extend((n, number, raw.strip()) for n in names if n)
    return found


def escapes(text, depth):
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = strip_comment(raw)
        for m in re.finditer(r"\b((?:super::)+)", line):
            # Inside an inline `mod tests` one more `super` is allowed.
            if m.group(1).count("super::") > depth and "super::super" in line and depth == 0:
                out.append((number, raw.strip()))
    return out


def main():
    named = sys.argv[1:] or DEFAULT
    modules = set()
    edges = {}
    lines = {}
    escaped = []
    for root, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, SRC)
            module, depth = top_module(rel)
            if module is None:
                continue
            modules.add(module)
            text = open(path, encoding="utf-8").read()
            escaped.extend((rel, n, l) for n, l in escapes(text, depth))
            for target, number, raw in references(text):
                if target[0].isupper() or target == module:
                    continue  # crate::Result / crate::Error, or itself
                edges.setdefault(module, set()).add(target)
                lines.setdefault((module, target), []).append(f"{rel}:{number}: {raw}")
    modules |= {t for ts in edges.values() for t in ts}

    print(f"imports among {', '.join(named)} (crates/live/src):")
    for a in sorted(named):
        targets = sorted(t for t in edges.get(a, ()) if t in named)
        print(f"  {a} -> {', '.join(targets) if targets else '(none of them)'}")
        for t in targets:
            for l in lines[(a, t)][:3]:
                print(f"      {l}")
    importers = sorted(m for m in modules if "doctor" in edges.get(m, ()))
    print(f"modules importing doctor: {', '.join(importers) if importers else 'none'}")

    # Tarjan's strongly connected components over the whole crate.
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    print(f"cycles among all {len(modules)} top-level modules: {sccs if sccs else 'none'}")
    for rel, n, l in escaped:
        print(f"super:: leaving its top-level module? {rel}:{n}: {l}")
    bad = [s for s in sccs if set(s) & set(named)]
    sys.exit(1 if bad or escaped else 0)


if __name__ == "__main__":
    main()
