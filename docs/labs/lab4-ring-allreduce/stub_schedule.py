def chunk_beats(beats: int, ranks: int) -> list[int]:
    """Beat boundaries of the P chunks of ``beats`` beats: a list of P + 1 offsets."""
    check_ranks(ranks)
    if not isinstance(beats, int | np.integer) or isinstance(beats, bool) or beats < 0:
        raise ValueError(f"beats must be a non-negative integer, not {beats!r}")
    # TODO(lab4): return the P + 1 beat offsets (Python ints, 0 .. beats) of the P = ranks
    # contiguous chunks: sizes differ by at most one beat, the larger chunks first.
    # Example: chunk_beats(10, 4) == [0, 3, 6, 8, 10].
    raise NotImplementedError("lab 4: chunk_beats() in golden/collective.py "
                              "(docs/labs/lab4-ring-allreduce/README.md)")


def chunk_words(n: int, ranks: int, link_width: int = 1) -> list[int]:
    """Word boundaries of the P chunks of an n-word buffer: a list of P + 1 offsets."""
    n = _check_n(n)
    w = check_link_width(link_width)
    return [min(b * w, n) for b in chunk_beats(-(-n // w), ranks)]


def ring_steps(op, ranks: int, rank: int) -> list[Step]:
    """The steps rank ``rank`` executes for ``op`` (see the module docstring)."""
    op = CollectiveOp(op)
    check_ranks(ranks)
    if not isinstance(rank, int | np.integer) or isinstance(rank, bool) or not 0 <= rank < ranks:
        raise ValueError(f"rank must be in 0..{ranks - 1}, not {rank!r}")
    # TODO(lab4): return the list of Step(send, recv, reduce) this rank executes for `op`:
    # the reduce-scatter's P - 1 steps (reduce=True), the all-gather's P - 1 steps
    # (reduce=False), or both, in that order, for CollectiveOp.ALL_REDUCE. The contract is
    # the module docstring ("Steps").
    raise NotImplementedError("lab 4: ring_steps() in golden/collective.py "
                              "(docs/labs/lab4-ring-allreduce/README.md)")
