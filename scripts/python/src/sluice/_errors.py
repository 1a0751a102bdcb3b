class SluiceError(Exception):
    """A broker or cluster could not start, stop or answer as asked; the message says why,
    with the end of the node's log when the node said something."""
