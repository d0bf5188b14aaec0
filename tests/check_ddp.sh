#!/bin/bash
# `loupe train --gpus N` end to end on a host with 2 GPUs (label multigpu; exit 77 = skipped):
#   1. --gpus 2 on one host: every rank's records, the world's line;
#   2. two "hosts" on this machine (--nnodes 2, one GPU each, NCCL forced onto sockets);
#   3. a rank killed mid-run: the launcher stops the other and exits non-zero within seconds;
#   4. a lost peer across "hosts": the surviving host's rank sees NCCL's error and ends, no hang;
#   5. the loader path on IDX files written here, fp32 and fp16, 1 and 4 workers, to the end;
#   6. an error on one rank (LOUPE_TEST_FAULT=throw:...): named, and every rank ends within seconds;
#   7. a straggler (LOUPE_TEST_FAULT=delay:...): rank 0's world line, records and advice name it;
#   8. on a host of more than 2 GPUs, a world of all of them (up to 8): the loader path to the end
#      and a straggler named among them.
# (5 to 8 run before 4.) The injected fault and straggler are the test build of the command's
# (SEAMS: loupe_test_seams, tests/seams.cpp); the product's `loupe` has no such seam.
# usage: check_ddp.sh LOUPE SEAMS
set -u
LOUPE=$1
SEAMS=$2
source "$(dirname "$0")/multigpu_common.sh"
work=$(mktemp -d)
# The processes started in the background here, ended at exit with their children (the ranks).
# Never `kill 0`: that signals the whole process group, ctest and the shell that ran it included.
bg=()
cleanup() {
  for p in "${bg[@]}"; do
    pkill -KILL -P "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
common=(mnist_mlp --synthetic --resident --batch 256 --plain)

# 1. one host, two GPUs
"$LOUPE" train "${common[@]}" --gpus 2 --epochs 2 --busy --metrics "$work/a.jsonl" > "$work/a.txt" 2>&1 || { cat "$work/a.txt"; fail "--gpus 2 exited $?"; }
echo "== 1. --gpus 2"; cat "$work/a.txt"
python3 - "$work/a.jsonl" <<'EOF' || exit 1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 4, f"{len(recs)} records, want 2 epochs x 2 ranks"
assert sorted(r["rank"] for r in recs) == [0, 0, 1, 1], [r["rank"] for r in recs]
assert all(r["world_size"] == 2 and r["world_samples_per_sec"] > 0 for r in recs)
assert all(r["nccl_share"] is not None and r["nccl_share"] > 0 for r in recs), "NCCL time unmeasured with --busy"
assert all(r["allreduce_bytes_per_step"] > 2.6e6 for r in recs)
print("records ok:", [(r["rank"], r["epoch"], round(r["world_samples_per_sec"])) for r in recs])
EOF
grep -q "world 2 GPUs" "$work/a.txt" || fail "no world line"

# 2. two "hosts" of one GPU each on 127.0.0.1, NCCL over sockets only
P=$(port)
sockets=(env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1)
for h in 0 1; do
  CUDA_VISIBLE_DEVICES=$h "${sockets[@]}" "$LOUPE" train "${common[@]}" --epochs 1 --nnodes 2 --node-rank $h \
    --master 127.0.0.1:$P --metrics "$work/b.jsonl" > "$work/b$h.txt" 2>&1 &
  pids[$h]=$!; bg+=($!)
done
wait ${pids[0]}; r0=$?; wait ${pids[1]}; r1=$?
echo "== 2. two hosts over sockets: exit $r0 $r1"; cat "$work/b0.txt"
[ $r0 = 0 ] && [ $r1 = 0 ] || { cat "$work/b1.txt"; fail "two hosts exited $r0 $r1"; }
[ "$(grep -c '"world_size":2' "$work/b.jsonl")" = 2 ] || fail "two hosts: want 2 records of a world of 2"

# 3. a rank killed mid-run: the launcher ends the other within seconds
# Training has begun when the first epoch's record is in the metrics file (flushed per record; a
# rank's stdout to a file is not, so "epoch 1/" may appear only at its exit). Epochs enough that
# the run cannot end first: one takes ~0.02 s on an H200, and 1000 of them had ended within the
# 30 s this waited, leaving no rank to kill.
started() { for i in $(seq 120); do [ -s "$1" ] && return 0; sleep 0.5; done; return 1; }
"$LOUPE" train "${common[@]}" --gpus 2 --epochs 1000000 --metrics "$work/c.jsonl" > "$work/c.txt" 2>&1 &
launcher=$!; bg+=($!)
started "$work/c.jsonl" || { cat "$work/c.txt"; fail "no epoch ended within 60 s"; }
victim=$(pgrep -P $launcher | tail -1)
[ -n "$victim" ] || fail "no rank to kill"
t0=$(date +%s.%N); kill -9 "$victim"
timeout 30 tail --pid=$launcher -f /dev/null || fail "the launcher still runs 30 s after a rank died"
wait $launcher; rc=$?; t1=$(date +%s.%N)
echo "== 3. a rank killed: launcher exit $rc after $(python3 -c "print(round($t1-$t0,1))") s"; tail -3 "$work/c.txt"
[ $rc != 0 ] || fail "the launcher exited 0 after a rank was killed"
grep -q "rank 1 exited with status 137" "$work/c.txt" || fail "the launcher did not name the dead rank"

# 5. through the loader, on MNIST-format files written here (2,048 training and 512 test images of
# two classes): two epochs to the end, fp32 and fp16, with 1 and 4 loader workers. A rank whose
# loader threads were on the wrong GPU failed its first copy, and the world then hung; a hang
# fails here after 120 s, not at ctest's timeout.
python3 - "$work/idx" <<'PY' || fail "cannot write the IDX files"
import gzip, os, random, struct, sys
d = sys.argv[1]; os.makedirs(d)
rng = random.Random(5)
def write(name, n, images):
    labels = [rng.randrange(2) for _ in range(n)]
    with gzip.open(os.path.join(d, name + "-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
    with gzip.open(os.path.join(d, name + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28))
        for y in labels:  # class 1 bright in the top half, class 0 in the bottom half
            f.write(bytes((200 if (r < 14) == (y == 1) else 0) + rng.randrange(40) for r in range(28) for _ in range(28)))
write("train", 2048, True)
write("t10k", 512, True)
PY
for prec in fp32 fp16; do
  for workers in 1 4; do
    rm -f "$work/e.jsonl"
    timeout -k 5 120 "$LOUPE" train mnist_mlp --data "$work/idx" --gpus 2 --batch 64 --epochs 2 --plain --precision $prec \
      --workers $workers --metrics "$work/e.jsonl" > "$work/e.txt" 2>&1
    rc=$?
    echo "== 5. the loader, $prec, $workers worker(s): exit $rc"; grep -E "^(epoch|done|loupe)" "$work/e.txt"
    [ $rc = 0 ] || { cat "$work/e.txt"; fail "the loader path ($prec, --workers $workers) exited $rc (124: hung for 120 s)"; }
    [ "$(grep -c '"world_size":2' "$work/e.jsonl")" = 4 ] || fail "the loader path: want 4 records (2 epochs x 2 ranks)"
    grep -qE "^done in .*final test accuracy (9[0-9]|100)\." "$work/e.txt" || fail "the loader path did not learn two classes"
  done
done

# 6. an error on one rank mid-epoch (LOUPE_TEST_FAULT): reported with its rank and message, and the
# whole world ends within seconds (the failing rank aborts its communicator instead of waiting in
# ncclCommDestroy for peers that wait for it).
t0=$(date +%s.%N)
LOUPE_TEST_FAULT=throw:1:20 timeout -k 5 60 "$SEAMS" train "${common[@]}" --gpus 2 --epochs 100 > "$work/f.txt" 2>&1
rc=$?; t1=$(date +%s.%N)
echo "== 6. a fault on rank 1: exit $rc after $(python3 -c "print(round($t1-$t0,1))") s"; grep "^loupe" "$work/f.txt"
[ $rc != 0 ] && [ $rc != 124 ] || { cat "$work/f.txt"; fail "a fault on one rank: exit $rc (124: the world hung)"; }
grep -q "rank 1 of 2 failed" "$work/f.txt" || fail "the failing rank was not named"
grep -q "a fault injected at step 20 (LOUPE_TEST_FAULT)" "$work/f.txt" || fail "the failing rank's error was not printed"
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 30 else 1)" || fail "the world took 30 s or more to end"

# 7. a straggler: rank 1 sleeps 5 ms as each step begins (LOUPE_TEST_FAULT, before its batch, so in
# its data wait), and rank 0's GPU waits for it in NCCL. Rank 0's second world line, its records and
# its advice must name rank 1: with --busy from the unhidden NCCL shares, without it from the data
# waits (resident data, where the wait for a batch is the host's own time).
for busy in --busy ""; do
  rm -f "$work/g.jsonl"
  LOUPE_TEST_FAULT=delay:1:5 timeout -k 5 120 "$SEAMS" train "${common[@]}" --gpus 2 --epochs 2 $busy \
    --metrics "$work/g.jsonl" > "$work/g.txt" 2>&1
  rc=$?
  how=${busy:-without --busy}
  echo "== 7. a straggler (rank 1 sleeps 5 ms a step), $how: exit $rc"; grep -E "slowest rank|advice: straggler" "$work/g.txt"
  [ $rc = 0 ] || { cat "$work/g.txt"; fail "the straggler run ($how) exited $rc (124: hung for 120 s)"; }
  grep -q "^  slowest rank 1: " "$work/g.txt" || { cat "$work/g.txt"; fail "the world line does not name rank 1 slowest ($how)"; }
  grep -q "advice: straggler: rank 1 holds the others back" "$work/g.txt" || fail "no straggler advice naming rank 1 ($how)"
  python3 - "$work/g.jsonl" <<'PY' || fail "the straggler's records ($how)"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
r0 = [r for r in recs if r["rank"] == 0]
assert len(r0) == 2, f"{len(r0)} records of rank 0, want 2 epochs"
for r in r0:
    assert r["slowest_rank"] == 1, f"epoch {r['epoch']}: slowest_rank {r['slowest_rank']}, want 1"
    assert (r["straggler_share"] or 0) >= 0.15, f"epoch {r['epoch']}: straggler_share {r['straggler_share']}"
    assert any(a.startswith("straggler: rank 1 ") for a in r["advice"]), r["advice"]
print("records ok:", [(r["epoch"], r["slowest_rank"], round(r["straggler_share"], 2)) for r in r0])
PY
done

# 8. every GPU of a larger host: the loader path in fp16 to the end (each rank its own part of every
# global step, one record per rank and epoch), and the last rank a straggler that rank 0 names
# among the others (their median, not one peer's figures).
all=$(( gpus > 8 ? 8 : gpus ))
if [ "$all" -gt 2 ]; then
  rm -f "$work/h.jsonl"
  timeout -k 5 180 "$LOUPE" train mnist_mlp --data "$work/idx" --gpus $all --batch 64 --epochs 2 --plain --precision fp16 \
    --workers 4 --metrics "$work/h.jsonl" > "$work/h.txt" 2>&1
  rc=$?
  echo "== 8. the loader on all $all GPUs: exit $rc"; grep -E "^(epoch|done|loupe|  world)" "$work/h.txt"
  [ $rc = 0 ] || { cat "$work/h.txt"; fail "the loader path on $all GPUs exited $rc (124: hung for 180 s)"; }
  [ "$(grep -c "\"world_size\":$all" "$work/h.jsonl")" = $((2 * all)) ] || fail "$all GPUs: want $((2 * all)) records"
  grep -qE "^done in .*final test accuracy (9[0-9]|100)\." "$work/h.txt" || fail "$all GPUs did not learn two classes"
  last=$((all - 1))
  LOUPE_TEST_FAULT=delay:$last:5 timeout -k 5 120 "$SEAMS" train "${common[@]}" --gpus $all --epochs 2 --busy \
    > "$work/i.txt" 2>&1 || { cat "$work/i.txt"; fail "the straggler run on $all GPUs exited $?"; }
  echo "== 8. a straggler (rank $last of $all)"; grep -E "slowest rank|advice: straggler" "$work/i.txt"
  grep -q "^  slowest rank $last: " "$work/i.txt" || { cat "$work/i.txt"; fail "$all GPUs: rank $last not named slowest"; }
  grep -q "advice: straggler: rank $last holds the others back" "$work/i.txt" || fail "$all GPUs: no straggler advice"
fi

# 4. a lost peer across hosts: no launcher sees the other host's rank; NCCL's error must end it
P=$(port)
for h in 0 1; do
  CUDA_VISIBLE_DEVICES=$h "${sockets[@]}" "$LOUPE" train "${common[@]}" --epochs 1000000 --nnodes 2 --node-rank $h \
    --master 127.0.0.1:$P --metrics "$work/d$h.jsonl" > "$work/d$h.txt" 2>&1 &
  pids[$h]=$!; bg+=($!)
done
started "$work/d0.jsonl" || { cat "$work/d0.txt"; fail "two hosts: no epoch ended within 60 s"; }
victim=$(pgrep -P ${pids[1]} | tail -1)
[ -n "$victim" ] || fail "no rank of host 1 to kill"
t0=$(date +%s.%N); kill -9 "$victim"
stuck() {  # what host 0 is doing, for the failure message
  tail -5 "$work/d0.txt"; echo "-- host 1:"; tail -5 "$work/d1.txt"
  echo "-- processes:"; ps -eo pid,ppid,pgid,stat,etime,args --forest | grep -E "[l]oupe train" | cut -c1-160
  local r0; r0=$(pgrep -P ${pids[0]} | tail -1)
  if [ -n "$r0" ]; then
    echo "-- host 0's rank $r0: threads $(cat /proc/$r0/task/*/comm 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
    echo "-- its sockets: $(ls -l /proc/$r0/fd 2>/dev/null | grep -c socket), signals: $(grep -E '^Sig(Pnd|Blk)|^ShdPnd' /proc/$r0/status | tr '\n' ' ')"
  fi
  if [ -n "$r0" ] && command -v gdb > /dev/null; then
    timeout 60 gdb -p "$r0" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E "^Thread|^#" | head -120
  fi
}
timeout 60 tail --pid=${pids[0]} -f /dev/null || { stuck; fail "host 0 still runs 60 s after host 1's rank died"; }
wait ${pids[0]}; rc=$?; t1=$(date +%s.%N)
echo "== 4. a lost peer: host 0 exit $rc after $(python3 -c "print(round($t1-$t0,1))") s"; tail -3 "$work/d0.txt"
[ $rc != 0 ] || fail "host 0 exited 0 after its peer died"
echo "all ok"
