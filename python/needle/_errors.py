"""needle.NeedleError: every failure from libneedle, with its code."""

_NAMES = {
    -1: "NEEDLE_EIO", -2: "NEEDLE_EFORMAT", -3: "NEEDLE_ENOMEM", -4: "NEEDLE_EINVAL", -5: "NEEDLE_EJSON",
    -6: "NEEDLE_ESCHEMA", -7: "NEEDLE_EUTF8", -8: "NEEDLE_ETOOSMALL", -9: "NEEDLE_EUNSUPPORTED",
    -10: "NEEDLE_EBACKEND", -11: "NEEDLE_ESTATE", -12: "NEEDLE_ELIMIT",
}


class NeedleError(Exception):
    """A libneedle failure.  `code` is the C error code (a negative NEEDLE_E* value,
    `name` its symbol) and the message is the library's own one-line message naming
    the file and the place."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = int(code)
        self.name = _NAMES.get(self.code, "NEEDLE_E?")
        self.message = message

    def __str__(self):
        return "%s (%s)" % (self.message, self.name)
