# TODO(lab3): drive `up` (m.d.comb; 1 = add one ulp to the kept magnitude)
# for this lane, from the beat's mode and the shifted lane `ls`:
#   beat.mode  Rounding.RNE, .RTZ or .SR (the reserved mode 3: up = 0)
#   ls.kept    the kept significand; ls.kept[0] is the result's LSB
#   ls.frac    the r bits just below the kept LSB, (D << r) >> d
#   ls.lost    1 if a bit of D fell off below ls.frac
#   ls.random  R, this beat's r random bits from the lane's XORWOW
# r (self.random_bits) may be anything from 1 to 32.
raise NotImplementedError("lab 3: the rounding decision in hdl/sru.py "
                          "(docs/labs/lab3-stochastic-rounding/README.md)")
