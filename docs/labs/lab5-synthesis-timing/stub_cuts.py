# TODO(lab5): spread self.stages (0 to 3) over the multiplier's three cut points: after
# the 24 x 24 significand multiply (cut_mul), after normalisation (cut_norm) and at the
# output (cut_out), each 0 or 1, so that cut_mul + cut_norm + cut_out == self.latency.
# The placeholder below builds the combinational multiplier whatever `stages` says.
cut_mul = cut_norm = cut_out = 0
