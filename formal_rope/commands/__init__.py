"""commands stage."""
