"""A healthy GPU machine as `cudalearn doctor` reads it: the environment tests plant breakages into."""

GOOD = {
    "mode": "gpu",
    "device": "NVIDIA H200",
    "compute_capability": (9, 0),
    "sms": 132,
    "memory_bytes": 141 * 2**30,
    "driver": "580.159.04",
    "driver_cuda": (13, 0),
    "toolkit": (12, 9),
    "python": "3.11.7",
    "versions": {
        "numba": "0.68.1",
        "numba-cuda": "0.30.4",
        "numpy": "2.4.6",
        "llvmlite": "0.50.0",
        "torch": "2.13.0",
        "cuda-bindings": "12.9.10",
        "cuda-python": None,
    },
    "cuda13_wheels": [],
    "on_colab": False,
}
