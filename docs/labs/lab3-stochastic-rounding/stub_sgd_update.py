# TODO(lab3): the SGD update w <- cast(w - lr * g) of every parameter at once, on the
# vector engine (sim.kernels.nisa), after the all-reduce has summed the gradients:
#   G[:, 0:layout.words]  the gradient block: fp32, the same layout as the parameters
#   P                     the parameter block: bf16 (what the tensor engine multiplies)
#   P32                   the fp32 master weights (mode "fp32" only; P is then their RNE copy,
#                         made at the start of the next step)
#   mode                  "sr" or "rne": the cast of the bf16 weights; "fp32": no cast
#   lr                    the learning rate (_f32(x): x as the fp32 immediate a command takes)
# An SBUF operand may be the destination itself (the same words), so the update can be in place.
raise NotImplementedError("lab 3: the SGD update in sim/kernels/training.py "
                          "(docs/labs/lab3-stochastic-rounding/README.md, Part C)")
