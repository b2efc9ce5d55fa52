#!/usr/bin/env python3
"""memq-core's layers: which file of core/src uses which, and whether any use points up;
and the size of its files and functions.

Every item a file names through a `crate::` path (in a `use` or inline) is resolved to
the file that defines it, which gives a graph of files. The check fails if that graph
has a circle, or if a file uses one in a higher layer (the table below, from
docs/ARCHITECTURE.md). Run from the repository's root:

    python3 scripts/layers.py            # check; prints the graph with --graph
"""

import re
import sys
from pathlib import Path

SRC = Path("core/src")

# Layer of each file, bottom first (a glob prefix matches a folder). A file may use
# files of its own layer or lower ones; within a layer, the graph must have no circle.
LAYERS = [
    ["error.rs", "message.rs", "route.rs", "codec"],
    ["sync.rs", "wait.rs", "wait/", "time/", "config.rs"],
    ["log/"],
    ["ack/config.rs", "ack/state.rs"],
    ["partition/", "read/group/shared.rs"],
    ["partition.rs"],
    ["read/"],
    ["ack/"],
    ["publish.rs", "publish/", "topic/"],
    ["stats.rs", "broker.rs", "blocking.rs", "lib.rs"],
]

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+|unsafe\s+|async\s+)*"
    r"(?:struct|enum|trait|type|fn|const|static|mod)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
CRATE_PATH = re.compile(r"crate::((?:[a-z_][a-z0-9_]*::)*)(\{[^;]*?\}|[A-Za-z_][A-Za-z0-9_]*)", re.S)


def layer_of(rel):
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if rel == p or rel.startswith(p.rstrip("/") + "/") or rel == p.rstrip("/") + ".rs":
                if best is None or len(p) > best[1]:
                    best = (rank, len(p))
    return None if best is None else best[0]


def strip_tests(text):
    # Test modules may use anything; they are not part of the layering.
    i = text.find("#[cfg(test)]\nmod tests")
    return text if i < 0 else text[:i]


def names_in(group):
    group = group.strip()
    if not group.startswith("{"):
        return [group]
    out = []
    for part in re.split(r",", group.strip("{}")):
        part = part.strip()
        if not part:
            continue
        part = part.split(" as ")[0].strip()
        out.append(part.split("::")[-1].strip("{} "))
    return out


def resolve(mods, name, modules, defined):
    """The file that defines `name`, reached as `crate::<mods>::name`."""
    full = "::".join(mods + [name])
    if full in modules:  # a module itself
        return modules[full]
    homes = defined.get(name, set())
    mod = "::".join(mods)
    if mod in modules:
        base = modules[mod]
        folder = base[:-len("mod.rs")] if base.endswith("mod.rs") else base[:-3] + "/"
        inside = [h for h in homes if h == base or h.startswith(folder)]
        if len(inside) == 1:
            return inside[0]
        return base
    if len(homes) == 1:
        return next(iter(homes))
    return None


MAX_FILE_LINES = 850
MAX_FN_LINES = 80
FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+|async\s+)*fn\s+(\w+)", re.M)


def sizes(files, rel):
    """Files over MAX_FILE_LINES, and functions over MAX_FN_LINES whose body does not
    say why in a comment (in it or above it) with `Long:` (tests excepted)."""
    bad = []
    for p in files:
        lines = p.read_text().split("\n")
        if len(lines) > MAX_FILE_LINES:
            bad.append(f"{rel[p]}: {len(lines)} lines (at most {MAX_FILE_LINES})")
        code = strip_tests("\n".join(lines)).split("\n")
        i = 0
        while i < len(code):
            m = FN.match(code[i])
            if not m or code[i].rstrip().endswith(";"):
                i += 1
                continue
            indent = m.group(1)
            end = i
            while end < len(code) and not (code[end].startswith(indent + "}") and len(code[end].rstrip()) == len(indent) + 1):
                end += 1
            length = end - i + 1
            above = i
            while above > 0 and code[above - 1].strip().startswith(("//", "#[")):
                above -= 1
            body = "\n".join(code[above:end + 1])
            if length > MAX_FN_LINES and "Long:" not in body:
                bad.append(f"{rel[p]}:{i + 1}: fn {m.group(2)} is {length} lines (at most "
                           f"{MAX_FN_LINES} without a `Long:` comment saying why)")
            i = end + 1 if end > i else i + 1
    return bad


def main():
    files = sorted(p for p in SRC.rglob("*.rs"))
    rel = {p: str(p.relative_to(SRC)) for p in files}
    defined = {}
    for p in files:
        for name in ITEM.findall(strip_tests(p.read_text())):
            defined.setdefault(name, set()).add(rel[p])
    modules = {}
    for p in files:
        r = rel[p]
        mod = r[:-3].replace("/mod", "").replace("/", "::")
        modules[mod] = r
    graph = {r: set() for r in rel.values()}
    for p in files:
        r = rel[p]
        text = strip_tests(p.read_text())
        text = re.sub(r"//[^\n]*", "", text)  # doc and line comments name paths too
        for path, tail in CRATE_PATH.findall(text):
            mods = [m for m in path.split("::") if m]
            for name in names_in(tail):
                target = resolve(mods, name, modules, defined)
                if target and target != r and target != "lib.rs":
                    graph[r].add(target)
    bad = []
    for a, outs in graph.items():
        la = layer_of(a)
        for b in outs:
            lb = layer_of(b)
            if la is None or lb is None:
                bad.append(f"{a} -> {b}: file not in the layer table of scripts/layers.py")
            elif lb > la:
                bad.append(f"{a} (layer {la}) uses {b} (layer {lb}), a higher layer")
    # Circles: strongly connected components of more than one file.
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    for c in comps:
        bad.append("import circle: " + " <-> ".join(c))
    bad += sizes(files, rel)
    if "--graph" in sys.argv:
        for a in sorted(graph):
            print(f"{a} (layer {layer_of(a)}): {' '.join(sorted(graph[a]))}")
    if bad:
        print("memq-core layering broken:")
        for b in bad:
            print("  " + b)
        return 1
    print(f"memq-core layering: {len(graph)} files, {sum(map(len, graph.values()))} uses, "
          "no circle, no use of a higher layer; files within "
          f"{MAX_FILE_LINES} lines, functions within {MAX_FN_LINES} or saying why")
    return 0


if __name__ == "__main__":
    sys.exit(main())
