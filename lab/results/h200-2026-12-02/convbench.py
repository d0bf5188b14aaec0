# Predicts the gains of (a) conv+bias+relu fused in cuDNN, (b) the 3-channel input padded to 4/8,
# from PyTorch's cuDNN calls: fp16, channels-last, H200.
import torch, torch.nn.functional as F, sys
torch.backends.cudnn.benchmark = True
dev = 'cuda'
def t(fn, iters=50):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    best = 1e9
    for r in range(3):
        a.record()
        for _ in range(iters): fn()
        b.record(); torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) * 1000 / iters)
    return best
shapes = [  # name, C, H, K, pad
    ('cifar conv1', 3, 32, 32, 1), ('cifar conv2', 32, 32, 32, 0), ('cifar conv3', 32, 16, 64, 1),
    ('cifar conv4', 64, 16, 64, 0), ('mnist conv1', 1, 28, 32, 0), ('mnist conv2', 32, 26, 64, 0)]
for N in (128, 1024):
    for name, C, H, K, pad in shapes:
        for Cp in sorted({C, 4 if C < 4 else C, 8 if C < 8 else C}):
            x = torch.randn(N, Cp, H, H, device=dev, dtype=torch.half).to(memory_format=torch.channels_last)
            w = torch.randn(K, Cp, 3, 3, device=dev, dtype=torch.half).to(memory_format=torch.channels_last)
            b = torch.randn(K, device=dev, dtype=torch.half)
            y = F.conv2d(x, w, None, 1, pad)
            gy = torch.randn_like(y)
            fwd = t(lambda: F.conv2d(x, w, None, 1, pad))
            sep = t(lambda: F.relu_(F.conv2d(x, w, None, 1, pad).add_(b.view(1, -1, 1, 1))))
            try:
                fused = t(lambda: torch.cudnn_convolution_relu(x, w, b, (1, 1), (pad, pad), (1, 1), 1))
            except Exception as e:
                fused = float('nan')
            wg = t(lambda: torch.ops.aten.convolution_backward(gy, x, w, None, (1, 1), (pad, pad), (1, 1), False, (0, 0), 1, (False, True, False)))
            dg = t(lambda: torch.ops.aten.convolution_backward(gy, x, w, None, (1, 1), (pad, pad), (1, 1), False, (0, 0), 1, (True, False, False)))
            print(f'N={N:5d} {name:12s} C={Cp}: fwd {fwd:7.1f}  fwd+bias+relu {sep:7.1f}  cudnn fused {fused:7.1f}  wgrad {wg:7.1f}  dgrad {dg:7.1f} us', flush=True)
