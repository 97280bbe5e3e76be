"""The simulation host: one process, simulated time and network, seeded schedules."""
