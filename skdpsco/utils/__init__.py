"""Internal utilities (not public API)."""
