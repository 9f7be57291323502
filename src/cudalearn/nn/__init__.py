"""Networks of Chapters 5 and 7-9, and the one training and data layer they share (Chapters 5, 7-9).

`mlp` (Chapter 5's Numba network, its device data in `epoch_data`),
`alexnet` (Chapter 7's two columns; `step_memory`, `input_pipeline`),
`resnet` (Chapter 8), `vit` (Chapter 9; `op_costs`), and `training`: the
one step, loop, history and accuracy of every chapter that trains.
"""
