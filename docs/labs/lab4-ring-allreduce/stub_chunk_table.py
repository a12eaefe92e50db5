# TODO(lab4): the states "DIVIDE" and "TABLE" of the setup, between IDLE and RUN.
#
# IDLE has set div_src = B (the buffer's beat count, nb bits), div_rem = 0,
# div_q = 0, div_left = nb, and goes to "DIVIDE".
#
# DIVIDE: a long division of B by P, one quotient bit per cycle, MSB first
#   (nb cycles). After it div_q = B // P (q) and div_rem = B % P (e). Then
#   tab_c = tab_acc = 0 and on to "TABLE".
# TABLE: one entry of the chunk table per cycle, c = tab_c = 0, 1, ..., P
#   (P + 1 cycles): starts[c] = the first beat of chunk c (relative to `base`),
#   starts[P] = B; chunk c has q + 1 beats if c < e, else q
#   (golden.collective.chunk_beats). In the cycle that writes starts[P], also
#   set `steps` (2 * (P - 1) for ALL_REDUCE, P - 1 otherwise), start the two
#   walkers on their step-0 chunks -- tx.start(chunk sent), rx.start(chunk
#   received), as golden.collective.ring_steps says for rank self.rank; dec(c)
#   is (c - 1) mod P in hardware -- and go to "RUN".
raise NotImplementedError("lab 4: the chunk table in hdl/collective.py "
                          "(docs/labs/lab4-ring-allreduce/README.md)")
