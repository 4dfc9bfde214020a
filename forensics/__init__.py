"""forensics: audit AI-agent GPU-kernel benchmark run archives, with cited evidence."""

__version__ = "0.1.0"
