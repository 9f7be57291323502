"""Networks of Chapters 5 and 7-9: the Numba MLP, AlexNet in two columns, memory accounting, ResNet, ViT."""
