"""PyTorch models of Chapters 7-9: AlexNet in two columns, memory accounting, ResNet and ViT."""
