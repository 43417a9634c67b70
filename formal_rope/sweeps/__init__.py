"""sweeps stage."""
