"""The Spark host: operator instances as long-running Spark tasks, coordinator in the driver."""
