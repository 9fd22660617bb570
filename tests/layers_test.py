#!/usr/bin/env python3
"""Fails on an #include that goes from a lower layer of src/ to a higher one.

The order is the line of docs/DESIGN.md that starts with "Layer order:" (written once,
there). A folder may include its own files, any lower layer and the public headers
(include/collectives/).

Usage: layers_test.py <source dir>
"""
import pathlib
import re
import sys


def layer_order(design):
    for line in design.read_text().splitlines():
        if line.startswith("Layer order:"):
            names = re.findall(r"[a-z_]+", line.split(":", 1)[1])
            return {name: i for i, name in enumerate(names)}
    sys.exit(f"{design}: no line starting with 'Layer order:'")


def upward_includes(src, rank):
    found = set()
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu", ".cuh"):
            continue
        rel = path.relative_to(src).as_posix()
        here = rel.split("/", 1)[0]
        if here not in rank:
            yield f"{rel}: folder '{here}' is not in the layer order"
            continue
        for target in re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(), re.M):
            there = target.split("/", 1)[0]
            if there == "collectives" or there == here:
                continue
            if there not in rank:
                yield f"{rel}: includes {target}, outside the layer order"
            elif rank[there] > rank[here]:
                found.add((rel, target))
    for edge in sorted(found):
        yield f"{edge[0]}: includes {edge[1]}, a higher layer ({edge[1].split('/')[0]} above {edge[0].split('/')[0]})"


def main():
    root = pathlib.Path(sys.argv[1])
    rank = layer_order(root / "docs" / "DESIGN.md")
    problems = list(upward_includes(root / "src", rank))
    for p in problems:
        print(p)
    print(f"layers: {' < '.join(sorted(rank, key=rank.get))}; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
