"""Chapter 7's problem sizes, per run mode (read through `cudalearn.size`)."""

SIZES = {
    # Chapter 7: AlexNet's two-GPU split
    "ch7.batch": {"gpu": 32, "sim": 4},  # the two-column check on the small network
    "ch7.step_batch": {"gpu": 128, "sim": 2},  # timed steps of the 2012 network (its batch of 128)
    "ch7.timed_steps": {"gpu": 20, "sim": 1},
    "ch7.oom_batch": {"gpu": 768, "sim": 768},  # GPU only (the simulator shows its prediction)
    "ch7.act_steps": {"gpu": 200, "sim": 200},  # ReLU vs tanh: at most this many steps per run
    "ch7.drop_train": {"gpu": 300, "sim": 300},  # dropout: training images (each mislabelled w.p. 1/4)
    "ch7.drop_steps": {"gpu": 250, "sim": 250},
    "ch7.loader_batch": {"gpu": 128, "sim": 4},
    "ch7.loader_batches": {"gpu": 12, "sim": 2},
    "ch7.loader_workers": {"gpu": 8, "sim": 2},
    "ch7.loader_source": {"gpu": 256, "sim": 72},  # JPEG side; random crops of loader_crop pixels
    "ch7.loader_crop": {"gpu": 227, "sim": 64},
    "ch7.ddp_batch": {"gpu": 16, "sim": 16},  # the data-parallel check's global batch
    "ch7.ddp_time_steps": {"gpu": 20, "sim": 0},
}
