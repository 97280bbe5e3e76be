"""Structures more than one protocol uses: tree clocks (``treeclock``) and the channel
machinery of the log-based protocols (``logged``: seq de-duplication, payload logs)."""
