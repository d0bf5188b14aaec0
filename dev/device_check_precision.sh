#!/usr/bin/env bash
# Checks on a GPU machine (lab/plans/mixed_precision.md; logs under $OUT): fp32, fp16 and bf16 on
# the same recipe (final and best test accuracy, seconds, the fp16 loss scale and skipped steps),
# then speed and peak memory with `loupe bench`.
#   MODELS="mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm" CIFAR_EPOCHS=20 dev/device_check_precision.sh
set -u
L=./build-gpu/loupe
O=${OUT:-/tmp/out}
mkdir -p "$O"
for m in ${MODELS:-mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm}; do
  case $m in
    mnist_mlp|mnist_cnn) data=(--data /usr/share/datasets/fashion-mnist) ;;
    cifar10_cnn) data=(--synthetic=learnable --epochs ${CIFAR_EPOCHS:-20}) ;;
    imdb_bilstm) data=(--synthetic=learnable) ;;
  esac
  for p in fp32 fp16 bf16; do
    $L train $m --device cuda "${data[@]}" --precision $p --plain --no-nvml > "$O/$m-$p.log" 2>&1 || tail -5 "$O/$m-$p.log"
    echo "$m $p: $(grep -E '^done' "$O/$m-$p.log" | cut -c1-110) $(grep -oE 'loss scale [0-9.e+]+ \([0-9]+ skipped\)' "$O/$m-$p.log" | tail -1)"
  done
done
if [ -z "${SKIP_BENCH:-}" ]; then
  $L bench cifar10_cnn,mnist_mlp,mnist_cnn --batch 128,1024 --precision fp32,fp16,bf16 --steps 60 --warmup 10 2>&1 | tee "$O/bench.txt"
  $L bench imdb_bilstm,char_lstm --batch 32,1024 --precision fp32,fp16 --steps 40 --warmup 10 2>&1 | tee -a "$O/bench.txt"
fi
