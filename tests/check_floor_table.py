#!/usr/bin/env python3
"""CTest floor_table: scripts/floor_table.py on a real graphed profile (mnist_mlp, fp16, batch 128,
an H100): its floor row is the one computed here from the rows, its step the profile's; a profile
of an eager step and a malformed argument are refused. usage: check_floor_table.py SOURCE_DIR"""
import json
import os
import subprocess
import sys

src = sys.argv[1]
script = os.path.join(src, "scripts", "floor_table.py")
profile = os.path.join(src, "lab", "results", "h100-graphprof-2026-11-27", "profile-mnist_mlp@128-graph.json")
p = json.load(open(profile))
peak, bw = p["ceiling_tflops"] * 1e12, p["ceiling_gbs"] * 1e9
want = sum(max(r["flops_per_step"] / peak, r["bytes_per_step"] / bw) for r in p["rows"]) * 1e6
out = subprocess.run([sys.executable, script, f"mnist_mlp@128={profile}", "--pytorch", "mnist_mlp@128=500000"],
                     capture_output=True, text=True, check=True).stdout
row = [line for line in out.splitlines() if line.startswith("| mnist_mlp | 128 |")]
assert len(row) == 1, out
cells = [c.strip() for c in row[0].strip("|").split("|")]
assert abs(float(cells[2]) - want) < 0.06, (cells, want)
assert cells[4] == f"{p['wall_us_per_step']:.1f}", cells
assert cells[9] == "256.0", cells  # 128 samples at 500,000 a second
# With dev/device_check_compiled.sh's table: loupe's bench step and the ratio to PyTorch's.
md = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"floor_compiled_{os.getpid()}.md")
with open(md, "w") as f:
    f.write("| model | batch | loupe best (precision) | PyTorch compiled + graph + fp16 | ratio |\n|---|---|---|---|---|\n"
            "| mnist_mlp | 128 | 1,280,000 (fp16) | 640,000 | 2.00x |\n")
out = subprocess.run([sys.executable, script, f"mnist_mlp@128={profile}", "--compiled", md],
                     capture_output=True, text=True, check=True).stdout
os.remove(md)
cells = [c.strip() for c in [l for l in out.splitlines() if l.startswith("| mnist_mlp | 128 |")][0].strip("|").split("|")]
assert cells[9:] == ["200.0", "100.0", "2.00x"], cells
eager = dict(p, graph_replays=-1)
tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"floor_eager_{os.getpid()}.json")
json.dump(eager, open(tmp, "w"))
r = subprocess.run([sys.executable, script, f"mnist_mlp@128={tmp}"], capture_output=True, text=True)
os.remove(tmp)
assert r.returncode != 0 and "not of a graphed step" in r.stderr, r
r = subprocess.run([sys.executable, script, profile], capture_output=True, text=True)
assert r.returncode != 0 and "MODEL@BATCH=VALUE" in r.stderr, r
print(f"floor_table: mnist_mlp@128 floor {want:.1f} us against a {p['wall_us_per_step']:.1f} us step; refusals hold")
