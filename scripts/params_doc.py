#!/usr/bin/env python3
"""Writes README.md's table of environment variables from src/base/params.def, the one
declaration of every parameter (collinfo prints the same table at run time).

  scripts/params_doc.py            rewrite the table in README.md
  scripts/params_doc.py --check    exit 1, naming the first difference, where README.md's
                                   table is not what params.def makes (a CTest runs this)

The table sits between the lines `<!-- params: begin -->` and `<!-- params: end -->`.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- params: begin -->", "<!-- params: end -->"
TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*)|(,)|(\)))')


def strip_comments(text):
    """params.def without its // comments (no string in it holds //)."""
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def parse_args_at(text, pos):
    """The arguments of the COLL_PARAM( whose '(' ends at pos: adjacent string literals
    joined, as the compiler joins them. Returns (args, position after the ')')."""
    args, current = [], None
    while True:
        m = TOKEN.match(text, pos)
        if not m:
            raise SystemExit(f"params.def: cannot parse near {text[pos:pos + 40]!r}")
        pos = m.end()
        literal, ident, comma, close = m.groups()
        if literal is not None:
            current = (current or "") + bytes(literal, "utf-8").decode("unicode_escape")
        elif ident is not None:
            current = ident
        if comma or close:
            args.append(current)
            current = None
        if close:
            return args, pos


def parameters(def_path):
    text = strip_comments(def_path.read_text())
    text = text[text.index("#endif") + len("#endif"):]  # past the guard's #error text
    out = []
    for m in re.finditer(r"\bCOLL_PARAM\(", text):
        args, _ = parse_args_at(text, m.end())
        if len(args) != 5:
            raise SystemExit(f"params.def: COLL_PARAM with {len(args)} arguments: {args}")
        out.append(dict(zip(("type", "name", "default", "unit", "doc"), args)))
    return out


def shown_default(p):
    value, unit = p["default"], p["unit"]
    if value == "":
        return "unset"
    if unit == "bytes" and value.isdigit() and int(value) >= 1024:
        n = int(value)
        for size, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if n % size == 0:
                return f"{n // size} {suffix}"
    return f"{value} {unit}".strip()


def table(params):
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for p in params:
        doc = p["doc"].replace("|", "\\|")
        lines.append(f"| `COLL_{p['name']}` | {shown_default(p)} | {doc} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args()
    readme = pathlib.Path(args.readme)
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        print(f"{readme}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    new = "\n" + table(parameters(ROOT / "src/base/params.def")) + "\n"
    if args.check:
        if old == new:
            return 0
        for a, b in zip(old.splitlines() + [""] * 999, new.splitlines()):
            if a != b:
                print(f"{readme}'s parameter table differs from src/base/params.def:\n"
                      f"  README:     {a}\n  params.def: {b}\n"
                      "run scripts/params_doc.py to rewrite it", file=sys.stderr)
                break
        else:
            print(f"{readme}'s parameter table has rows params.def lacks: "
                  "run scripts/params_doc.py", file=sys.stderr)
        return 1
    readme.write_text(head + BEGIN + new + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
