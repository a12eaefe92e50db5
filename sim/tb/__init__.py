"""cocotb testbenches (one per design, named for it) and the drivers they share."""
