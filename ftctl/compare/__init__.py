"""Protocols side by side on one recorded fault schedule."""
