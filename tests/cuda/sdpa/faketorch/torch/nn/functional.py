import os

import torch
import torch.nn.attention as attention

# microseconds per call: the default dispatch is slow, "efficient" fast, cuDNN refuses
COST = {None: 100.0, "FLASH_ATTENTION": 80.0, "EFFICIENT_ATTENTION": 40.0}
timed_calls = [0]  # every call (warm-ups included)


def scaled_dot_product_attention(q, k, v):
    b = attention.current
    if b == "CUDNN_ATTENTION":
        raise RuntimeError("No available kernel. Aborting execution.\n(details)")
    torch.clock_us += COST[b]
    timed_calls[0] += 1
    if os.environ.get("FAKE_TORCH_LOG"):  # calls and flushes so far, for the test
        with open(os.environ["FAKE_TORCH_LOG"], "w") as f:
            f.write(f"{timed_calls[0]} {torch.flushes}\n")
    wrong = b is not None and os.environ.get("FAKE_TORCH_WRONG") == b  # a backend that computes something else
    return torch.Tensor(2.0 if wrong else 1.0)
