#!/usr/bin/env python3
"""The layering of framework/ (docs/design.md, "Layout"): core/ includes nothing from the other
folders, and the folders' include graph has no cycle (so no two folders include each other).
Also: the roofline study is a tool (cli/roofline/), not instrumentation. And the command stays
thin (docs/design.md, "The run"): cli/'s own files (cli/roofline/ aside) hold at most 2,500 lines
and include nothing that drives a model (autograd/, nn/, optim/, loader/, models/session.h): the
run (run/) does.

Usage: check_layers.py SOURCE_DIR     exit 0 when the rules hold, else 1 with every breach listed.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def folder_graph(framework):
    folders = sorted(d for d in os.listdir(framework) if os.path.isdir(os.path.join(framework, d)))
    edges = {f: {} for f in folders}  # folder -> {included folder: first file that includes it}
    for f in folders:
        for root, _, files in os.walk(os.path.join(framework, f)):
            for name in sorted(files):
                if not name.endswith((".h", ".cuh", ".cpp", ".cu")):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as fh:
                    for inc in INCLUDE.findall(fh.read()):
                        if inc in edges and inc != f:
                            edges[f].setdefault(inc, os.path.relpath(path, framework))
    return edges


def find_cycle(edges):
    state = {}  # 1: on the stack, 2: done
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


CLI_LINES = 2500
DRIVES_A_MODEL = ("autograd/", "nn/", "optim/", "loader/", "models/session.h")


def thin_command(src):
    """Breaches of the command's rules: its size, and includes of what drives a model."""
    errors, lines = [], 0
    cli = os.path.join(src, "cli")
    for name in sorted(os.listdir(cli)):
        if not name.endswith((".h", ".cpp")):
            continue
        with open(os.path.join(cli, name), encoding="utf-8") as fh:
            text = fh.read()
        lines += text.count("\n")
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            if inc.startswith(DRIVES_A_MODEL):
                errors.append(f"cli/{name} includes {inc}: the command drives no model, the run (run/) does")
    if lines > CLI_LINES:
        errors.append(f"cli/ holds {lines} lines, over {CLI_LINES}: the command parses, configures and prints; "
                      "what it measures or drives belongs in the library")
    return errors


def main():
    src = sys.argv[1]
    framework = os.path.join(src, "framework")
    edges = folder_graph(framework)
    errors = []
    for inc, path in sorted(edges.get("core", {}).items()):
        errors.append(f"core/ is the ground floor, but {path} includes {inc}/")
    cycle = find_cycle(edges)
    if cycle:
        hops = [f"{a}/ -> {b}/ ({edges[a][b]})" for a, b in zip(cycle, cycle[1:])]
        errors.append("the folders include each other in a cycle: " + "; ".join(hops))
    for name in os.listdir(os.path.join(framework, "instrument")):
        if name.startswith("roofline"):
            errors.append(f"instrument/{name}: the roofline study belongs in cli/roofline/")
    errors += thin_command(src)
    for f in sorted(edges):
        print(f"{f:11s} includes {', '.join(sorted(edges[f])) or '(nothing)'}")
    for e in errors:
        print("layers:", e)
    print("layers: ok" if not errors else f"layers: {len(errors)} breach(es)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
