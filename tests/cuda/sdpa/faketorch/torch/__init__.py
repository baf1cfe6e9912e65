"""A stand-in for the few PyTorch calls bench/gpu/sdpa.py makes, so that its table logic
is tested without PyTorch or a GPU (tests/cuda/sdpa/test_sdpa_table.cmake). Timing is a
fake clock that each attention call advances by its backend's cost, so it is exact."""
__version__ = "0.0-fake"
float16 = "float16"
uint8 = "uint8"
clock_us = 0.0  # advanced by nn.functional.scaled_dot_product_attention
flushes = 0  # L2 flushes (zero_ on the flush buffer): sdpa.py must do one per timed call


class Tensor:
    def __init__(self, value):
        self.value = value

    def float(self):
        return self

    def abs(self):
        return Tensor(abs(self.value))

    def max(self):
        return self

    def all(self):
        return bool(self.value)

    def __sub__(self, other):
        return Tensor(self.value - other.value)

    def __float__(self):
        return float(self.value)


def randn(*shape, device=None, dtype=None):
    n = 1
    for d in shape:
        n *= d
    return Tensor(n)


class _Buffer:
    def __init__(self, nbytes):
        self.nbytes = nbytes

    def zero_(self):
        global flushes
        flushes += 1
        return self


def empty(nbytes, dtype=None, device=None):
    if nbytes < (64 << 20):
        raise RuntimeError(f"flush buffer of {nbytes} bytes is smaller than 64 MiB")
    return _Buffer(nbytes)


def isfinite(t):
    return Tensor(True)


class cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def empty_cache():
        pass

    @staticmethod
    def get_device_properties(index):
        class Props:
            L2_cache_size = 50 << 20
        return Props()

    class Event:
        def __init__(self, enable_timing=False):
            self.t = 0.0

        def record(self):
            self.t = clock_us

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e-3  # ms
