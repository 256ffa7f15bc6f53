"""The configuration contract: the keys, their rules and the fingerprint (``config``),
the command's help (``helptext``) and composing a sweep's jobs once (``compose``)."""

__all__: list[str] = []
