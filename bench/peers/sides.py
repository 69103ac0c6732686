class Unsupported(Exception):
    """A side cannot run this case in this dtype; str() is the reason shown in the table."""
