"""PrivLeak: audit language models for privacy leakage and compare defences."""

__version__ = "0.1.0"
