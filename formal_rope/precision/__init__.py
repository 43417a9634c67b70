"""precision stage."""
