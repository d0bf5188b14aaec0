#!/bin/bash
# On a host with 2 GPUs (label multigpu; exit 77 = skipped):
#   1. `loupe bench mnist_mlp --gpus 1,2`: both sizes measured, the table and its CSV;
#   2. torchrun --standalone --nproc-per-node 2 --no-python loupe train ...: trains to the end;
#   3. two torchrun c10d "hosts" on 127.0.0.1 (one GPU each): train to the end;
#   5. --gpus 2 --timeline: one file, both GPUs' samples (gpu 0 and 1), rows in time order;
#   4. Ctrl-C (SIGINT to loupe's launcher, as a terminal sends it) mid-run: every rank stops
#      cleanly, status 130, within seconds, no rank left behind.
# torchrun is PyTorch's; without it parts 2 and 3 fail where the GPUs are (LOUPE_TEST_REQUIRE)
# and say so. usage: check_launchers.sh LOUPE
set -u
LOUPE=$1
source "$(dirname "$0")/multigpu_common.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 4. Ctrl-C first (it needs no torchrun)
"$LOUPE" train mnist_mlp --synthetic --resident --batch 64 --gpus 2 --epochs 100000 --plain > "$work/i.txt" 2>&1 &
launcher=$!
for _ in $(seq 600); do grep -q "^epoch  *2/" "$work/i.txt" && break; sleep 0.1; done
grep -q "^epoch  *2/" "$work/i.txt" || { kill -KILL $launcher; cat "$work/i.txt"; fail "Ctrl-C: no second epoch within 60 s"; }
ranks=$(pgrep -P $launcher | tr '\n' ' ')
t0=$(date +%s.%N)
kill -INT $launcher
wait $launcher; rc=$?
t=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
echo "== 4. Ctrl-C: status $rc after $t s"; tail -4 "$work/i.txt"
[ $rc -eq 130 ] || { cat "$work/i.txt"; fail "Ctrl-C: status $rc, want 130"; }
python3 -c "import sys; sys.exit(float(sys.argv[1]) > 10)" "$t" || fail "Ctrl-C: $t s to end, want 10 at most"
for r in $ranks; do kill -0 "$r" 2>/dev/null && fail "Ctrl-C: rank process $r is still there"; done
grep -q "^interrupted" "$work/i.txt" || fail "Ctrl-C: rank 0 did not say where it stopped"

# 5. the timeline of both GPUs
"$LOUPE" train mnist_mlp --synthetic --resident --batch 256 --gpus 2 --epochs 3 --plain --timeline "$work/tl.csv" \
  > "$work/tl.txt" 2>&1 || { cat "$work/tl.txt"; fail "--timeline with --gpus 2 exited $?"; }
echo "== 5. --timeline"; grep "^timeline" "$work/tl.txt"
python3 - "$work/tl.csv" <<'PY' || exit 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
gpus = {r["gpu"] for r in rows if r["gpu"]}
assert gpus == {"0", "1"}, f"gpu values {sorted(gpus)}, want 0 and 1"
t = [float(r["t_s"]) for r in rows]
assert t == sorted(t), "rows out of time order"
for g in "01":
    assert sum(1 for r in rows if r["gpu"] == g and r["util_pct"]) >= 3, f"GPU {g}: fewer than 3 samples"
assert sum(1 for r in rows if r["mark"] == "epoch_end") == 3, "want 3 epoch_end marks"
PY

# 1. bench --gpus 1,2
timeout 300 "$LOUPE" bench mnist_mlp --gpus 1,2 --batch 256 --epochs 3 --csv "$work/b.csv" > "$work/b.txt" 2>&1 ||
  { cat "$work/b.txt"; fail "bench --gpus 1,2 exited $?"; }
echo "== 1. bench --gpus 1,2"; cat "$work/b.txt"
python3 - "$work/b.csv" <<'PY' || exit 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["gpus"] for r in rows] == ["1", "2"], rows
for r in rows:
    assert float(r["samples_per_sec"]) > 0, r
assert float(rows[0]["scaling_efficiency"]) == 1.0, rows[0]
eff = float(rows[1]["scaling_efficiency"])
assert 0.2 < eff < 1.5, f"scaling efficiency {eff}: not a plausible figure"
assert 0 < float(rows[1]["nccl_share"]) < 1, rows[1]  # from the --busy run
assert float(rows[1]["bus_gbps"]) > 0, rows[1]
PY
grep -q "^    2 " "$work/b.txt" || fail "no table row for 2 GPUs"

TORCHRUN=(torchrun)
command -v torchrun > /dev/null || TORCHRUN=(python3 -m torch.distributed.run)
"${TORCHRUN[@]}" --help > /dev/null 2>&1 || fail "torchrun is not here (PyTorch's; pip install torch): parts 2 and 3 need it"
common=(--no-python "$LOUPE" train mnist_mlp --synthetic --resident --batch 256 --epochs 2 --plain)

# 2. torchrun --standalone
timeout 180 "${TORCHRUN[@]}" --standalone --nproc-per-node 2 "${common[@]}" --metrics "$work/t.jsonl" > "$work/t.txt" 2>&1 ||
  { cat "$work/t.txt"; fail "torchrun --standalone exited $?"; }
echo "== 2. torchrun --standalone"; grep -E "^(world|epoch|  world|done)" "$work/t.txt"
grep -q "^done in" "$work/t.txt" || { cat "$work/t.txt"; fail "torchrun --standalone: no 'done' line"; }
[ "$(grep -c '"world_size":2' "$work/t.jsonl")" -eq 4 ] || fail "torchrun --standalone: want 2 epochs x 2 ranks of records"

# 3. two c10d "hosts", one GPU each
p=$(port)
for n in 0 1; do
  CUDA_VISIBLE_DEVICES=$n timeout 180 "${TORCHRUN[@]}" --nnodes 2 --nproc-per-node 1 --node-rank $n \
    --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:$p --rdzv-id loupe-check "${common[@]}" \
    --metrics "$work/c$n.jsonl" > "$work/c$n.txt" 2>&1 &
  pids[$n]=$!
done
for n in 0 1; do wait "${pids[$n]}" || { cat "$work/c$n.txt"; fail "c10d host $n exited $?"; }; done
echo "== 3. two c10d hosts"; cat "$work/c0.txt" "$work/c1.txt" | grep -E "^(world|epoch|  world|done)"
grep -q "^done in" "$work/c0.txt" "$work/c1.txt" || fail "c10d: no host printed a 'done' line"
[ "$(cat "$work/c0.jsonl" "$work/c1.jsonl" | grep -c '"world_size":2')" -eq 4 ] || fail "c10d: want 2 epochs x 2 ranks of records"
echo "PASS"
