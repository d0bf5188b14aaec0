# Sourced by the two-GPU checks (check_ddp.sh, check_launchers.sh) after `LOUPE=$1`: NVLink
# multicast off, the skip (exit 77) where this loupe has no NCCL or the host fewer than 2 GPUs,
# and the helpers both use.
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on these machines
if ! "$LOUPE" --version | grep -q "^NCCL: on"; then echo "skipped: this loupe was built without NCCL"; exit 77; fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
if [ "${gpus:-0}" -lt 2 ]; then echo "skipped: needs 2 GPUs (nvidia-smi shows ${gpus:-0})"; exit 77; fi
fail() { echo "FAIL: $*"; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
