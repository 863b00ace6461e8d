"""Delivery by mail of the documents other jobs stored (no browser)."""
