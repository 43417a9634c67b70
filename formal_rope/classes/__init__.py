"""classes stage."""
