#!/usr/bin/env bash
# compute-sanitizer over the `gpu` CTest tests (docs/sanitizers.md): each test's own command and
# environment, from ctest's JSON, run under one tool. Usage: dev/device_check_sanitizer.sh TOOL [SECONDS]
#   TOOL: memcheck, racecheck, synccheck or initcheck; SECONDS: the whole run's budget (default 500).
#   EXCLUDE=Suite.*:Other.* leaves those GoogleTest cases out (racecheck makes cuDNN's algorithm
#   search take minutes: CudaPrecision.* alone ran 197 s).
# Logs one file per test under $OUT/sanitizer-TOOL/ and prints one line per test: its errors.
set -u
TOOL=${1:-memcheck}
BUDGET=${2:-500}
O=${OUT:-/tmp/out}/sanitizer-$TOOL
mkdir -p "$O"
ctest --test-dir build-gpu -L gpu --show-only=json-v1 > "$O/tests.json"
python3 - "$TOOL" "$BUDGET" "$O" <<'PY'
import json, os, re, subprocess, sys, time
tool, budget, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
tests = json.load(open(os.path.join(out, "tests.json")))["tests"]
t_end = time.time() + budget
# Leaks are left out of memcheck unless LEAKS=1: loupe's caching allocator and the cuBLAS/cuDNN
# handles live for the whole process by design, and every block of them shows as "leaked" at exit.
leaks = ["--leak-check", "full"] if os.environ.get("LEAKS") == "1" else []
extra = {"memcheck": leaks, "racecheck": ["--racecheck-report", "hazard"]}.get(tool, [])
for t in tests:
    name, cmd = t["name"], t["command"]
    env = dict(os.environ)
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            for kv in p["value"]:
                k, v = kv.split("=", 1)
                env[k] = v
    if not cmd[0].endswith(("test_ops_cuda", "test_ops_half", "test_copy", "test_train", "test_loader",
                            "test_grad_scaler", "test_embedding", "test_graph", "test_lstm")):
        print(f"{name:34s} skipped (not a test binary: {os.path.basename(cmd[0])})", flush=True)
        continue
    ex = os.environ.get("EXCLUDE")
    if ex:
        f = [i for i, a in enumerate(cmd) if a.startswith("--gtest_filter=")]
        if f:
            cmd = list(cmd)
            cmd[f[0]] += (":" if "-" in cmd[f[0]] else "-") + ex
        else:
            cmd = [*cmd, "--gtest_filter=*-" + ex]
    left = t_end - time.time()
    if left < 20:
        print(f"{name:34s} not run (budget spent)", flush=True)
        continue
    log = os.path.join(out, name + ".log")
    t0 = time.time()
    try:
        r = subprocess.run(["compute-sanitizer", "--tool", tool, "--error-exitcode", "99", *extra, *cmd],
                           env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, timeout=left - 5)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    text = open(log, errors="replace").read()
    summ = re.findall(r"(?:ERROR SUMMARY: |RACECHECK SUMMARY: \d+ hazards displayed \()(\d+) error", text)
    gt = re.findall(r"\[  (PASSED|FAILED|SKIPPED) .*", text)
    print(f"{name:34s} rc={rc} errors={summ[-1] if summ else '?'} {time.time()-t0:.0f}s  {' '.join(g for g in gt)}",
          flush=True)
    # The kinds of report and the first frame of each, counted: the log in one screen.
    kinds = {}
    lines = text.splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"========= (Invalid \S+ of size \d+|Leaked|Program hit \S+|Uninitialized \S+|Race reported|\S+ hazard|Error: .*)", l)
        if m:
            where = next((x.strip() for x in lines[i + 1:i + 4] if "at " in x and "in " in x), "")
            key = m.group(1) + " " + re.sub(r"0x[0-9a-f]+", "", where)[:160]
            kinds[key] = kinds.get(key, 0) + 1
    for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {n:5d}  {k}", flush=True)
PY
