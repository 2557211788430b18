"""The version, in a module of its own: the shells that report it need not import the package."""

__version__ = "0.1.0"
