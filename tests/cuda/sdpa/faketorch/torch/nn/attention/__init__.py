import contextlib

current = None  # the pinned backend, None: the default dispatch


class SDPBackend:
    MATH = "MATH"
    FLASH_ATTENTION = "FLASH_ATTENTION"
    EFFICIENT_ATTENTION = "EFFICIENT_ATTENTION"
    CUDNN_ATTENTION = "CUDNN_ATTENTION"


@contextlib.contextmanager
def sdpa_kernel(backend):
    global current
    old, current = current, backend
    try:
        yield
    finally:
        current = old
