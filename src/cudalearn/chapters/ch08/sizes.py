"""Chapter 8's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 8: ResNet skip gradients (PyTorch on the CPU under the simulator; no Numba kernel)
    "ch8.width": {"gpu": 64, "sim": 64},  # fully connected blocks on the 64 pixels of a digit
    "ch8.grad_batch": {"gpu": 128, "sim": 128},
    "ch8.grad_blocks": {"gpu": 50, "sim": 50},  # 2 * 50 + 2 = 102 weight layers
    "ch8.very_deep_blocks": {"gpu": 500, "sim": 500},  # 1002 weight layers
    "ch8.conv_width": {"gpu": 32, "sim": 16},
    "ch8.conv_grad_batch": {"gpu": 32, "sim": 32},
    "ch8.jacobian_width": {"gpu": 6, "sim": 6},  # the +1 check on a block's full Jacobian
    "ch8.train_shallow_blocks": {"gpu": 1, "sim": 1},
    "ch8.train_mid_blocks": {"gpu": 10, "sim": 10},  # 22 layers, about where plain nets start to degrade
    "ch8.train_deep_blocks": {"gpu": 25, "sim": 15},
    "ch8.train_epochs": {"gpu": 20, "sim": 10},
    "ch8.train_seeds": {"gpu": 3, "sim": 1},
    "ch8.batch": {"gpu": 64, "sim": 64},
    "ch8.conv_train_deep_blocks": {"gpu": 15, "sim": 2},  # runs on a GPU only (reference figure)
    "ch8.conv_train_epochs": {"gpu": 10, "sim": 1},
    "ch8.conv_train_seeds": {"gpu": 2, "sim": 1},
    "ch8.skip_batch": {"gpu": 256, "sim": 2},
    "ch8.skip_image": {"gpu": 32, "sim": 8},
    "ch8.skip_width": {"gpu": 64, "sim": 8},
    "ch8.skip_blocks": {"gpu": 16, "sim": 2},
}
