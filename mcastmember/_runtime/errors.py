"""The configuration errors raised at users, by both protocols' settings."""


class ConfigurationError(ValueError):
    """A bad setting: not a multicast group, port out of range, unknown interface..."""


class UnknownSetting(ConfigurationError, TypeError):
    """A keyword no front takes (``McastService(intreface=...)``): a bad
    setting, and the TypeError Python raises for a wrong keyword."""
