#!/usr/bin/env bash
# A/B/C: base (47b2c61), mid (fused conv), this tree (+ filter-gradient adds); profiles; GPU suite.
set -u
export NCCL_NVLS_ENABLE=0
O=${OUT:-/tmp/out}; mkdir -p "$O"
T0=$SECONDS
(SOURCE=.devdata/base BUILD=build-base TARGET=loupe_cli dev/gpu_configure.sh "$O/base.log") &
(SOURCE=.devdata/mid BUILD=build-mid TARGET=loupe_cli dev/gpu_configure.sh "$O/mid.log") &
dev/gpu_configure.sh "$O/build.log" || { tail -30 "$O/build.log"; exit 1; }
wait
echo "built at $((SECONDS-T0)) s"
for r in 1 2; do
  for b in base mid gpu; do
    echo "== round $r build-$b"
    build-$b/loupe bench mnist_cnn,cifar10_cnn --batch 128,1024 --precision fp16,bf16 --steps 200 --min-seconds 1 --csv "$O/bench-$b-$r.csv" 2>&1 | grep -E "^(mnist|cifar)" | cut -c1-60
  done
done
echo "bench at $((SECONDS-T0)) s"
for m in cifar10_cnn mnist_cnn; do for b in 128 1024; do
  timeout 100 build-gpu/loupe profile $m --synthetic --resident --precision fp16 --graph on --batch $b \
      --profile-steps 10:19 --json "$O/profile-$m@$b.json" > "$O/profile-$m@$b.txt" 2>&1
done; done
echo "profiles at $((SECONDS-T0)) s"
timeout ${TEST_LIMIT:-240} env LOUPE_DATA=$PWD/.devdata ctest --test-dir build-gpu -L '^gpu$' --output-on-failure > "$O/ctest-gpu.log" 2>&1
grep -E 'tests passed|tests failed|Total Test|\(Failed\)|Timeout' "$O/ctest-gpu.log"
echo "done at $((SECONDS-T0)) s"
