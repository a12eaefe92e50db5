# TODO(lab6): fill y (M x F, fp32) with relu(W.T @ X + b), moving every operand once:
#   * each K tile of X (n rows) is loaded into SBUF once, and stays;
#   * each n x n tile of W is loaded once and used as the stationary operand of every
#     nc_matmul that needs it, one after another (then the core loads it into the array once);
#   * the products of one M tile accumulate over K in PSUM (a tile is at most one bank, `width`
#     words, wide: F comes in pieces), the first K tile overwriting, the others accumulating;
#   * b[m0:m1] goes to SBUF once per M tile, and nisa.activation(out, nl.relu, acc, bias=...)
#     finishes each piece before nisa.dma_copy stores it into y.
# k_tiles and f_pieces above are the (start, stop) of the K tiles and F pieces.
raise NotImplementedError("lab 6: the linear layer kernel in docs/kernels/linear.py "
                          "(docs/labs/lab6-kernels/README.md)")
